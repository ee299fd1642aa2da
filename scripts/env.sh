# Sourced by the other scripts: puts the pnpm version pinned in package.json on PATH, fetching
# it from the npm registry into a per-user cache (no root needed) when it is not there yet.
PNPM_VERSION=$(node -p "require('./package.json').packageManager.split('@')[1]")
PNPM_HOME_DIR="${XDG_CACHE_HOME:-$HOME/.cache}/klog/pnpm-$PNPM_VERSION"
if ! command -v pnpm >/dev/null 2>&1 || [ "$(pnpm --version 2>/dev/null)" != "$PNPM_VERSION" ]; then
  if [ ! -x "$PNPM_HOME_DIR/node_modules/.bin/pnpm" ]; then
    npm install --silent --no-save --prefix "$PNPM_HOME_DIR" "pnpm@$PNPM_VERSION" >/dev/null
  fi
  export PATH="$PNPM_HOME_DIR/node_modules/.bin:$PATH"
fi
