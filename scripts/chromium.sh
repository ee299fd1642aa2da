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

log() { echo "chromium.sh: $*" >&2; }

# shellcheck source=apt.sh
source "$(dirname "${BASH_SOURCE[0]}")/apt.sh"

package_command chromium /usr/bin/chromium --version "${1:-}"
