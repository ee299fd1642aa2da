/** gzip message sets (docs/format.md §2b): wrapping, the decompression cap, and what readers refuse. */
import { gunzipSync, gzipSync } from 'node:zlib';
import { describe, expect, it } from 'vitest';
import {
  CompressionCodec,
  compressionCodecOf,
  decodeMessageAt,
  decompressWrapper,
  encodeMessage,
  encodeMessageSet,
  encodeMessageSetWithHeaders,
  ErrorCode,
  gzipMessageSet,
  iterateInnerMessageSet,
  ProtocolError,
  readMessageHeader,
} from '../src/index.js';

describe('gzip message sets', () => {
  it('gzipMessageSet makes one codec-1 message whose payload is the gzip of the inner set', async () => {
    const inner = encodeMessageSetWithHeaders([{ value: Buffer.from('a') }, { value: Buffer.from('b'), header: { key: Buffer.from('k'), timestamp: 5 } }]);
    const wrapper = await gzipMessageSet(inner);
    const m = decodeMessageAt(wrapper);
    expect(m.attributes).toBe(CompressionCodec.Gzip);
    expect(wrapper.length).toBe(10 + m.payload.length);
    expect(gunzipSync(m.payload)).toEqual(inner);
    const out = await decompressWrapper(m, 1 << 20);
    const messages = [...iterateInnerMessageSet(out!)];
    expect(messages.map((x) => x.position)).toEqual([0, 11]);
    expect(messages.map((x) => readMessageHeader(x))).toEqual([
      { header: undefined, value: Buffer.from('a') },
      { header: { key: Buffer.from('k'), timestamp: 5 }, value: Buffer.from('b') },
    ]);
  });

  it('decompressWrapper gives undefined past maxBytes, and exactly maxBytes is allowed', async () => {
    const inner = encodeMessageSet([Buffer.alloc(1000)]);
    const m = decodeMessageAt(await gzipMessageSet(inner));
    expect(await decompressWrapper(m, inner.length - 1)).toBeUndefined();
    expect(await decompressWrapper(m, inner.length)).toEqual(inner);
  });

  it('refuses bad gzip, unsupported codecs, a header bit on the wrapper, partial and nested inner messages', async () => {
    const invalid = async (p: Promise<unknown> | (() => unknown), why: RegExp): Promise<void> => {
      const e = await (typeof p === 'function' ? Promise.resolve().then(p) : p).catch((x: unknown) => x);
      expect(e).toBeInstanceOf(ProtocolError);
      expect(e).toMatchObject({ code: ErrorCode.InvalidMessage });
      expect((e as Error).message).toMatch(why);
    };
    await invalid(decompressWrapper({ attributes: 1, payload: Buffer.from('nope') }, 100), /does not decompress/);
    await invalid(decompressWrapper({ attributes: 2, payload: Buffer.alloc(4) }, 100), /snappy/);
    await invalid(decompressWrapper({ attributes: 3, payload: Buffer.alloc(4) }, 100), /codec 3/);
    await invalid(decompressWrapper({ attributes: 1 | 4, payload: gzipSync(Buffer.alloc(0)) }, 100), /metadata header/);
    const set = encodeMessageSet([Buffer.from('xyz')]);
    await invalid(() => [...iterateInnerMessageSet(set.subarray(0, set.length - 1))], /ends inside a message/);
    await invalid(() => [...iterateInnerMessageSet(encodeMessage(gzipSync(set), 1))], /itself compressed/);
    expect([...iterateInnerMessageSet(Buffer.alloc(0))]).toEqual([]);
  });

  it('compressionCodecOf names codecs 0 and 1 only', () => {
    expect(compressionCodecOf('none')).toBe(0);
    expect(compressionCodecOf('gzip')).toBe(1);
    expect(() => compressionCodecOf('snappy' as 'gzip')).toThrow(RangeError);
  });
});
