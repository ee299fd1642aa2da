#!/usr/bin/env bash
# Installs and runs a single local Apache ZooKeeper (the Debian package `zookeeper`) for
# klog's cluster mode and its tests.
#
#   scripts/zookeeper.sh install   install the package (apt, non-interactive; root or sudo);
#                                  does nothing when it is already installed
#   scripts/zookeeper.sh start     write zoo.cfg, start ZooKeeper in the background, wait until
#                                  it answers `ruok` with `imok`, print the connect string
#   scripts/zookeeper.sh stop      stop the ZooKeeper started by `start`
#   scripts/zookeeper.sh status    say whether it runs and answers (exit 0) or not (exit 3)
#   scripts/zookeeper.sh restart   stop, then start
#
# Environment:
#   KLOG_ZK_PORT   client port, default 2181 (bound to 127.0.0.1 only)
#   KLOG_ZK_DIR    data dir holding zoo.cfg, snapshots, the pid file and zookeeper.log;
#                  default ${TMPDIR:-/tmp}/klog-zookeeper-<port>
#
# The server uses tickTime 500 ms and accepts client session timeouts from 1 s to 30 s, so
# tests can use 2-4 s sessions and see expiry quickly. The AdminServer (HTTP) is disabled;
# the four-letter words ruok, stat, srvr, mntr, cons and envi are allowed.
set -euo pipefail

PORT="${KLOG_ZK_PORT:-2181}"
DIR="${KLOG_ZK_DIR:-${TMPDIR:-/tmp}/klog-zookeeper-$PORT}"
HOST=127.0.0.1
PIDFILE="$DIR/zookeeper.pid"
LOGFILE="$DIR/zookeeper.log"
CFG="$DIR/zoo.cfg"
START_TIMEOUT_S="${KLOG_ZK_START_TIMEOUT_S:-60}"

# Where the Debian package puts ZooKeeper. zookeeper.jar's manifest carries the Class-Path
# of its dependencies; we add one slf4j binding so the server log is written.
ZK_JAR=/usr/share/java/zookeeper.jar
SLF4J_BINDING=/usr/share/java/slf4j-simple.jar

log() { echo "zookeeper.sh: $*" >&2; }

is_installed() {
  [ -f "$ZK_JAR" ] && command -v java >/dev/null 2>&1
}

# shellcheck source=apt.sh
source "$(dirname "${BASH_SOURCE[0]}")/apt.sh"

cmd_install() {
  install_package zookeeper "$ZK_JAR and java"
}

# Sends a four-letter word and prints the answer; fails when nothing answers.
# Plain bash (/dev/tcp), so it needs no nc.
four_letter_word() {
  timeout 3 bash -c 'exec 3<>"/dev/tcp/$0/$1" || exit 1; printf "%s" "$2" >&3; cat <&3' \
    "$HOST" "$PORT" "$1" 2>/dev/null
}

answers_imok() {
  [ "$(four_letter_word ruok || true)" = "imok" ]
}

# ruok only says the process is up; srvr names the mode once the server takes requests.
is_serving() {
  answers_imok && four_letter_word srvr 2>/dev/null | grep -q '^Mode:'
}

