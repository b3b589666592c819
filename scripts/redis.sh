#!/usr/bin/env bash
# A local Redis for the workbench: start | stop | status | url.
#
# When a Redis already answers at the address, it is reused. Otherwise Debian's redis-server is
# installed (apt-get) if missing and started on loopback, with its data under $WORKBENCH_HOME/redis.
#
# Settings (environment):
#   REDIS_PORT   port (default 6379)
# Log: $WORKBENCH_HOME/logs/redis.log

source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

PORT="${REDIS_PORT:-6379}"
URL="redis://127.0.0.1:$PORT/0"
PID_FILE="$RUN_DIR/redis.pid"
PID_PATTERN=redis-server

# ping: true when something on the port answers PING with PONG (no redis-cli needed).
ping() {
  local reply
  reply=$( { exec 3<>"/dev/tcp/127.0.0.1/$PORT" && printf 'PING\r\n' >&3 \
             && read -r -t 2 line <&3 && echo "$line"; } 2>/dev/null ) || return 1
  [[ "$reply" == "+PONG"* ]]
}

install() {
  command -v redis-server >/dev/null && return 0
  say "installing Debian's redis-server"
  as_root env DEBIAN_FRONTEND=noninteractive apt-get update -qq >&2
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq redis-server >&2 \
    || die "could not install redis-server"
}

start() {
  if ping; then
    say "Redis already answers on port $PORT; reusing it"
    echo "$URL"
    return 0
  fi
  install
  mkdir -p "$WORKBENCH_HOME/redis"
  say "starting Redis on port $PORT"
  redis-server --port "$PORT" --bind 127.0.0.1 --daemonize yes \
    --pidfile "$PID_FILE" --logfile "$LOG_DIR/redis.log" \
    --dir "$WORKBENCH_HOME/redis" --appendonly yes --save "" >&2 \
    || { show_log "$LOG_DIR/redis.log"; die "redis-server failed to start; see $LOG_DIR/redis.log"; }
  local i
  for i in $(seq 50); do
    if ping; then
      say "Redis is up at $URL (log: $LOG_DIR/redis.log)"
      echo "$URL"
      return 0
    fi
    sleep 0.2
  done
  show_log "$LOG_DIR/redis.log"
  die "Redis did not answer in 10 s; see $LOG_DIR/redis.log"
}

status() {
  if ping; then
    echo "url: $URL"
    pid_alive "$PID_FILE" "$PID_PATTERN" && echo "pid: $(cat "$PID_FILE")" || echo "pid: (not started by this script)"
  else
    echo "Redis is not running on port $PORT"
    return 3
  fi
}

case "${1:-}" in
  start) start ;;
  stop) stop_pid "$PID_FILE" Redis "$PID_PATTERN" ;;
  status) status ;;
  url) echo "$URL" ;;
  *) echo "usage: $0 start|stop|status|url" >&2; exit 2 ;;
esac
