#!/usr/bin/env bash
# Installs ISA-L (Debian `libisal-dev`), the CRC library klog's CRC addon is built with
# (packages/protocol/native/crc32.cc). Without it klog computes CRCs in JavaScript, more slowly.
#
#   scripts/isal.sh install   install the package (apt, non-interactive; root or sudo); does
#                             nothing when the header is already there
set -euo pipefail

HEADER=/usr/include/isa-l/crc.h

log() { echo "isal.sh: $*" >&2; }

is_installed() {
  [ -f "$HEADER" ]
}

# shellcheck source=apt.sh
source "$(dirname "${BASH_SOURCE[0]}")/apt.sh"

case "${1:-}" in
  install) install_package libisal-dev "$HEADER" ;;
  *)
    echo "usage: $0 install" >&2
    exit 2
    ;;
esac
