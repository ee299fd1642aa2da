# Sourced by the bench shell scripts (from the repo root, with WORK set to a temp dir):
# `start_broker [FLAGS...]` starts this tree's klog-broker on --port 0 with its log dir in
# $WORK/logs and its log in $WORK/broker.log, waits (10 s at most, less if it exits) for its
# "broker listening" line and sets BROKER (the pid), PORT and KAFKA_PORT (empty without
# --kafka-port).
start_broker() {
  node_modules/.bin/klog-broker --port 0 --log-dir "$WORK/logs" "$@" > "$WORK/broker.log" &
  BROKER=$!
  local ports=""
  for _ in $(seq 100); do
    ports=$(node -e 'for (const l of require("fs").readFileSync(process.argv[1], "utf8").split("\n")) { try { const e = JSON.parse(l); if (e.msg === "broker listening") { console.log(e.port, e.kafkaPort ?? ""); break; } } catch {} }' "$WORK/broker.log")
    [ -n "$ports" ] && break
    kill -0 "$BROKER" 2>/dev/null || break # it exited (a bad flag, say)
    sleep 0.1
  done
  read -r PORT KAFKA_PORT <<< "$ports"
}

# `touch_page_cache MEGABYTES` writes that many MiB into a file in $WORK and deletes it, so that
# the runs after it write into pages the machine has used (bench/page-cache-touch.mjs measures
# why: on a virtual machine whose host backs memory on first touch, writes into never-used
# pages run many times slower).
touch_page_cache() {
  dd if=/dev/zero of="$WORK/page-cache-touch" bs=1M count="$1" status=none
  rm -f "$WORK/page-cache-touch"
}
