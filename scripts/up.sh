#!/usr/bin/env bash
# Install and run the workbench: API server and job worker in the background, in front of a
# local OpenSearch and Redis (installed and started here) unless OPENSEARCH_URL / REDIS_URL
# are given. Idempotent: what already runs is reused. Stop with scripts/down.sh.
# The API listens behind the HAProxy front (haproxy is installed from Debian's packages);
# WORKBENCH_FRONT=none serves with gunicorn alone. Any other setting (docs/configuration.md) is
# given the same way, in the environment of this script: it reaches the API, worker and
# scheduler it starts (stop them with scripts/down.sh first, so they start again with it).
#
# Logs: $WORKBENCH_HOME/logs/{workbench-api,workbench-worker,redis}.log and
#       $WORKBENCH_HOME/logs/opensearch/opensearch.log

source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$REPO_ROOT"

"$REPO_ROOT/scripts/install.sh"
if [ "${WORKBENCH_FRONT:-auto}" != none ]; then
  ensure_haproxy || say "continuing without the HAProxy front (pass-through through gunicorn)"
fi
if [ -z "${OPENSEARCH_URL:-}" ]; then
  OPENSEARCH_URL=$("$REPO_ROOT/scripts/opensearch.sh" start)
fi
if [ -z "${REDIS_URL:-}" ]; then
  REDIS_URL=$("$REPO_ROOT/scripts/redis.sh" start)
fi
export OPENSEARCH_URL REDIS_URL
WB=".venv/bin/workbench"

# The key that encrypts stored model API keys: WORKBENCH_SECRET_KEY when set, else one generated
# on the first start and kept (mode 0600) under $WORKBENCH_HOME, so `models` with an apiKey works
# at once and keeps working across restarts.
if [ -z "${WORKBENCH_SECRET_KEY:-}" ]; then
  key_file="$WORKBENCH_HOME/secret_key"
  if [ ! -s "$key_file" ]; then
    (umask 077 && .venv/bin/python -c \
      "from cryptography.fernet import Fernet; print(Fernet.generate_key().decode())" \
      >"$key_file.tmp" && mv "$key_file.tmp" "$key_file")
    say "generated WORKBENCH_SECRET_KEY in $key_file (mode 0600)"
  fi
  WORKBENCH_SECRET_KEY=$(cat "$key_file")
  export WORKBENCH_SECRET_KEY
fi

$WB init-indices >&2

# start_bg NAME ARGS...: run "workbench ARGS" detached, unless it already runs.
start_bg() {
  local name=$1; shift
  local pid_file="$RUN_DIR/$name.pid"
  if pid_alive "$pid_file" workbench; then
    say "$name already runs (pid $(cat "$pid_file"))"
    return
  fi
  setsid nohup "$WB" "$@" >>"$LOG_DIR/$name.log" 2>&1 </dev/null &
  echo $! >"$pid_file"
  say "started $name (pid $!, log $LOG_DIR/$name.log)"
}

start_bg workbench-api serve
start_bg workbench-worker worker
start_bg workbench-scheduler scheduler

port="${WORKBENCH_PORT:-9400}"
host="${WORKBENCH_HOST:-127.0.0.1}"
for _ in $(seq 60); do
  if curl -fsS --max-time 2 "http://$host:$port/" >/dev/null 2>&1; then
    say "the workbench answers at http://$host:$port"
    $WB status >&2 || true
    echo "http://$host:$port"
    exit 0
  fi
  pid_alive "$RUN_DIR/workbench-api.pid" workbench \
    || { show_log "$LOG_DIR/workbench-api.log"; die "the API exited; see $LOG_DIR/workbench-api.log"; }
  sleep 1
done
die "the API did not answer in 60 s; see $LOG_DIR/workbench-api.log"
