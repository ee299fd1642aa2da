#!/usr/bin/env bash
# The broker's CPU at 100 msg/s beside the floor of its system calls (not a test): one broker
# of this tree (`klog-broker --num-partitions 1`, default settings), 3 s of `klog perf latency
# --rate 100` to warm it, then ROUNDS rounds of: `node bench/fdatasync-floor.mjs relay` (a
# Node process doing a broker's reads, append, fdatasync through klog's flusher and writes per
# message at 100 msg/s, with no klog code between them), then 10 s of `klog perf latency
# --rate 100` against the broker, whose CPU ticks (/proc/PID/stat utime + stime, USER_HZ) over
# that probe give its % of a core. Prints one JSON line per round: the floor's and the broker's
# % of a core, their ratio, and the probe's p50 and p99 (ms).
#
#   bash bench/broker-cpu-100.sh [ROUNDS]      (default 4)
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS="${1:-4}"
WORK=$(mktemp -d -t klog-cpu100-XXXXXX)
# shellcheck source=bench/lib/broker.sh
source bench/lib/broker.sh
trap 'kill "$BROKER" 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$WORK"' EXIT
start_broker --num-partitions 1
# start_broker's log holds the broker's stdout; what it printed to stderr is on the terminal.
[ -n "$PORT" ] || { cat "$WORK/broker.log" >&2; echo "broker-cpu-100.sh: the broker did not start" >&2; exit 1; }
HZ=$(getconf CLK_TCK)
ticks() { awk '{ print $14 + $15 }' "/proc/$BROKER/stat"; }
probe() { node_modules/.bin/klog perf latency --broker "127.0.0.1:$PORT" --topic cpu100 --rate 100 --seconds "$1" --warmup-seconds 0 --json; }
probe 3 > /dev/null
for r in $(seq "$ROUNDS"); do
  floor=$(node bench/fdatasync-floor.mjs relay)
  t0=$(ticks); s0=$(date +%s%N)
  lat=$(probe 10)
  t1=$(ticks); s1=$(date +%s%N)
  node -e '
    const [round, floor, lat, ticks, hz, ns] = process.argv.slice(1);
    const f = JSON.parse(floor), l = JSON.parse(lat);
    const broker = +(100 * (ticks / hz) / (ns / 1e9)).toFixed(2);
    if (l.received !== l.sent) { console.error(`round ${round}: the probe lost messages (${l.sent} sent, ${l.received} received)`); process.exit(1); }
    console.log(JSON.stringify({ round: +round, floorPercent: f.percentOfACore, brokerPercent: broker, ratio: +(broker / f.percentOfACore).toFixed(2), p50Ms: +l.p50Ms.toFixed(2), p99Ms: +l.p99Ms.toFixed(2) }));
  ' "$r" "$floor" "$lat" "$((t1 - t0))" "$HZ" "$((s1 - s0))"
done
