#!/usr/bin/env bash
# Installs Debian's kcat (the package `kcat`, /usr/bin/kcat: librdkafka's command-line client)
# for the tests that point a real Kafka client at the broker's Kafka listener (tests/kafka).
#
#   scripts/kcat.sh install   install the package (apt, non-interactive; root or sudo);
#                             does nothing when /usr/bin/kcat is already there
#   scripts/kcat.sh status    print the path and version (exit 0), or say it is missing (exit 3)
set -euo pipefail

log() { echo "kcat.sh: $*" >&2; }

# shellcheck source=apt.sh
source "$(dirname "${BASH_SOURCE[0]}")/apt.sh"

package_command kcat /usr/bin/kcat -V "${1:-}"
