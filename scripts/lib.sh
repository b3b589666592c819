# Shared helpers for the service scripts. Source it; do not run it.
# Everything the scripts download or run lives under $WORKBENCH_HOME, outside the repository.

set -euo pipefail

REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

if [ -z "${WORKBENCH_HOME:-}" ]; then
  if [ "$(id -u)" = 0 ]; then
    # The node runs as an unprivileged user, who cannot enter /root: keep it elsewhere.
    WORKBENCH_HOME=/var/lib/workbench
  else
    WORKBENCH_HOME="${XDG_CACHE_HOME:-$HOME/.cache}/workbench"
  fi
fi
export WORKBENCH_HOME
LOG_DIR="$WORKBENCH_HOME/logs"
RUN_DIR="$WORKBENCH_HOME/run"
mkdir -p "$LOG_DIR" "$RUN_DIR"

say() { printf '[workbench] %s\n' "$*" >&2; }
die() { printf '[workbench] error: %s\n' "$*" >&2; exit 1; }

# pid_alive FILE [PATTERN]: true when FILE holds the pid of a running process (whose command
# line contains PATTERN, when given). A machine may keep the files of a previous boot, whose pids
# now name other processes or none, so a pid file alone proves nothing.
pid_alive() {
  local pid
  [ -f "$1" ] || return 1
  pid=$(cat "$1" 2>/dev/null) || return 1
  [[ "$pid" =~ ^[0-9]+$ ]] && kill -0 "$pid" 2>/dev/null || return 1
  [ -z "${2:-}" ] || tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -q -- "$2"
}

# show_log FILE...: the last lines of each log, so a failure explains itself where it is seen.
show_log() {
  local file
  for file in "$@"; do
    [ -s "$file" ] || continue
    printf '[workbench] --- last lines of %s ---\n' "$file" >&2
    tail -n 40 "$file" >&2
  done
}

# stop_pid FILE NAME [PATTERN]: TERM the process, wait up to 30 s, then KILL.
stop_pid() {
  local file=$1 name=$2 pid i
  if ! pid_alive "$file" "${3:-}"; then
    rm -f "$file"
    say "$name is not running"
    return 0
  fi
  pid=$(cat "$file")
  kill "$pid" 2>/dev/null || true
  for i in $(seq 60); do
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.5
  done
  if kill -0 "$pid" 2>/dev/null; then
    say "$name did not stop in 30 s; killing it"
    kill -9 "$pid" 2>/dev/null || true
  fi
  rm -f "$file"
  say "$name stopped"
}

# as_root CMD...: run a command with root rights (directly, or through sudo).
as_root() {
  if [ "$(id -u)" = 0 ]; then "$@"; elif command -v sudo >/dev/null; then sudo "$@"; else
    die "need root rights to run: $*"
  fi
}

# have_haproxy: true when a haproxy binary is installed (Debian puts it in /usr/sbin).
have_haproxy() {
  command -v haproxy >/dev/null || [ -x /usr/sbin/haproxy ] || [ -x /usr/local/sbin/haproxy ]
}

# ensure_haproxy: install Debian's haproxy when none is installed (the workbench's front).
ensure_haproxy() {
  have_haproxy && return 0
  say "installing Debian's haproxy (the workbench's pass-through front)"
  as_root env DEBIAN_FRONTEND=noninteractive apt-get update -qq >&2 || true
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq haproxy >&2 \
    || { say "could not install haproxy"; return 1; }
  # Only the binary is wanted: the package's own service (an empty default configuration) is
  # not the workbench's front, which `workbench serve` runs itself.
  as_root systemctl disable --now haproxy >/dev/null 2>&1 || as_root service haproxy stop >/dev/null 2>&1 || true
}

# ensure_wrk: install Debian's wrk when missing (the load generator of the pass-through benchmark).
ensure_wrk() {
  command -v wrk >/dev/null && return 0
  say "installing Debian's wrk (the pass-through benchmark's load generator)"
  as_root env DEBIAN_FRONTEND=noninteractive apt-get update -qq >&2 || true
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq wrk >&2 \
    || { say "could not install wrk"; return 1; }
}

# python_bin: the project's virtualenv python, created by install.sh.
python_bin() { echo "$REPO_ROOT/.venv/bin/python"; }

# system_python: a Python 3.11 or newer of the machine ($PYTHON first), to make a virtualenv.
system_python() {
  local candidate
  for candidate in "${PYTHON:-}" python3.13 python3.12 python3.11 python3; do
    [ -n "$candidate" ] && command -v "$candidate" >/dev/null || continue
    "$candidate" -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null \
      && { command -v "$candidate"; return 0; }
  done
  die "Python 3.11 or newer is needed (set PYTHON=/path/to/python3.11)"
}
