#!/usr/bin/env bash
# Throughput under the group-commit flush (the default, docs/design.md §10) beside the paper's
# interval flush (`--flush-policy interval`), in one run (not a test): ROUNDS rounds, each
# `bench/standalone.sh MESSAGES` once with each policy, in alternating order, then the median
# over the rounds of group ÷ interval for produce in batches of 50, in batches of 1, and
# consume. Prints standalone.sh's JSON lines (each tagged with its policy and round), then one
# summary line.
#
#   bash bench/flush-policy-ab.sh [ROUNDS [MESSAGES]]      (default 5 rounds of 1000000)
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS="${1:-5}"
N="${2:-1000000}"
OUT=$(mktemp -t klog-flush-ab-XXXXXX)
trap 'rm -f "$OUT"' EXIT
run() { # policy round
  local flags=()
  [ "$1" = interval ] && flags=(--flush-policy interval)
  bash bench/standalone.sh "$N" "${flags[@]}" | node -e '
    const [policy, round] = process.argv.slice(1);
    let test = "";
    for (const l of require("fs").readFileSync(0, "utf8").split("\n")) {
      if (l.startsWith("# ")) { test = l.slice(2); continue; }
      if (!l.startsWith("{")) continue;
      console.log(JSON.stringify({ policy, round: +round, run: test, ...JSON.parse(l) }));
    }' "$1" "$2" | tee -a "$OUT"
}
for r in $(seq "$ROUNDS"); do
  if [ $((r % 2)) -eq 1 ]; then run group "$r"; run interval "$r"; else run interval "$r"; run group "$r"; fi
done
node -e '
  const lines = require("fs").readFileSync(process.argv[1], "utf8").trim().split("\n").map((l) => JSON.parse(l));
  const median = (xs) => { const s = [...xs].sort((a, b) => a - b); const m = s.length >> 1; return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2; };
  const summary = { summary: "group ÷ interval, median over rounds", rounds: +process.argv[2] };
  for (const run of ["produce, batches of 50", "produce, batches of 1", "consume (1 MiB fetches)"]) {
    const rate = (policy, round) => lines.find((l) => l.policy === policy && l.round === round && l.run === run)?.msgsPerSec;
    const ratios = [];
    for (let r = 1; r <= summary.rounds; r++) {
      const g = rate("group", r), i = rate("interval", r);
      if (!(g > 0 && i > 0)) { console.error(`flush-policy-ab.sh: round ${r} has no "${run}" figure for both policies`); process.exit(1); }
      ratios.push(g / i);
    }
    summary[run] = { median: +median(ratios).toFixed(3), min: +Math.min(...ratios).toFixed(3), max: +Math.max(...ratios).toFixed(3) };
  }
  console.log(JSON.stringify(summary));' "$OUT" "$ROUNDS"
