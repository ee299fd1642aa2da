#!/usr/bin/env bash
# Consume throughput side by side (not a test): one broker of this checkout and one of OTHER (a
# built checkout, e.g. of main), each given the same 1,000,000 messages of 200 B in batches of
# 50, then 5 rounds of `klog perf consume` of all of them from each, alternating; FIRST says
# whose consume goes first in a round (other or this, default other). Prints one JSON line per
# consume, prefixed by `other` or `this`.
#
#   bash bench/consume-ab-brokers.sh OTHER [FIRST]
set -euo pipefail
cd "$(dirname "$0")/.."
OTHER=$(cd "$1" && pwd)
FIRST=${2:-other}
[ -x "$OTHER/apps/broker/bin/klog-broker.js" ] || { echo "consume-ab-brokers.sh: $OTHER has no apps/broker/bin/klog-broker.js command" >&2; exit 1; }
WA=$(mktemp -d); WB=$(mktemp -d)
# Each tree's `klog-broker` command, with the Node flags of its first line (docs/design.md §10).
"$OTHER/apps/broker/bin/klog-broker.js" --port 0 --log-dir "$WA/logs" > "$WA/b.log" 2>&1 & PA=$!
apps/broker/bin/klog-broker.js --port 0 --log-dir "$WB/logs" > "$WB/b.log" 2>&1 & PB=$!
trap 'kill $PA $PB 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$WA" "$WB"' EXIT
for _ in $(seq 150); do grep -q listening "$WA/b.log" && grep -q listening "$WB/b.log" && break; sleep 0.2; done
port() { grep -o '"port":[0-9]*' "$1/b.log" | head -1 | cut -d: -f2; }
A=127.0.0.1:$(port "$WA"); B=127.0.0.1:$(port "$WB")
K=tools/klog/dist/main.js
for b in "$A" "$B"; do node $K perf produce --broker-list "$b" --topic c --messages 1000000 --size 200 --batch-size 50 --json > /dev/null; done
sleep 2
consume() { echo "$1 $(node $K perf consume --broker "$2" --topic c --messages 1000000 --json)"; }
for _ in 1 2 3 4 5; do
  if [ "$FIRST" = this ]; then consume this "$B"; consume other "$A"; else consume other "$A"; consume this "$B"; fi
done
