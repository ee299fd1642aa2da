#!/usr/bin/env bash
# Installs Debian's kcat (the package `kcat`, /usr/bin/kcat: librdkafka's command-line client)
# for the tests that point a real Kafka client at the broker's Kafka listener (tests/kafka).
#
#   scripts/kcat.sh install   install the package (apt, non-interactive; root or sudo);
#                             does nothing when /usr/bin/kcat is already there
#   scripts/kcat.sh status    print the path and version (exit 0), or say it is missing (exit 3)
set -euo pipefail

KCAT=/usr/bin/kcat

log() { echo "kcat.sh: $*" >&2; }

is_installed() {
  [ -x "$KCAT" ]
}

# shellcheck source=apt.sh
source "$(dirname "${BASH_SOURCE[0]}")/apt.sh"

cmd_install() {
  install_package kcat "$KCAT"
}

cmd_status() {
  if is_installed; then
    echo "$KCAT: $("$KCAT" -V 2>/dev/null | head -1 || echo "version unknown")"
    return 0
  fi
  echo "not installed ($KCAT missing): run '$0 install'"
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
