#!/usr/bin/env bash
# Sets up a klog checkout on a machine with only Node.js (>= 20.15) and npm: fetches the pinned
# pnpm, installs the workspace (building the sendfile addon when it can) and builds it.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/env.sh
pnpm install --frozen-lockfile --reporter=silent
pnpm exec turbo run build --output-logs=errors-only
