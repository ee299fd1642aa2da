#!/usr/bin/env bash
# Installs Debian's headless-capable Chromium (the package `chromium`, /usr/bin/chromium) for
# the tests that open a generated page in a browser (apps/audit: the HTML report).
#
#   scripts/chromium.sh install   install the package (apt, non-interactive; root or sudo);
#                                 does nothing when /usr/bin/chromium is already there
#   scripts/chromium.sh status    print the path and version (exit 0), or say it is missing (exit 3)
#
# The tests drive it with playwright-core, which uses this browser and downloads none.
set -euo pipefail

CHROMIUM=/usr/bin/chromium

log() { echo "chromium.sh: $*" >&2; }

is_installed() {
  [ -x "$CHROMIUM" ]
}

# shellcheck source=apt.sh
source "$(dirname "${BASH_SOURCE[0]}")/apt.sh"

cmd_install() {
  install_package chromium "$CHROMIUM"
}

cmd_status() {
  if is_installed; then
    echo "$CHROMIUM: $("$CHROMIUM" --version 2>/dev/null || echo "version unknown")"
    return 0
  fi
  echo "not installed ($CHROMIUM missing): run '$0 install'"
  return 3
}

case "${1:-}" in
  install) cmd_install ;;
  status) cmd_status ;;
  *)
    echo "usage: $0 install|status" >&2
    exit 2
    ;;
esac
