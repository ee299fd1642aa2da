#!/usr/bin/env bash
# Runs every test of the workspace (after scripts/setup.sh): type checks, then each package's
# vitest suite through turbo, with a ZooKeeper server for the suites that need one and Chromium
# for the ones that open a page. Ends with one line "tests: N passed, N failed".
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/env.sh

# The HTML report tests of apps/audit open the page in Debian's Chromium.
if [ -f scripts/chromium.sh ]; then
  bash scripts/chromium.sh install
fi

# The Kafka listener's tests (tests/kafka) run Debian's kcat (librdkafka).
if [ -f scripts/kcat.sh ]; then
  bash scripts/kcat.sh install
fi

zk_started=""
if [ -f scripts/zookeeper.sh ] && [ -z "${KLOG_ZK_CONNECT:-}" ]; then
  bash scripts/zookeeper.sh install
  export KLOG_ZK_CONNECT=$(bash scripts/zookeeper.sh start)
  zk_started=1
fi
cleanup() { if [ -n "$zk_started" ]; then bash scripts/zookeeper.sh stop || true; fi; }
trap cleanup EXIT

find . -name 'test-results.json' -not -path '*/node_modules/*' -delete
status=0
pnpm exec turbo run lint --output-logs=errors-only || status=$?
if [ "$status" -eq 0 ]; then
  pnpm exec turbo run test --concurrency=1 --continue --output-logs=full || status=$?
fi
node scripts/test-summary.mjs "$status" || status=$?
exit "$status"
