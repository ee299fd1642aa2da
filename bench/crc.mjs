// The cost of a message's CRC (not a test): what docs/benchmarks.md quotes for the CRC addon
// against zlib. Run after `npm run setup` (the addon is built by `pnpm install` with ISA-L).
//
//   node bench/crc.mjs [--calls 2000000]
//
// In this process, for payloads of 16, 50, 200 and 1000 bytes: ns per call of `zlib.crc32` on the
// payload (a producer has it) and on a view cut for the call (as a reader checking a received set
// does), and of the addon's `crc32(bytes, start, end)`;
// then, for sets of 1, 50 and 5,000 messages of 200 bytes, ns per message of the addon's
// `writeCrcs` and `firstBadCrc` over the whole set. Prints one JSON line per measurement.
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { crc32 as zlibCrc32 } from 'node:zlib';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const { crcAddon, encodeMessageSet } = await import(join(root, 'packages/protocol/dist/index.js'));

const { values } = parseArgs({ options: { calls: { type: 'string', default: '2000000' } } });
const calls = Number(values.calls);
if (crcAddon === undefined) {
  console.error('bench/crc.mjs: the CRC addon is not loaded (see README: ISA-L); nothing to compare');
  process.exit(1);
}

/** ns per unit of `f(i)` over `calls` units, `per` units per call, after a warm-up. */
function measure(f, per = 1) {
  let sink = 0;
  for (let i = 0; i < calls / per / 10; i++) sink ^= f(i) ?? 0;
  const t = process.hrtime.bigint();
  for (let i = 0; i < calls / per; i++) sink ^= f(i) ?? 0;
  const ns = Number(process.hrtime.bigint() - t) / calls;
  return { ns: Math.round(ns * 10) / 10, sink: sink & 1 };
}

const data = Buffer.alloc(1 << 20);
for (let i = 0; i < data.length; i++) data[i] = (i * 7) & 0xff;
for (const bytes of [16, 50, 200, 1000]) {
  const payloads = Array.from({ length: 4096 }, (_, k) => data.subarray(k * 200, k * 200 + bytes));
  const zlibPayload = measure((i) => zlibCrc32(payloads[i & 4095]));
  const zlib = measure((i) => {
    const at = (i & 4095) * 200;
    return zlibCrc32(data.subarray(at, at + bytes));
  });
  const addon = measure((i) => {
    const at = (i & 4095) * 200;
    return crcAddon.crc32(data, at, at + bytes);
  });
  console.log(JSON.stringify({ measure: 'one CRC per call', payloadBytes: bytes, zlibOnPayloadNs: zlibPayload.ns, zlibOnViewNs: zlib.ns, addonNs: addon.ns }));
}
for (const messages of [1, 50, 5000]) {
  const set = encodeMessageSet(Array.from({ length: messages }, (_, i) => data.subarray(i % 4096, (i % 4096) + 200)));
  if (crcAddon.firstBadCrc(set, 0, set.length) !== -1) throw new Error('a set encodeMessageSet wrote has a bad CRC');
  const write = measure(() => crcAddon.writeCrcs(set, 0, set.length), messages);
  const check = measure(() => crcAddon.firstBadCrc(set, 0, set.length), messages);
  console.log(JSON.stringify({ measure: 'CRCs of a set per call', messages, payloadBytes: 200, writeNsPerMessage: write.ns, checkNsPerMessage: check.ns }));
}
