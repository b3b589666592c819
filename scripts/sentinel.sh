#!/usr/bin/env bash
# A local Redis with no single point of failure: a primary, one replica and three Redis
# Sentinels that watch them, all on loopback: start | stop | status | url.
#
# Each is Debian's redis-server (installed with apt-get if missing; a sentinel is the same binary
# run with --sentinel, which is all Debian's redis-sentinel package adds), with its data and the
# configuration files the sentinels rewrite under $WORKBENCH_HOME/sentinel. `url` prints the
# REDIS_URL to give the workbench (with WORKBENCH_REDIS_MASTER_NAME=$REDIS_MASTER_NAME):
#
#   REDIS_URL="$(scripts/sentinel.sh url)" WORKBENCH_REDIS_MASTER_NAME=workbench ...
#
# Settings (environment):
#   REDIS_PRIMARY_PORT       port of the primary (default 6380)
#   REDIS_REPLICA_PORT       port of the replica (default 6381)
#   REDIS_SENTINEL_PORTS     ports of the three sentinels (default "26380 26381 26382")
#   REDIS_MASTER_NAME        the name the sentinels know the primary by (default workbench)
#   REDIS_DOWN_AFTER_MS      how long the primary may not answer before a sentinel thinks it
#                            down (default 5000); two sentinels agreeing start a failover
#   REDIS_FAILOVER_TIMEOUT_MS  Sentinel's failover-timeout (default 60000)
# Logs: $WORKBENCH_HOME/logs/redis-{primary,replica}.log, sentinel-<port>.log

source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

PRIMARY_PORT="${REDIS_PRIMARY_PORT:-6380}"
REPLICA_PORT="${REDIS_REPLICA_PORT:-6381}"
read -r -a SENTINEL_PORTS <<<"${REDIS_SENTINEL_PORTS:-26380 26381 26382}"
MASTER_NAME="${REDIS_MASTER_NAME:-workbench}"
DOWN_AFTER_MS="${REDIS_DOWN_AFTER_MS:-5000}"
FAILOVER_TIMEOUT_MS="${REDIS_FAILOVER_TIMEOUT_MS:-60000}"
DATA="$WORKBENCH_HOME/sentinel"
PID_PATTERN=redis-server

url() {
  local port entries=()
  for port in "${SENTINEL_PORTS[@]}"; do entries+=("sentinel://127.0.0.1:$port"); done
  (IFS=';'; echo "${entries[*]}")
}

# ask PORT COMMAND...: the first line of the reply of whatever answers on the port (RESP).
ask() {
  local port=$1; shift
  { exec 3<>"/dev/tcp/127.0.0.1/$port" && printf '%s\r\n' "$*" >&3 \
      && read -r -t 2 line <&3 && echo "${line%$'\r'}"; } 2>/dev/null
}

ping() { [[ "$(ask "$1" PING)" == "+PONG"* ]]; }

install() {
  command -v redis-server >/dev/null && return 0
  say "installing Debian's redis-server"
  as_root env DEBIAN_FRONTEND=noninteractive apt-get update -qq >&2
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq redis-server >&2 \
    || die "could not install redis-server"
}

# wait_for NAME PORT LOG: until it answers PING (10 s).
wait_for() {
  local i
  for i in $(seq 50); do
    ping "$2" && return 0
    sleep 0.2
  done
  show_log "$3"
  die "$1 did not answer on port $2 in 10 s; see $3"
}

# redis NAME PORT [ARGS...]: a redis-server on loopback with an append-only file of its own.
redis() {
  local name=$1 port=$2; shift 2
  mkdir -p "$DATA/$name"
  redis-server --port "$port" --bind 127.0.0.1 --daemonize yes \
    --pidfile "$RUN_DIR/redis-$name.pid" --logfile "$LOG_DIR/redis-$name.log" \
    --dir "$DATA/$name" --appendonly yes --save "" "$@" >&2 \
    || { show_log "$LOG_DIR/redis-$name.log"; die "redis-server ($name) failed to start"; }
  wait_for "Redis ($name)" "$port" "$LOG_DIR/redis-$name.log"
}

# sentinel PORT: a sentinel watching the primary; it rewrites its configuration file as it
# learns the replica, the other sentinels and any failover.
sentinel() {
  local port=$1 conf="$DATA/sentinel-$1.conf"
  cat >"$conf" <<EOF
port $port
bind 127.0.0.1
daemonize yes
pidfile $RUN_DIR/sentinel-$port.pid
logfile $LOG_DIR/sentinel-$port.log
dir $DATA
sentinel monitor $MASTER_NAME 127.0.0.1 $PRIMARY_PORT 2
sentinel down-after-milliseconds $MASTER_NAME $DOWN_AFTER_MS
sentinel failover-timeout $MASTER_NAME $FAILOVER_TIMEOUT_MS
sentinel parallel-syncs $MASTER_NAME 1
EOF
  redis-server "$conf" --sentinel >&2 \
    || { show_log "$LOG_DIR/sentinel-$port.log"; die "the sentinel on port $port failed to start"; }
  wait_for "Sentinel" "$port" "$LOG_DIR/sentinel-$port.log"
}

start() {
  local port
  if ping "${SENTINEL_PORTS[0]}"; then
    say "a sentinel already answers on port ${SENTINEL_PORTS[0]}; reusing the group"
    url
    return 0
  fi
  install
  mkdir -p "$DATA"
  say "starting the primary on port $PRIMARY_PORT and its replica on port $REPLICA_PORT"
  ping "$PRIMARY_PORT" || redis primary "$PRIMARY_PORT"
  ping "$REPLICA_PORT" || redis replica "$REPLICA_PORT" --replicaof 127.0.0.1 "$PRIMARY_PORT"
  say "starting three sentinels on ports ${SENTINEL_PORTS[*]} (master name $MASTER_NAME)"
  for port in "${SENTINEL_PORTS[@]}"; do sentinel "$port"; done
  say "Redis Sentinel is up: REDIS_URL=$(url) WORKBENCH_REDIS_MASTER_NAME=$MASTER_NAME"
  url
}

stop() {
  local port
  for port in "${SENTINEL_PORTS[@]}"; do
    stop_pid "$RUN_DIR/sentinel-$port.pid" "Sentinel $port" "$PID_PATTERN"
  done
  stop_pid "$RUN_DIR/redis-replica.pid" "Redis (replica)" "$PID_PATTERN"
  stop_pid "$RUN_DIR/redis-primary.pid" "Redis (primary)" "$PID_PATTERN"
}

status() {
  local port up=0
  echo "url: $(url)"
  echo "master name: $MASTER_NAME"
  for port in "${SENTINEL_PORTS[@]}"; do
    if ping "$port"; then up=$((up + 1)); echo "sentinel $port: up"; else echo "sentinel $port: down"; fi
  done
  for port in "$PRIMARY_PORT" "$REPLICA_PORT"; do
    ping "$port" && echo "redis $port: up" || echo "redis $port: down"
  done
  [ "$up" -ge 2 ] || { echo "fewer than two sentinels answer: no failover can happen"; return 3; }
}

case "${1:-}" in
  start) start ;;
  stop) stop ;;
  status) status ;;
  url) url ;;
  *) echo "usage: $0 start|stop|status|url" >&2; exit 2 ;;
esac
