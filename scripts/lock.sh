#!/usr/bin/env bash
# The dependency lock, scripts/requirements.lock: every package the workbench, its dev tools and
# its installers use, pinned (==) for every platform and Python >= 3.11. scripts/install.sh (and
# with it the Dockerfile) installs through it, so a fresh install gets what the tests ran against.
# It is compiled with uv from pyproject.toml (all extras) and scripts/lock.in, leaving out what
# scripts/lock-exclude.txt names. See docs/dependencies.md.
#
#   scripts/lock.sh                     check only: exit 1 (and show the difference) when the lock
#                                       is not what pyproject.toml and scripts/lock.in resolve to,
#                                       e.g. a dependency was added without re-locking; writes nothing
#   scripts/lock.sh --relock [ARGS]     after editing pyproject.toml or scripts/lock.in: re-resolve,
#                                       keeping every pin that still fits
#   scripts/lock.sh --upgrade [ARGS]    every package to its newest allowed release
#   scripts/lock.sh --upgrade-package NAME [--upgrade-package NAME ...] [ARGS]
#                                       these packages (and what they need) to their newest allowed
#                                       releases, the rest as pinned
#
# The three writing forms rewrite the lock, reinstall .venv from it (scripts/install.sh --dev)
# and then run the README's test command, ./scripts/test.sh ARGS (ARGS go on to pytest, e.g.
# `scripts/lock.sh --upgrade-package celery tests/unit -x`); the exit status is the tests'.
# A failed upgrade leaves the new lock in the work tree: `git checkout scripts/requirements.lock`
# undoes it. uv is installed into .venv (at the locked version) when it is missing there.
# Resolving needs the package registry (uv caches what it has read).

source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$REPO_ROOT"

LOCK=scripts/requirements.lock

usage() { sed -n '2,/^$/p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//' >&2; exit 2; }

mode=check
resolve_args=()
while [ $# -gt 0 ]; do
  case "$1" in
    --relock) mode=write; shift ;;
    --upgrade) mode=write; resolve_args+=(--upgrade); shift ;;
    --upgrade-package)
      [ $# -ge 2 ] && [ -n "$2" ] || die "--upgrade-package needs a package name"
      mode=write; resolve_args+=(--upgrade-package "$2"); shift 2 ;;
    --upgrade-package=*) mode=write; resolve_args+=(--upgrade-package "${1#*=}"); shift ;;
    -h|--help) usage ;;
    *) break ;;
  esac
done
[ "$mode" = write ] || [ $# -eq 0 ] || die "test arguments only go with --relock or --upgrade*"

# ensure_uv: uv in .venv at the version the lock pins (any uv while there is no lock yet), so
# every run writes the lock the same way.
ensure_uv() {
  local pinned="" constraint=()
  [ -x .venv/bin/python ] || "$REPO_ROOT/scripts/install.sh"
  if [ -f "$LOCK" ]; then
    constraint=(-c "$LOCK")
    pinned=$(sed -n 's/^uv==\([^ ;]*\).*/\1/p' "$LOCK" | head -n 1)
  fi
  if [ -x .venv/bin/uv ]; then
    [ -z "$pinned" ] || [ "$(.venv/bin/uv --version | cut -d' ' -f2)" = "$pinned" ] && return 0
  fi
  say "installing uv${pinned:+ $pinned} into .venv"
  .venv/bin/python -m pip install -q -U "${constraint[@]}" uv >"$LOG_DIR/lock-uv.log" 2>&1 \
    || { show_log "$LOG_DIR/lock-uv.log"; die "could not install uv"; }
}

# compile_lock OUTPUT [UV-ARGS...]: resolve into OUTPUT, starting from the pins already in it.
# The arguments and the header are the same for every form, so a check compares like with like.
compile_lock() {
  local output=$1
  shift
  .venv/bin/uv pip compile --quiet \
    pyproject.toml scripts/lock.in --all-extras --excludes scripts/lock-exclude.txt \
    --universal --python-version 3.11 \
    --custom-compile-command "scripts/lock.sh --relock" \
    -o "$output" "$@"
}

ensure_uv

if [ "$mode" = check ]; then
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  [ -f "$LOCK" ] || die "$LOCK is missing: run scripts/lock.sh --relock"
  cp "$LOCK" "$tmp/requirements.lock"
  compile_lock "$tmp/requirements.lock" || die "uv could not resolve the dependencies"
  if ! diff -u "$LOCK" "$tmp/requirements.lock" >"$tmp/diff"; then
    cat "$tmp/diff" >&2
    die "$LOCK is out of date with pyproject.toml / scripts/lock.in: run scripts/lock.sh --relock"
  fi
  say "$LOCK is up to date"
  exit 0
fi

say "resolving $LOCK${resolve_args[*]:+ (${resolve_args[*]})}"
before=$(cat "$LOCK" 2>/dev/null || true)
compile_lock "$LOCK" "${resolve_args[@]}" || die "uv could not resolve the dependencies"
if [ "$before" = "$(cat "$LOCK")" ]; then
  say "the lock did not change"
else
  git --no-pager diff --stat -- "$LOCK" >&2 || true
  for package in celery kombu redis; do
    say "now $(grep -E "^$package==" "$LOCK" | head -n 1 | cut -d' ' -f1)"
  done
fi

"$REPO_ROOT/scripts/install.sh" --dev
exec "$REPO_ROOT/scripts/test.sh" "$@"
