// The protocol paths whose caches moved from module state onto instances, timed side by side in
// one process for two builds of @klog/protocol (e.g. a checkout of the previous commit and this
// one), rounds interleaved: decoding FETCH requests that name one topic (the broker's request
// decoder) and checking a 5,000-message set's CRCs in JavaScript (MessageSetCrc, as readers do
// without the CRC addon: run with KLOG_DISABLE_NATIVE_CRC=1). Prints one JSON line per build.
//
//   KLOG_DISABLE_NATIVE_CRC=1 node bench/protocol-caches.mjs OLD/packages/protocol NEW/packages/protocol
import { pathToFileURL } from 'node:url';
import { join } from 'node:path';

const [oldDir, newDir] = process.argv.slice(2);
if (!oldDir || !newDir) throw new Error('usage: node bench/protocol-caches.mjs OLD/packages/protocol NEW/packages/protocol');
const builds = await Promise.all([oldDir, newDir].map(async (dir) => ({ dir, p: await import(pathToFileURL(join(dir, 'dist', 'index.js')).href) })));

const frames = 200_000;
function decodeFetches({ p }) {
  const body = p.encodeFetchRequest({ topic: 'events', partition: 0, offset: 12345, maxBytes: 1 << 20 }).subarray(4);
  const decoder = p.RequestDecoder ? new p.RequestDecoder() : { decode: (f) => p.decodeRequest(f) };
  const t = process.hrtime.bigint();
  for (let i = 0; i < frames; i++) decoder.decode(body);
  return Number(process.hrtime.bigint() - t) / frames;
}
const setMessages = 5000;
function scanSets({ p }) {
  const set = p.encodeMessageSet(Array.from({ length: setMessages }, (_, i) => Buffer.alloc(200, i)));
  const t = process.hrtime.bigint();
  for (let i = 0; i < 40; i++) if (p.scanMessageSet(set).count !== setMessages) throw new Error('bad scan');
  return Number(process.hrtime.bigint() - t) / (40 * setMessages);
}
const results = builds.map(() => ({ decodeNs: [], scanNs: [] }));
for (let round = 0; round < 7; round++) {
  builds.forEach((b, i) => {
    results[i].decodeNs.push(decodeFetches(b));
    results[i].scanNs.push(scanSets(b));
  });
}
const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
builds.forEach((b, i) => {
  const crc = b.p.crcSupport.path;
  console.log(JSON.stringify({ build: b.dir, crc, fetchDecodeNsPerRequest: +median(results[i].decodeNs).toFixed(1), scanNsPerMessage: +median(results[i].scanNs).toFixed(1) }));
});
