#!/usr/bin/env bash
# Installs, idempotently, the Debian packages of the peer brokers and the npm clients of
# bench/peers. Needs root for apt-get (non-interactive). Packages that Debian does not have
# here are reported and skipped; run.sh then skips those systems, and says so loudly.
#
#   bash bench/peers/install.sh [PACKAGE...]     (default: every peer's package)
#
# A command's output is taken whole before it is searched (`grep -q <<<"$out"`), never piped
# into `grep -q`: under `set -o pipefail` a grep that exits at its first match leaves the
# writer to die of SIGPIPE, and the pipeline then fails although the text was there.
set -uo pipefail
cd "$(dirname "$0")"
export DEBIAN_FRONTEND=noninteractive
PKGS=(rabbitmq-server activemq nats-server redis-server)
[ $# -gt 0 ] && PKGS=("$@")

missing=()
for p in "${PKGS[@]}"; do
  status=$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)
  grep -q 'install ok installed' <<<"$status" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  if [ "$(id -u)" != 0 ]; then
    echo "install: not root, cannot apt-get install: ${missing[*]}" >&2
  else
    if [ -z "$(ls -A /var/lib/apt/lists 2>/dev/null | grep -v -e '^lock$' -e '^partial$' -e '^auxfiles$')" ]; then
      apt-get update -q
    fi
    have=()
    for p in "${missing[@]}"; do
      policy=$(apt-cache policy "$p" 2>/dev/null || true)
      if grep -q 'Candidate: [0-9]' <<<"$policy"; then
        have+=("$p")
      else
        echo "install: Debian package $p cannot be had here (no candidate in apt-cache policy); skipping it" >&2
      fi
    done
    if [ ${#have[@]} -gt 0 ]; then
      # Keep the packages' own init scripts from starting system-wide services on install:
      # run.sh starts each broker itself, on 127.0.0.1 and a temp data dir.
      # (KLOG_PEERS_POLICY_RC_D: another path for it, which tests/bench uses.) Removed on any exit.
      policy_rc_d=${KLOG_PEERS_POLICY_RC_D:-/usr/sbin/policy-rc.d}
      added_policy=0
      if [ ! -e "$policy_rc_d" ]; then
        printf '#!/bin/sh\nexit 101\n' > "$policy_rc_d" && chmod +x "$policy_rc_d" && added_policy=1
        [ "$added_policy" = 1 ] && trap 'rm -f "$policy_rc_d"' EXIT
      fi
      t0=$(date +%s)
      apt-get install -y -q --no-install-recommends "${have[@]}" || echo "install: apt-get install ${have[*]} failed" >&2
      echo "install: apt-get install ${have[*]} took $(( $(date +%s) - t0 )) s" >&2
      if [ "$added_policy" = 1 ]; then rm -f "$policy_rc_d"; trap - EXIT; fi
    fi
  fi
fi

if [ ! -d node_modules ] || [ package-lock.json -nt node_modules/.package-lock.json ]; then
  t0=$(date +%s)
  npm install --prefix . --no-audit --no-fund --loglevel=error || { echo "install: npm install failed" >&2; exit 1; }
  echo "install: npm install took $(( $(date +%s) - t0 )) s" >&2
fi
