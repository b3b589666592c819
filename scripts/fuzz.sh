#!/usr/bin/env bash
# The fuzz stage: schemathesis against the workbench's OpenAPI document
# (GET /_plugins/_search_relevance/_openapi) and a running workbench, bounded to a few minutes.
# Installs what is missing as scripts/test.sh does, uses OPENSEARCH_URL / REDIS_URL or starts the
# local services, and fails on any 5xx or answer the document does not describe.
# Arguments go to scripts/fuzz.py, e.g. scripts/fuzz.sh --max-examples 20 -- --include-path-regex judgments

source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$REPO_ROOT"

"$REPO_ROOT/scripts/install.sh" --dev
exec .venv/bin/python -m scripts.fuzz "$@"
