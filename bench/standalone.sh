#!/usr/bin/env bash
# Standalone throughput (not a test): one broker on a temp dir, `klog perf produce` with
# 200-byte messages in batches of 50 and of 1, then `klog perf consume` of the first run's
# partition. Prints one JSON line per run, after one line that says where and when it ran.
# Run `npm run setup` first. What the machine allows without klog: `node bench/ceilings.mjs`.
#
#   bash bench/standalone.sh [MESSAGES [BROKER FLAGS...]]   (default 1000000; flags go to klog-broker)
set -euo pipefail
cd "$(dirname "$0")/.."
N="${1:-1000000}"
shift $(( $# > 0 ? 1 : 0 ))
BIN=node_modules/.bin
WORK=$(mktemp -d -t klog-bench-XXXXXX)
trap 'kill $BROKER 2>/dev/null || true; wait $BROKER 2>/dev/null || true; rm -rf "$WORK"' EXIT
source bench/lib/broker.sh
start_broker "$@"
B="127.0.0.1:$PORT"
echo "# environment"
node -e 'const os=require("os");console.log(JSON.stringify({date:new Date().toISOString(),node:process.version,kernel:os.release(),cpus:os.cpus().length,cpuModel:os.cpus()[0].model,memoryGiB:Math.round(os.totalmem()/2**30),loadAverage:os.loadavg().map((l)=>+l.toFixed(2))}))'
echo "# produce, batches of 50"
"$BIN/klog" perf produce --broker-list "$B" --topic bench50 --messages "$N" --size 200 --batch-size 50 --json
echo "# produce, batches of 1"
"$BIN/klog" perf produce --broker-list "$B" --topic bench1 --messages $((N / 10)) --size 200 --batch-size 1 --linger-ms 0 --json
echo "# consume (1 MiB fetches)"
"$BIN/klog" perf consume --broker "$B" --topic bench50 --messages "$N" --json
echo "# bytes on disk per message"
node -e 'const fs=require("fs"),p=require("path");const d=process.argv[1];let b=0;for(const f of fs.readdirSync(d))b+=fs.statSync(p.join(d,f)).size;console.log(JSON.stringify({topic:"bench50",bytesOnDisk:b,messages:+process.argv[2],bytesPerMessage:b/+process.argv[2]}))' "$WORK/logs/bench50-0" "$N"
