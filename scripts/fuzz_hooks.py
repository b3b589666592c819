"""Schemathesis hooks of the fuzz stage (``SCHEMATHESIS_HOOKS=scripts.fuzz_hooks``).

Randomly generated ids name nothing, so most generated requests would stop at "does not exist".
``scripts/fuzz.py`` seeds a few real entities and passes their ids in ``FUZZ_SEEDS``; these hooks
let Hypothesis choose, case by case, between the generated value and a seeded id, so the fuzzer
also reaches the code behind the look-ups (with the seed fixed, the choice is reproducible).
Seeded ids are never put into DELETE paths, so the seeds live through the run.

The hooks module is also where the schemathesis process gets one guard (``_serialize_ast_parse``):
``ast.parse`` is made one thread at a time, for a CPython 3.11 fault, explained there.
"""

from __future__ import annotations

import ast
import functools
import json
import os
import threading
from typing import Any

import schemathesis
from hypothesis import strategies as st


def _serialize_ast_parse() -> None:
    """Let one thread at a time into ``ast.parse`` in the schemathesis process.

    CPython 3.11 converts a parsed tree to Python objects keeping its recursion depth in state
    shared by the interpreter's threads, and checks it at the end (python/cpython#106905): when
    a collection inside one conversion lets another thread convert a tree too, the first one
    fails with ``SystemError: AST constructor recursion depth mismatch``. Hypothesis parses
    source files to describe the lambdas in strategies, in each schemathesis worker thread, so
    with ``--workers 2`` this failed the fuzz stage once in CI (``PUT /_cluster/settings``, the
    coverage phase). Hypothesis caches what it parsed, so the lock is rarely contended.
    """
    parse = ast.parse
    if getattr(parse, "serialized", False):
        return
    lock = threading.Lock()

    @functools.wraps(parse)
    def serialized(*args: Any, **kwargs: Any) -> Any:
        with lock:
            return parse(*args, **kwargs)

    serialized.serialized = True  # type: ignore[attr-defined]
    ast.parse = serialized


_serialize_ast_parse()

SEEDS: dict[str, Any] = json.loads(os.environ.get("FUZZ_SEEDS") or "{}")


def _ids(name: str) -> list[str]:
    value = SEEDS.get(name)
    if value is None:
        return []
    return list(value) if isinstance(value, list) else [value]


# Body field -> seeded ids that make sense for it (lists get a list of them).
BODY_FIELDS: dict[str, list[str]] = {
    "querySetId": _ids("querySetId"),
    "searchConfigurationList": _ids("searchConfigurationIds"),
    "searchConfigurationId": _ids("searchConfigurationIds"),
    "judgmentList": _ids("judgmentIds"),
    "existingJudgments": _ids("llmJudgmentIds"),
    "referenceJudgmentId": _ids("judgmentIds"),
    "candidateJudgmentId": _ids("judgmentIds")[1:] + _ids("llmJudgmentIds"),
    "experimentId": _ids("experimentId"),
    "modelId": _ids("modelId"),
    "index": _ids("index"),
    "remoteConfigId": _ids("remoteConfigurationIds"),
}

# First path segment after the SRW prefix -> seeded ids for the path's id parameter.
PATH_IDS: dict[str, list[str]] = {
    "query_sets": _ids("querySetId"),
    "search_configurations": _ids("searchConfigurationIds"),
    "judgments": _ids("judgmentIds") + _ids("llmJudgmentIds"),
    "experiments": _ids("experimentId"),
    "remote_search_configurations": _ids("remoteConfigurationIds"),
}


# Endpoints a model registered through the API must not reach (the fuzz server trusts any
# plain-http URL, on public addresses only: scripts/fuzz.py): loopback, private, link-local and
# metadata addresses, and names that resolve to loopback. Each must be a 400 naming the field,
# never a call; every generated model body with a URL gets one of them.
ENDPOINTS = [
    "http://127.0.0.1:9/v1", "http://10.0.0.5/v1", "http://172.16.0.1/v1",
    "http://192.168.1.10/v1", "http://169.254.169.254/latest/meta-data",
    "http://[::1]:8080/v1", "http://localhost:8080/v1", "http://[::ffff:127.0.0.1]/v1",
    "http://0.0.0.0:9/v1",
]


def _with_seeds(body: dict[str, Any]) -> dict[str, Any]:
    out = dict(body)
    for field, ids in BODY_FIELDS.items():
        if field in out and ids:
            out[field] = list(ids) if isinstance(out[field], list) else ids[0]
    return out


@schemathesis.hook
def flatmap_body(context: Any, body: Any) -> Any:
    if isinstance(body, dict) and isinstance(body.get("endpoint"), str):
        # No provider is reachable from here: a model on a trusted, public endpoint would only
        # answer 502 when used. Generated endpoints that are not URLs are kept.
        refused = [{**body, "endpoint": e} for e in ENDPOINTS]
        url = body["endpoint"].startswith(("http://", "https://"))
        return st.sampled_from(refused if url else [body, *refused])
    if not isinstance(body, dict) or not any(f in body for f, ids in BODY_FIELDS.items() if ids):
        return st.just(body)
    return st.sampled_from([body, _with_seeds(body)])


@schemathesis.hook
def flatmap_path_parameters(context: Any, path_parameters: Any) -> Any:
    operation = context.operation
    if (operation is None or operation.method.upper() == "DELETE"
            or not isinstance(path_parameters, dict)):
        return st.just(path_parameters)
    parts = operation.path.split("/")
    collection = parts[3] if len(parts) > 3 else ""
    ids = _ids("experimentId") if "/schedule/" in operation.path else PATH_IDS.get(collection, [])
    names = [n for n in ("entity_id", "job_id") if n in path_parameters]
    if not ids or not names:
        return st.just(path_parameters)
    return st.sampled_from([path_parameters] + [{**path_parameters, names[0]: i} for i in ids])
