"""REFERENCE_JUDGMENT: ratings from a judge of ``workbench.judges`` that needs no LLM call of
the job's own (``token_overlap``, ``semantic``, or an installed judge), comparing each result
with its query's ``referenceAnswer``."""

from __future__ import annotations

import json
from typing import Any

from workbench.javafmt import double_to_string
from workbench.judges import registry
from workbench.judges.base import Hit, Query, Setup
from workbench.judgments.retrieval import load, retrieve
from workbench.querysets.entries import read_entries
from workbench.services import Services
from workbench.store.indices import QUERY_SET_INDEX, SEARCH_CONFIG_INDEX


def shown_fields(source: dict[str, Any], fields: list[str]) -> str:
    """The context fields of a document (all fields when none are named), as JSON kept in the
    fields' order: what the judge is shown."""
    chosen = {f: source[f] for f in fields if f in source} if fields else dict(source)
    return json.dumps(chosen, ensure_ascii=False, default=str)


def _options(metadata: dict[str, Any]) -> dict[str, Any]:
    options = dict(metadata.get("judgeOptions") or {})
    if metadata.get("threshold") is not None:
        options["threshold"] = metadata["threshold"]
    return options


def generate(svc: Services, metadata: dict[str, Any]
             ) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    query_set = load(svc, QUERY_SET_INDEX, metadata["querySetId"], "QuerySet")
    configs = [load(svc, SEARCH_CONFIG_INDEX, c, "SearchConfiguration")
               for c in metadata["searchConfigurationList"]]
    fields = list(metadata.get("contextFields") or [])
    entries = read_entries(query_set)
    targets = retrieve(svc, entries, configs, int(metadata.get("size", 10)),
                       lambda source: shown_fields(source, fields))
    judge = registry.create(metadata["judge"], Setup(_options(metadata), svc,
                                                     source="judgment"))
    ratings, failed, reason = [], 0, None
    for target in targets:
        answer = target.entry.reference_answer
        if target.search_error is not None or (judge.needs_reference and not answer):
            failed += 1
            reason = (f"search failed: {target.search_error}" if target.search_error
                      else f"query [{target.entry.query_text}] has no referenceAnswer")
            continue
        query = Query(target.entry.query_text, (answer,) if answer else (),
                      dict(target.entry.custom_fields))
        hits = [Hit(doc_id, json.loads(shown)) for doc_id, shown in target.hits]
        verdicts = judge.judge(query, hits).verdicts if hits else []
        ratings.append({"query": target.entry.key, "ratings": [
            {"docId": hit.id, "rating": double_to_string(float(v.rating or 0.0)),
             "score": v.score}
            for hit, v in zip(hits, verdicts, strict=True)]})
    out = {**metadata, "totalQueries": len(entries), "successfulQueries": len(entries) - failed,
           "failedQueries": failed}
    if reason:
        out["lastFailureReason"] = reason
    return ratings, out
