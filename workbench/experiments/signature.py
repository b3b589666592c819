"""Input fingerprints of an experiment (srw-api.md §8.10): SHA-256 of canonical JSON of its query
set, judgments and search configurations, to tell later whether the inputs have drifted."""

from __future__ import annotations

import hashlib
import json
from typing import Any

from opensearchpy import OpenSearch

from workbench.querysets.entries import read_entries
from workbench.store.indices import JUDGMENT_INDEX, QUERY_SET_INDEX, SEARCH_CONFIG_INDEX
from workbench.store.repository import Repository

INPUTS = ("query_set", "judgment_list", "search_configurations")


def canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def _hash(value: Any) -> str:
    return hashlib.sha256(canonical(value).encode()).hexdigest()


def _query(text: str) -> Any:
    try:
        parsed = json.loads(text)
    except ValueError:
        return text  # a Mustache template that is not JSON until rendered
    if isinstance(parsed, dict):
        for key in ("from", "size", "profile"):
            parsed.pop(key, None)
    return parsed


def _judgments(client: OpenSearch, ids: list[str]) -> list[Any] | None:
    """Per judgment, in order: rows sorted by query, each row's ratings in canonical order."""
    out = []
    for judgment_id in ids:
        doc = Repository(client, JUDGMENT_INDEX).get_source(judgment_id)
        if doc is None:
            return None
        rows = [{"query": r.get("query"),
                 "ratings": sorted((r.get("ratings") or []), key=canonical)}
                for r in doc.get("judgmentRatings") or []]
        out.append(sorted(rows, key=lambda row: str(row["query"])))
    return out


def _configurations(client: OpenSearch, ids: list[str]) -> list[dict[str, Any]] | None:
    out = []
    for config_id in ids:
        doc = Repository(client, SEARCH_CONFIG_INDEX).get_source(config_id)
        if doc is None:
            return None
        out.append({"index": doc.get("index"), "pipeline": doc.get("searchPipeline") or "",
                    "query": _query(str(doc.get("query", "")))})
    return out


def fingerprints(client: OpenSearch, experiment: dict[str, Any]) -> dict[str, str | None]:
    """One fingerprint per input; None where the input can no longer be loaded."""
    query_set = Repository(client, QUERY_SET_INDEX).get_source(experiment.get("querySetId", ""))
    values: dict[str, Any] = {
        "query_set": None if query_set is None
        else sorted(e.query_text for e in read_entries(query_set)),
        "judgment_list": _judgments(client, list(experiment.get("judgmentList") or [])),
        "search_configurations": _configurations(
            client, list(experiment.get("searchConfigurationList") or [])),
    }
    return {name: None if value is None else _hash(value) for name, value in values.items()}


SINGLE = {
    "query_set": ("QuerySet has changed since execution.",
                  "QuerySet has changed or is no longer available."),
    "judgment_list": ("Judgment data has changed since execution.",
                      "Judgment data has changed or is no longer available."),
    "search_configurations": ("Search configuration data has changed since execution.",
                              "Search configuration data has changed or is no longer available."),
}


def validate(client: OpenSearch, experiment: dict[str, Any]) -> dict[str, Any]:
    """The ``/validate`` answer: VALID, DRIFTED (with the inputs) or UNAVAILABLE."""
    stored = experiment.get("inputSignature")
    if not stored:
        return {"status": "UNAVAILABLE", "drifted_inputs": [],
                "message": "Experiment input signature is not available for this experiment "
                           "(legacy or in-flight run)."}
    now = fingerprints(client, experiment)
    drifted = [name for name in INPUTS if now[name] != stored.get(name)]
    if not drifted:
        return {"status": "VALID", "drifted_inputs": [],
                "message": "Experiment inputs match the stored execution fingerprint."}
    if len(drifted) == 1:
        changed, gone = SINGLE[drifted[0]]
        message = gone if now[drifted[0]] is None else changed
    else:
        message = "One or more experiment inputs have changed since execution."
    return {"status": "DRIFTED", "drifted_inputs": drifted, "message": message}
