#!/usr/bin/env bash
# Runs turbo with the pinned pnpm on PATH: `bash scripts/turbo.sh run build|lint|test`.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/env.sh
exec pnpm exec turbo "$@"
