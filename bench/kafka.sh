#!/usr/bin/env bash
# The Kafka listener beside klog's own protocol, in one run on one broker (not a test):
# `klog perf produce` / `klog perf consume` of MESSAGES messages of 200 bytes (batches of 50),
# `kcat -P` of a file of MESSAGES lines of 200 bytes (199 + newline; acks 1, and librdkafka's
# default acks -1) and `kcat -C -e` of them (compared with the file as it streams; timed to the
# last message and to kcat's exit, bench/kcat-consume.mjs), and kafkajs
# (bench/kafka-kafkajs.mjs, MESSAGES / 5).
# Prints one JSON line per run, after one line that says where and when it ran.
# Run `npm run setup` first; needs Debian's kcat (`bash scripts/kcat.sh install`).
#
#   bash bench/kafka.sh [MESSAGES]        (default 1000000)
set -euo pipefail
cd "$(dirname "$0")/.."
N="${1:-1000000}"
BIN=node_modules/.bin
WORK=$(mktemp -d -t klog-kafka-bench-XXXXXX)
trap 'kill $BROKER 2>/dev/null || true; wait $BROKER 2>/dev/null || true; rm -rf "$WORK"' EXIT
source bench/lib/broker.sh
start_broker --kafka-port 0
KPORT=$KAFKA_PORT
B="127.0.0.1:$PORT"
K="127.0.0.1:$KPORT"
node -e 'const os=require("os");console.log(JSON.stringify({date:new Date().toISOString(),node:process.version,kernel:os.release(),cpus:os.cpus().length,cpuModel:os.cpus()[0].model,memoryGiB:Math.round(os.totalmem()/2**30),loadAverage:os.loadavg().map((l)=>+l.toFixed(2)),kcat:require("child_process").execSync("kcat -V").toString().split("\n")[0]}))'
node -e 'const l="x".repeat(199)+"\n";const fs=require("fs");const fd=fs.openSync(process.argv[1],"w");const chunk=l.repeat(10000);for(let i=0;i<+process.argv[2]/10000;i++)fs.writeSync(fd,chunk);fs.closeSync(fd)' "$WORK/lines.txt" "$N"

# Seconds a command takes, as a JSON line with its rate.
timed() {
  local client=$1 op=$2 messages=$3; shift 3
  local t0 t1
  t0=$(date +%s.%N)
  "$@"
  t1=$(date +%s.%N)
  node -e 'const [c,o,m,a,b]=process.argv.slice(1);const s=b-a;console.log(JSON.stringify({client:c,op:o,messages:+m,seconds:+s.toFixed(3),messagesPerSecond:Math.round(m/s),mbPerSecond:+(m*200/s/1e6).toFixed(2)}))' "$client" "$op" "$messages" "$t0" "$t1"
}

"$BIN/klog" perf produce --broker-list "$B" --topic native --messages "$N" --size 200 --batch-size 50 --json
timed kcat 'produce acks 1' "$N" kcat -b "$K" -P -t kcat-acks1 -X acks=1 -l "$WORK/lines.txt"
timed kcat 'produce acks -1' "$N" kcat -b "$K" -P -t kcat-acksall -l "$WORK/lines.txt"
"$BIN/klog" perf consume --broker "$B" --topic native --messages "$N" --json
# Compared with the file as it streams (bench/kcat-consume.mjs reads the pipe), not written to
# disk first: on a loaded machine writing 200 MB out can take longer than the fetching measured
# here. Its rate is to the last message (all but kcat's 4096-byte output buffer, which it writes
# at its exit, read); wallSeconds is to kcat's exit, which adds the broker's hold of the last,
# empty fetch (fetch.wait.max.ms).
T0=$(date +%s.%N)
kcat -b "$K" -C -e -q -o beginning -t kcat-acks1 | node bench/kcat-consume.mjs "$WORK/lines.txt" "$N" "$T0"
node bench/kafka-kafkajs.mjs "$K" $((N / 5))
