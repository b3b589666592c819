#!/usr/bin/env bash
# Stop the workbench's API and worker. With --all, also the local OpenSearch and Redis.

source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

stop_pid "$RUN_DIR/workbench-api.pid" "workbench API" workbench
stop_pid "$RUN_DIR/workbench-worker.pid" "workbench worker" workbench
stop_pid "$RUN_DIR/workbench-scheduler.pid" "workbench scheduler" workbench
if [ "${1:-}" = "--all" ]; then
  "$REPO_ROOT/scripts/opensearch.sh" stop
  "$REPO_ROOT/scripts/redis.sh" stop
fi
