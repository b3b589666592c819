"""Input fingerprints of an experiment (docs/contract.md, "Input signature"): SHA-256 of canonical
JSON of its query set, judgments and search configurations, to tell later whether the inputs have
drifted."""

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


def _judgment_rows(doc: dict[str, Any]) -> list[Any]:
    """One judgment: rows sorted by query, each row's ratings sorted by (docId, rating)."""
    rows = [{"query": r.get("query"),
             "ratings": sorted((r.get("ratings") or []),
                               key=lambda x: (str(x.get("docId")), str(x.get("rating"))))}
            for r in doc.get("judgmentRatings") or []]
    return sorted(rows, key=lambda row: str(row["query"]))


def _configuration(doc: dict[str, Any]) -> dict[str, Any]:
    return {"index": doc.get("index"), "pipeline": doc.get("searchPipeline") or "",
            "query": _query(str(doc.get("query", "")))}


def signature(query_set: dict[str, Any] | None, judgments: list[dict[str, Any]] | None,
              configs: list[dict[str, Any]] | None) -> dict[str, str | None]:
    """The fingerprints of loaded inputs; None for an input that could not be loaded."""
    values: dict[str, Any] = {
        "query_set": None if query_set is None
        else sorted(e.query_text for e in read_entries(query_set)),
        "judgment_list": None if judgments is None else [_judgment_rows(j) for j in judgments],
        "search_configurations": None if configs is None else [_configuration(c)
                                                               for c in configs],
    }
    return {name: None if value is None else _hash(value) for name, value in values.items()}


def _all_or_none(client: OpenSearch, index: str, ids: list[str]) -> list[dict[str, Any]] | None:
    docs = []
    for entity_id in ids:
        doc = Repository(client, index).get_source(entity_id)
        if doc is None:
            return None
        docs.append(doc)
    return docs


def fingerprints(client: OpenSearch, experiment: dict[str, Any]) -> dict[str, str | None]:
    """Load the experiment's inputs as they are now and fingerprint them."""
    return signature(
        Repository(client, QUERY_SET_INDEX).get_source(experiment.get("querySetId", "")),
        _all_or_none(client, JUDGMENT_INDEX, list(experiment.get("judgmentList") or [])),
        _all_or_none(client, SEARCH_CONFIG_INDEX,
                     list(experiment.get("searchConfigurationList") or [])))


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
