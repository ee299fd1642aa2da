#!/usr/bin/env bash
# Installs ISA-L (Debian `libisal-dev`), the CRC library klog's CRC addon is built with
# (packages/protocol/native/crc32.cc). Without it klog computes CRCs in JavaScript, more slowly.
#
#   scripts/isal.sh install   install the package (apt, non-interactive; root, or sudo that
#                             asks no password: the library is optional, so setup never
#                             stops at a prompt for it); does nothing when the header is there
set -euo pipefail

HEADER=/usr/include/isa-l/crc.h

log() { echo "isal.sh: $*" >&2; }

is_installed() {
  [ -f "$HEADER" ]
}

# shellcheck source=apt.sh
source "$(dirname "${BASH_SOURCE[0]}")/apt.sh"

cmd_install() {
  if ! is_installed && [ "$(id -u)" -ne 0 ] && ! sudo -n true 2>/dev/null; then
    log "libisal-dev is not installed and installing it needs root"
    return 1
  fi
  install_package libisal-dev "$HEADER"
}

case "${1:-}" in
  install) cmd_install ;;
  *)
    echo "usage: $0 install" >&2
    exit 2
    ;;
esac
