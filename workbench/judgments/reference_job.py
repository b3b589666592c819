"""REFERENCE_JUDGMENT: 0/1 ratings from comparing each result with its query's
``referenceAnswer`` (``token_overlap`` or ``semantic``), without an LLM."""

from __future__ import annotations

from typing import Any

from workbench.javafmt import double_to_string
from workbench.judgments import reference
from workbench.judgments.retrieval import load, retrieve
from workbench.querysets.entries import read_entries
from workbench.services import Services
from workbench.store.indices import QUERY_SET_INDEX, SEARCH_CONFIG_INDEX


def plain_text(source: dict[str, Any], fields: list[str]) -> str:
    """The values of the context fields (all fields when none are named) as one text."""
    chosen = [source[f] for f in fields if f in source] if fields else list(source.values())
    return " ".join(_flatten(v) for v in chosen).strip()


def _flatten(value: Any) -> str:
    if isinstance(value, list):
        return " ".join(_flatten(v) for v in value)
    if isinstance(value, dict):
        return " ".join(_flatten(v) for v in value.values())
    return "" if value is None else str(value)


def generate(svc: Services, metadata: dict[str, Any]
             ) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    query_set = load(svc, QUERY_SET_INDEX, metadata["querySetId"], "QuerySet")
    configs = [load(svc, SEARCH_CONFIG_INDEX, c, "SearchConfiguration")
               for c in metadata["searchConfigurationList"]]
    fields = list(metadata.get("contextFields") or [])
    entries = read_entries(query_set)
    targets = retrieve(svc, entries, configs, int(metadata.get("size", 10)),
                       lambda source: plain_text(source, fields))
    ratings, failed, reason = [], 0, None
    for target in targets:
        answer = target.entry.reference_answer
        if target.search_error is not None or not answer:
            failed += 1
            reason = (f"search failed: {target.search_error}" if target.search_error
                      else f"query [{target.entry.query_text}] has no referenceAnswer")
            continue
        verdicts = reference.judge(metadata["judge"], answer, [text for _, text in target.hits],
                                   metadata.get("threshold"))
        ratings.append({"query": target.entry.key, "ratings": [
            {"docId": doc_id, "rating": double_to_string(float(rating)), "score": score}
            for (doc_id, _), (rating, score) in zip(target.hits, verdicts, strict=True)]})
    out = {**metadata, "totalQueries": len(entries), "successfulQueries": len(entries) - failed,
           "failedQueries": failed}
    if reason:
        out["lastFailureReason"] = reason
    return ratings, out