running_pid() {
  [ -f "$PIDFILE" ] || return 1
  local pid
  pid=$(cat "$PIDFILE" 2>/dev/null) || return 1
  [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null || return 1
  echo "$pid"
}

write_config() {
  mkdir -p "$DIR/data"
  cat >"$CFG" <<EOF
# Written by scripts/zookeeper.sh: a single local ZooKeeper for klog.
tickTime=500
initLimit=10
syncLimit=5
dataDir=$DIR/data
clientPort=$PORT
clientPortAddress=$HOST
minSessionTimeout=1000
maxSessionTimeout=30000
maxClientCnxns=0
admin.enableServer=false
4lw.commands.whitelist=ruok,stat,srvr,mntr,cons,envi
autopurge.snapRetainCount=3
autopurge.purgeInterval=1
EOF
}

cmd_start() {
  local pid
  if pid=$(running_pid); then
    # Ours and alive: maybe still starting; wait for it rather than start a second one.
    local deadline=$((SECONDS + START_TIMEOUT_S))
    until is_serving; do
      if ! kill -0 "$pid" 2>/dev/null || [ "$SECONDS" -ge "$deadline" ]; then
        log "ZooKeeper pid $pid (from $PIDFILE) does not serve on $HOST:$PORT; run '$0 stop' first"
        return 1
      fi
      sleep 0.2
    done
    log "already running (pid $pid)"
    echo "$HOST:$PORT"
    return 0
  fi
  if answers_imok; then
    log "a ZooKeeper not started by this script already answers on $HOST:$PORT; using it"
    echo "$HOST:$PORT"
    return 0
  fi
  is_installed || { log "ZooKeeper is not installed: run '$0 install' first"; return 1; }
  write_config
  rm -f "$PIDFILE"
  local classpath="$ZK_JAR"
  [ -f "$SLF4J_BINDING" ] && classpath="$classpath:$SLF4J_BINDING"
  # setsid: the server outlives the shell (CI step) that started it.
  setsid bash -c 'echo $$ >"$0"; exec "$@"' "$PIDFILE" \
    java -Xms64m -Xmx256m -XX:+UseSerialGC \
    -Dzookeeper.admin.enableServer=false \
    -Dorg.slf4j.simpleLogger.defaultLogLevel=info \
    -Dorg.slf4j.simpleLogger.showDateTime=true \
    -cp "$classpath" org.apache.zookeeper.server.quorum.QuorumPeerMain "$CFG" \
    >"$LOGFILE" 2>&1 </dev/null &
  local deadline=$((SECONDS + START_TIMEOUT_S))
  until is_serving; do
    if [ -f "$PIDFILE" ] && ! kill -0 "$(cat "$PIDFILE")" 2>/dev/null; then
      log "ZooKeeper exited during start-up; last lines of $LOGFILE:"
      tail -n 30 "$LOGFILE" >&2 || true
      rm -f "$PIDFILE"
      return 1
    fi
    if [ "$SECONDS" -ge "$deadline" ]; then
      log "ZooKeeper did not answer ruok/srvr within ${START_TIMEOUT_S}s; last lines of $LOGFILE:"
      tail -n 30 "$LOGFILE" >&2 || true
      return 1
    fi
    sleep 0.2
  done
  log "started (pid $(cat "$PIDFILE"), data in $DIR, log $LOGFILE)"
  echo "$HOST:$PORT"
}

cmd_stop() {
  local pid
  if ! pid=$(running_pid); then
    log "not running"
    rm -f "$PIDFILE"
    return 0
  fi
  kill -TERM "$pid" 2>/dev/null || true
  local i
  for i in $(seq 1 50); do
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.2
  done
  if kill -0 "$pid" 2>/dev/null; then
    log "still running after 10 s; killing pid $pid"
    kill -KILL "$pid" 2>/dev/null || true
  fi
  rm -f "$PIDFILE"
  log "stopped (pid $pid)"
}

cmd_status() {
  local pid
  if answers_imok; then
    if pid=$(running_pid); then
      echo "running (pid $pid) at $HOST:$PORT, data in $DIR"
    else
      echo "a ZooKeeper answers at $HOST:$PORT (not started by this script)"
    fi
    four_letter_word srvr || true
    return 0
  fi
  if pid=$(running_pid); then
    echo "process $pid is alive but does not answer ruok at $HOST:$PORT"
  else
    echo "not running ($HOST:$PORT)"
  fi
  return 3
}

case "${1:-}" in
  install) cmd_install ;;
  start) cmd_start ;;
  stop) cmd_stop ;;
  status) cmd_status ;;
  restart) cmd_stop && cmd_start ;;
  *)
    echo "usage: $0 install|start|stop|status|restart" >&2
    echo "  env: KLOG_ZK_PORT (default 2181), KLOG_ZK_DIR (default \${TMPDIR:-/tmp}/klog-zookeeper-<port>)" >&2
    exit 2
    ;;
esac
