#!/usr/bin/env bash
# Sets up a klog checkout on a machine with only Node.js (>= 20.15) and npm: fetches the pinned
# pnpm, installs the workspace (building the native addons when it can: sendfile, and the CRC
# addon, for which it installs ISA-L when it may use apt) and builds it.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/env.sh
# ISA-L for the CRC addon, when it can be installed without asking for a password.
bash scripts/isal.sh install || echo "setup: no ISA-L (Debian libisal-dev): klog computes CRCs in JavaScript" >&2
pnpm install --frozen-lockfile --reporter=silent
pnpm exec turbo run build --output-logs=errors-only
