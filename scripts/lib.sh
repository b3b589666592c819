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

# apt_install WHY PACKAGE...: install Debian's packages (as root, through sudo if need be); the
# package lists are refreshed once per script run. Fails when apt-get does.
APT_UPDATED=""
apt_install() {
  local why=$1
  shift
  say "installing Debian's $* ($why)"
  if [ -z "$APT_UPDATED" ]; then
    as_root env DEBIAN_FRONTEND=noninteractive apt-get update -qq >&2 || true
    APT_UPDATED=1
  fi
  # waits for another apt (up to 5 min) rather than failing on its lock
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
    -o DPkg::Lock::Timeout=300 "$@" >&2 || { say "could not install $*"; return 1; }
}

# ensure_haproxy: install Debian's haproxy when none is installed (the workbench's front).
ensure_haproxy() {
  have_haproxy && return 0
  apt_install "the workbench's pass-through front" haproxy || return 1
  # Only the binary is wanted: the package's own service (an empty default configuration) is
  # not the workbench's front, which `workbench serve` runs itself.
  as_root systemctl disable --now haproxy >/dev/null 2>&1 || as_root service haproxy stop >/dev/null 2>&1 || true
}

# ensure_wrk: install Debian's wrk when missing (the load generator of the pass-through benchmark).
ensure_wrk() {
  command -v wrk >/dev/null && return 0
  apt_install "the pass-through benchmark's load generator" wrk
}

# ensure_curl: install Debian's curl when missing (the scripts ask the services with it).
ensure_curl() {
  command -v curl >/dev/null && return 0
  apt_install "the scripts' HTTP client" curl ca-certificates
}

# ensure_build_tools: a C/C++ compiler, make and cmake when missing (llama.cpp's build).
ensure_build_tools() {
  command -v cc >/dev/null && command -v c++ >/dev/null && command -v make >/dev/null \
    && command -v cmake >/dev/null && return 0
  apt_install "llama.cpp's build" build-essential cmake
}

# python_bin: the project's virtualenv python, created by install.sh.
python_bin() { echo "$REPO_ROOT/.venv/bin/python"; }

# find_python: a Python 3.11 or newer of the machine ($PYTHON first), or status 1.
find_python() {
  local candidate
  for candidate in "${PYTHON:-}" python3.13 python3.12 python3.11 python3; do
    [ -n "$candidate" ] && command -v "$candidate" >/dev/null || continue
    "$candidate" -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null \
      && { command -v "$candidate"; return 0; }
  done
  return 1
}

# system_python: a Python 3.11 or newer of the machine, to make a virtualenv. On a Debian
# machine without one, Debian's python3 (3.11 in Debian 12) and its venv module are installed.
system_python() {
  find_python && return 0
  if command -v apt-get >/dev/null; then
    apt_install "Python 3.11 or newer is needed" python3 python3-venv >/dev/null || true
    find_python && return 0
  fi
  die "Python 3.11 or newer is needed (set PYTHON=/path/to/python3.11)"
}

# make_venv PYTHON DIR: a virtualenv in DIR; where the venv module is missing (Debian's
# python3 without python3-venv: `python3 -m venv` fails), Debian's python3-venv is installed
# (python3.11-venv too, for a python3.11 that is not the default python3).
make_venv() {
  local py=$1 dir=$2 minor
  "$py" -m venv "$dir" >/dev/null 2>&1 && return 0
  rm -rf "$dir"
  command -v apt-get >/dev/null || die "could not create $dir ($py -m venv failed)"
  minor=$("$py" -c 'import sys; print(f"{sys.version_info[0]}.{sys.version_info[1]}")')
  apt_install "Python's venv module" python3-venv "python$minor-venv" \
    || die "could not install Python's venv module (apt-get install python3-venv)"
  "$py" -m venv "$dir" || die "could not create $dir"
}
