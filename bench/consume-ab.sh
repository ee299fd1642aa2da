#!/usr/bin/env bash
# Consumer A/B (not a test): one broker of this tree on a temp dir holding 1,000,000 messages of
# 200 B (one partition), read to its end 12 times, alternately by OTHER's SimpleConsumer and this
# tree's, in one Node process (messageBatches, 1 MiB fetches, prefetch 1). Prints one JSON line:
# msg/s of each run, the consumer's CPU time per message (user + system, process.cpuUsage: less
# sensitive than wall time to other load on the machine), the medians and this ÷ other.
# Both trees must be built (`npm run setup`).
#
#   bash bench/consume-ab.sh OTHER        e.g. a checkout of main in /tmp/klog-main
set -euo pipefail
cd "$(dirname "$0")/.."
HERE=$(pwd)
OTHER=$(cd "$1" && pwd)
WORK=$(mktemp -d -t klog-consume-ab-XXXXXX)
source bench/lib/broker.sh
start_broker
trap 'kill $BROKER 2>/dev/null || true; wait $BROKER 2>/dev/null || true; rm -rf "$WORK"' EXIT
node_modules/.bin/klog perf produce --broker-list "127.0.0.1:$PORT" --topic ab --messages 1000000 --size 200 --batch-size 50 --acks 2 --json > /dev/null
node --input-type=module - "$PORT" "$OTHER" "$HERE" <<'JS'
const [port, other, here] = process.argv.slice(2);
const libs = { other: await import(`${other}/packages/client/dist/index.js`), here: await import(`${here}/packages/client/dist/index.js`) };
async function readAll(lib) {
  const c = new lib.SimpleConsumer({ host: '127.0.0.1', port: Number(port) });
  const end = await c.latestOffset('ab', 0);
  let n = 0;
  const t = performance.now();
  const cpu0 = process.cpuUsage();
  for await (const batch of c.messageBatches({ topic: 'ab', partition: 0, offset: 0, maxWaitMs: 0 })) {
    n += batch.length;
    if (batch[batch.length - 1].nextOffset >= end) break;
  }
  const seconds = (performance.now() - t) / 1000;
  const cpu = process.cpuUsage(cpu0);
  await c.close();
  return { rate: Math.round(n / seconds), cpuNsPerMessage: Math.round(((cpu.user + cpu.system) * 1000) / n) };
}
const runs = { other: [], here: [] };
for (let r = 0; r < 12; r++) for (const name of r % 2 ? ['here', 'other'] : ['other', 'here']) runs[name].push(await readAll(libs[name]));
const median = (a) => [...a].sort((x, y) => x - y)[a.length >> 1];
const m = (name, k) => median(runs[name].map((x) => x[k]));
console.log(JSON.stringify({
  date: new Date().toISOString(), other, here, runs,
  medianRate: { other: m('other', 'rate'), here: m('here', 'rate') }, rateRatio: +(m('here', 'rate') / m('other', 'rate')).toFixed(3),
  medianCpuNsPerMessage: { other: m('other', 'cpuNsPerMessage'), here: m('here', 'cpuNsPerMessage') }, cpuRatio: +(m('here', 'cpuNsPerMessage') / m('other', 'cpuNsPerMessage')).toFixed(3),
}));
JS
