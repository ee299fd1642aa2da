#!/usr/bin/env bash
# The Kafka listener beside klog's own protocol, in one run on one broker (not a test):
# `klog perf produce` / `klog perf consume` of MESSAGES messages of 200 bytes (batches of 50),
# `kcat -P` of a file of MESSAGES lines of 200 bytes (199 + newline; acks 1, and librdkafka's
# default acks -1) and `kcat -C` of them (timed into /dev/null, as `klog perf consume` keeps
# nothing: `-c MESSAGES`, which exits at the last message, and `-e`, which exits at the end of
# the partition, once as librdkafka is set by default and once with its fetch.wait.max.ms at 50
# ms; then once more, untimed, into a file compared with the one produced), and
# kafkajs (bench/kafka-kafkajs.mjs, MESSAGES / 5).
# Before the runs it writes and deletes MESSAGES/800 MiB (more than the runs write), so that they
# write into pages the machine has used (`touch_page_cache`, bench/page-cache-touch.mjs).
# Prints one JSON line per run, after one line that says where and when it ran.
# Run `npm run setup` first; needs Debian's kcat (`bash scripts/kcat.sh install`).
#
#   bash bench/kafka.sh [MESSAGES]        (a multiple of 10000; default 1000000)
set -euo pipefail
cd "$(dirname "$0")/.."
N="${1:-1000000}"
if ! [[ "$N" =~ ^[1-9][0-9]*0000$ ]]; then echo "kafka.sh: MESSAGES must be a multiple of 10000, not $N" >&2; exit 2; fi
BIN=node_modules/.bin
WORK=$(mktemp -d -t klog-kafka-bench-XXXXXX)
trap 'kill $BROKER 2>/dev/null || true; wait $BROKER 2>/dev/null || true; rm -rf "$WORK"' EXIT
source bench/lib/broker.sh
start_broker --kafka-port 0
KPORT=$KAFKA_PORT
B="127.0.0.1:$PORT"
K="127.0.0.1:$KPORT"
node -e 'const os=require("os");console.log(JSON.stringify({date:new Date().toISOString(),node:process.version,kernel:os.release(),cpus:os.cpus().length,cpuModel:os.cpus()[0].model,memoryGiB:Math.round(os.totalmem()/2**30),loadAverage:os.loadavg().map((l)=>+l.toFixed(2)),kcat:require("child_process").execSync("kcat -V").toString().split("\n")[0]}))'
touch_page_cache $((N / 800))
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
# Timed into /dev/null: kcat's output through a pipe into a checker on the same two cores made
# librdkafka's local queue fill (queued.min.messages, 100,000), after which it fetches again only
# at its next timed wake-up, up to a second later, so the rate measured the checker. `-c` exits
# at the last message; `-e` exits at the end of the partition, which librdkafka reports only
# after a fetch at the end comes back empty: the broker holds that fetch up to its max_wait_ms
# (librdkafka's fetch.wait.max.ms, 500 ms), as Kafka does while fewer than min_bytes are there.
# `-c` is given `-e` too, so that it never waits for messages that are not there. What the timed
# runs read is not counted; the untimed run after them is compared byte for byte.
discard() { "$@" > /dev/null; }
timed kcat 'consume to the last message (-c)' "$N" discard kcat -b "$K" -C -c "$N" -e -q -o beginning -t kcat-acks1
timed kcat 'consume to the end of partition (-e)' "$N" discard kcat -b "$K" -C -e -q -o beginning -t kcat-acks1
# The same with librdkafka's fetch.wait.max.ms at 50 ms: what the held last fetch costs.
timed kcat 'consume to the end of partition (-e, fetch.wait.max.ms=50)' "$N" discard kcat -b "$K" -C -e -q -o beginning -t kcat-acks1 -X fetch.wait.max.ms=50
kcat -b "$K" -C -e -q -o beginning -t kcat-acks1 > "$WORK/consumed.txt"
if cmp -s "$WORK/consumed.txt" "$WORK/lines.txt"; then
  echo '{"client":"kcat","op":"consume, compared with the file produced","identical":true}'
else
  echo '{"client":"kcat","op":"consume, compared with the file produced","identical":false}'
  echo "kafka.sh: kcat -C gave back other bytes than were produced" >&2
  exit 1
fi
rm -f "$WORK/consumed.txt"
node bench/kafka-kafkajs.mjs "$K" $((N / 5))
