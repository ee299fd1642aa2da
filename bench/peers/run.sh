#!/usr/bin/env bash
# The paper's experiment side by side (not a test): klog, RabbitMQ, ActiveMQ, NATS JetStream
# and Redis Streams, one after another on this machine, each on 127.0.0.1 in its own temp data
# dir. Installs the brokers (Debian packages, as root) and their Node clients first, builds
# klog if needed, prints a table and writes bench/results/peers-<date>.json.
#
#   bash bench/peers/run.sh [--messages N] [--batch1-messages N] [--only klog,rabbitmq,...]
#
# See bench/peers/README.md.
set -euo pipefail
cd "$(dirname "$0")/../.."

# The Debian packages of the systems asked for (--only), or of every peer.
only=""
phases=""
prev=""
for a in "$@"; do
  case "$a" in --only=*) only="${a#--only=}" ;; esac
  [ "$prev" = "--only" ] && only="$a"
  case "$a" in --phases=*) phases="${a#--phases=}" ;; esac
  [ "$prev" = "--phases" ] && phases="$a"
  prev="$a"
done
debs=()
IFS=',' read -ra systems <<<"${only:-nats,redis,rabbitmq,activemq}"
for s in "${systems[@]}"; do
  case "$s" in
    nats) debs+=(nats-server) ;; redis) debs+=(redis-server) ;; rabbitmq) debs+=(rabbitmq-server) ;; activemq) debs+=(activemq) ;;
  esac
done

t0=$(date +%s)
install_log=$(mktemp -t klog-peers-install-XXXXXX)
trap 'rm -f "$install_log"' EXIT
if [ ${#debs[@]} -gt 0 ]; then bash bench/peers/install.sh "${debs[@]}" 2>&1 | tee "$install_log" >&2; fi
install_s=$(( $(date +%s) - t0 ))
missing=$(grep -o 'Debian package [a-z0-9.+-]* cannot be had here' "$install_log" | awk '{print $3}' | paste -sd, - || true)
rm -f "$install_log"
trap - EXIT

# The replication phase runs klog's brokers over ZooKeeper: the package is installed here (the
# phase starts a ZooKeeper of its own when none answers at --zookeeper).
case ",$phases," in *,replication,*) bash scripts/zookeeper.sh install >&2 || echo "run.sh: ZooKeeper could not be installed" >&2 ;; esac

if [ ! -x node_modules/.bin/klog-broker ] || [ ! -x node_modules/.bin/klog ]; then
  echo "run.sh: klog is not built; running npm run setup" >&2
  npm run setup
fi

export KLOG_PEERS_INSTALL="{\"seconds\":$install_s,\"unavailable\":\"$missing\"}"
exec node bench/peers/bench.mjs "$@"
