#!/usr/bin/env bash
# Sets up a klog checkout on a machine with only Node.js (>= 20.15) and npm:
# fetches the pinned pnpm from the npm registry, installs the workspace and builds it.
set -euo pipefail
cd "$(dirname "$0")/.."
PNPM_VERSION=$(node -p "require('./package.json').packageManager.split('@')[1]")
PNPM_HOME_DIR="${XDG_CACHE_HOME:-$HOME/.cache}/klog/pnpm-$PNPM_VERSION"
if ! command -v pnpm >/dev/null 2>&1 || [ "$(pnpm --version 2>/dev/null)" != "$PNPM_VERSION" ]; then
  # A user-level install that needs no root: pnpm goes into a per-user cache.
  if [ ! -x "$PNPM_HOME_DIR/node_modules/.bin/pnpm" ]; then
    npm install --silent --no-save --prefix "$PNPM_HOME_DIR" "pnpm@$PNPM_VERSION" >/dev/null
  fi
  export PATH="$PNPM_HOME_DIR/node_modules/.bin:$PATH"
fi
pnpm install --frozen-lockfile=false --reporter=silent
pnpm exec turbo run build --output-logs=errors-only
