"""REFERENCE_JUDGMENT: ratings from a judge of ``workbench.judges`` that needs no LLM call of
the job's own (``token_overlap``, ``semantic``, or an installed judge), comparing each result
with its query's ``referenceAnswer``."""

from __future__ import annotations

import json
from typing import Any

from workbench.jobs import fanout
from workbench.jobs.control import JobControl, without_progress
from workbench.judges import registry
from workbench.judges.base import Hit, Judge, Query, Setup
from workbench.judgments.retrieval import Target, load, load_configurations, local_indices, retrieve
from workbench.querysets.entries import QueryEntry, read_entries
from workbench.schemas.javafmt import double_to_string
from workbench.services import Services
from workbench.store.indices import QUERY_SET_INDEX
from workbench.store.vector_fields import vector_fields, without_fields

KIND = "reference_judgment"
#: queries per unit of a split job
UNIT_QUERIES = 10
#: estimated seconds of judging one query's hits (token counts, or embeddings)
QUERY_SECONDS = 0.01


def shown_fields(source: dict[str, Any], fields: list[str],
                 vectors: frozenset[str] = frozenset()) -> str:
    """The context fields of a document (when none are named, all but its ``vectors`` fields,
    as an LLM prompt shows it), as JSON kept in the fields' order: what the judge is shown."""
    chosen = ({f: source[f] for f in fields if f in source} if fields
              else without_fields(source, vectors))
    return json.dumps(chosen, ensure_ascii=False, default=str)


def _options(metadata: dict[str, Any]) -> dict[str, Any]:
    options = dict(metadata.get("judgeOptions") or {})
    if metadata.get("threshold") is not None:
        options["threshold"] = metadata["threshold"]
    return options


def _rate(judge: Judge, target: Target) -> dict[str, Any] | str:
    """One query's ``judgmentRatings`` entry, or the reason it failed."""
    answer = target.entry.reference_answer
    if target.search_error is not None:
        return f"search failed: {target.search_error}"
    if judge.needs_reference and not answer:
        return f"query [{target.entry.query_text}] has no referenceAnswer"
    query = Query(target.entry.query_text, (answer,) if answer else (),
                  dict(target.entry.custom_fields))
    hits = [Hit(doc_id, json.loads(shown)) for doc_id, shown in target.hits]
    verdicts = judge.judge(query, hits).verdicts if hits else []
    return {"query": target.entry.key, "ratings": [
        {"docId": hit.id, "rating": double_to_string(float(v.rating or 0.0)), "score": v.score}
        for hit, v in zip(hits, verdicts, strict=True)]}


def _judge(svc: Services, metadata: dict[str, Any]) -> Judge:
    return registry.create(metadata["judge"], Setup(_options(metadata), svc, source="judgment"))


def generate(svc: Services, metadata: dict[str, Any], judgment_id: str,
             control: JobControl | None) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    query_set = load(svc, QUERY_SET_INDEX, metadata["querySetId"], "QuerySet")
    configs, remote = load_configurations(svc, metadata)
    fields = list(metadata.get("contextFields") or [])
    entries = read_entries(query_set)
    vectors = frozenset() if fields else vector_fields(svc.client, local_indices(configs))
    targets = retrieve(svc, entries, configs, int(metadata.get("size", 10)),
                       lambda source: shown_fields(source, fields, vectors), remote=remote)
    judge = _judge(svc, metadata)  # an unknown judge or option fails here, before any unit
    if fanout.worth_splitting(svc, len(targets), len(targets) * QUERY_SECONDS):
        groups = [targets[n:n + UNIT_QUERIES] for n in range(0, len(targets), UNIT_QUERIES)]
        payloads = [[_payload(t) for t in group] for group in groups]
        parts = fanout.spread(svc, KIND, judgment_id, {"metadata": without_progress(metadata)},
                              payloads, [len(g) for g in groups], control)
        outcomes: list[dict[str, Any] | str] = [o for part in parts for o in part]
    else:
        outcomes = [_rate(judge, target) for target in targets]
    ratings = [o for o in outcomes if isinstance(o, dict)]
    reasons = [o for o in outcomes if isinstance(o, str)]
    failed = len(reasons)
    out = {**metadata, "totalQueries": len(entries), "successfulQueries": len(entries) - failed,
           "failedQueries": failed}
    if reasons:
        out["lastFailureReason"] = reasons[-1]
    return ratings, out


def _payload(target: Target) -> dict[str, Any]:
    return {"queryText": target.entry.query_text, "customFields": target.entry.custom_fields,
            "hits": [list(hit) for hit in target.hits], "searchError": target.search_error}


class ReferenceUnits:
    """One process's share of a split reference judgment: a unit is ``UNIT_QUERIES`` queries."""

    threads = 1  # the judges compute (token counts, embeddings): threads would not help

    def __init__(self, svc: Services, judgment_id: str, head: dict[str, Any]) -> None:
        self.judge = _judge(svc, head["metadata"])

    def unit(self, payload: list[dict[str, Any]]) -> list[dict[str, Any] | str]:
        targets = [Target(QueryEntry(p["queryText"], dict(p.get("customFields") or {})),
                          [(d, shown) for d, shown in p["hits"]], search_error=p["searchError"])
                   for p in payload]
        return [_rate(self.judge, target) for target in targets]

    def close(self) -> None:
        pass


fanout.KINDS[KIND] = ReferenceUnits
