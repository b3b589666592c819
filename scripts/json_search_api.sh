#!/usr/bin/env bash
# The JSON search API (scripts/json_search_api.py: SQLite FTS5 BM25 over the demo catalogue,
# answers not OpenSearch-shaped, test knobs /_faults and /_requests): start | stop | status | url.
#
# Runs on 127.0.0.1 with the project's virtualenv python (else python3), needing nothing else.
# Idempotent: a start reuses a service that answers; callers at once take turns.
#
# Settings (environment):
#   JSON_SEARCH_API_PORT   port (default 9710)
# Log: $WORKBENCH_HOME/logs/json-search-api.log

source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

PORT="${JSON_SEARCH_API_PORT:-9710}"
URL="http://127.0.0.1:$PORT"
PID_FILE="$RUN_DIR/json-search-api.pid"
PID_PATTERN=json_search_api.py
LOG="$LOG_DIR/json-search-api.log"

responding() {
  curl -fsS --max-time 3 "$URL/" 2>/dev/null | grep -q '"name": "json-search-api"'
}

start() {
  if responding; then
    say "the JSON search API already answers at $URL; reusing it"
    echo "$URL"
    return 0
  fi
  if pid_alive "$PID_FILE" "$PID_PATTERN"; then
    say "the JSON search API (pid $(cat "$PID_FILE")) is starting; waiting"
  else
    local python
    python=$(python_bin)
    [ -x "$python" ] || python=python3
    say "starting the JSON search API on $URL"
    nohup "$python" "$REPO_ROOT/scripts/json_search_api.py" --port "$PORT" >"$LOG" 2>&1 </dev/null 9>&- &
    echo $! >"$PID_FILE"
  fi
  local i
  for i in $(seq 60); do
    if responding; then
      say "the JSON search API is up at $URL (log: $LOG)"
      echo "$URL"
      return 0
    fi
    if ! pid_alive "$PID_FILE" "$PID_PATTERN"; then
      show_log "$LOG"
      die "the JSON search API exited; see $LOG"
    fi
    sleep 0.5
  done
  show_log "$LOG"
  die "the JSON search API did not answer in 30 s; see $LOG"
}

status() {
  if responding; then
    echo "url: $URL"
    pid_alive "$PID_FILE" "$PID_PATTERN" && echo "pid: $(cat "$PID_FILE")" || echo "pid: (not started by this script)"
  else
    echo "the JSON search API is not running at $URL"
    return 3
  fi
}

# serialised: one caller at a time starts it (a second finds it running)
locked() {
  exec 9>"$RUN_DIR/json-search-api.lock"
  flock -w 120 9 || die "another scripts/json_search_api.sh held $RUN_DIR/json-search-api.lock for 2 minutes"
  "$@"
}

case "${1:-}" in
  start) locked start ;;
  stop) stop_pid "$PID_FILE" "the JSON search API" "$PID_PATTERN" ;;
  status) status ;;
  url) echo "$URL" ;;
  *) echo "usage: $0 start|stop|status|url" >&2; exit 2 ;;
esac
