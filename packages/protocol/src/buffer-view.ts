/**
 * Views on received bytes. Messages are handed out as views on the buffer they arrived in, never
 * copies, so a view is made per message; this makes it cheaply.
 *
 * `buf.subarray(start, end)` looks up the Buffer subclass through `Symbol.species`, clamps its
 * arguments and then constructs it; constructing that class directly (Node exposes it as
 * `Buffer[Symbol.species]`, the class it uses for every Buffer) is about 3 times cheaper: 48 ns
 * against 159 ns per 200-byte view (CPU time, 2-core AMD EPYC, Node 20; docs/benchmarks.md).
 */

type ViewConstructor = new (memory: ArrayBufferLike, byteOffset: number, length: number) => Buffer;

/** The class of every Buffer, as `subarray` finds it; undefined where a runtime does not expose it. */
const BufferClass: ViewConstructor | undefined = (Buffer as unknown as { [Symbol.species]?: ViewConstructor })[Symbol.species];
const direct = BufferClass !== undefined && new BufferClass(new ArrayBuffer(1), 0, 1) instanceof Buffer;

/**
 * A Buffer that shares memory with `buf[start, end)`, as `buf.subarray(start, end)` but without
 * clamping: the caller guarantees `0 <= start <= end <= buf.length`.
 */
export function bufferView(buf: Buffer, start: number, end: number): Buffer {
  return direct ? new BufferClass(buf.buffer, buf.byteOffset + start, end - start) : buf.subarray(start, end);
}
