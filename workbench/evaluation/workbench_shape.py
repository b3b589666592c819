"""The workbench's own ``_evaluate`` request and response.

Request: ``queryText`` (or ``query``), optional ``referenceAnswer`` (a string, or a list of
them); the results as ``hits`` (``[{"id": ..., "<field>": ...}]``), or a
``searchConfigurationId``, or an ``index`` with a ``searchQuery``; ``fields`` shown to the
judge; ``k`` (10); ``judge`` (a registered judge's name, ``llm`` by default) with its options
at the top level (``modelId``, ``threshold``, ``minTokens``, ``queryBoost``) or in
``judgeOptions``; ``debug``. For the metrics (``workbench.evaluation.run``): ``expectedIds``
(the relevant documents' ids: they then decide relevance, and Recall@k is answered) and
``expectedRelevant`` (how many relevant documents there are). ``contextSufficiency``: true asks
``modelId`` whether the hits together hold what the reference answer says.
"""

from __future__ import annotations

from typing import Any

from workbench.errors import BadRequest
from workbench.evaluation.request import Evaluated, Request
from workbench.judges.base import Hit, Query
from workbench.schemas.body import load
from workbench.schemas.evaluate import DEFAULT_JUDGE, pick
from workbench.schemas.evaluate_workbench import Source, WorkbenchEvaluateSchema
from workbench.services import Services
from workbench.store.indices import SEARCH_CONFIG_INDEX
from workbench.store.repository import Repository
from workbench.store.search_render import query_error
from workbench.store.searching import search_hits


def parse(svc: Services, body: dict[str, Any]) -> Request:
    """The request's evaluation: the body checked (schemas/evaluate_workbench.py), then the
    search it names run, if it gives no hits."""
    fields = load(WorkbenchEvaluateSchema(query_check=query_error), body)
    text, k, shown = fields["queryText"], fields["k"], fields["shown"]
    source: Source = fields["source"]
    if source.hits is not None:
        hits, where = [Hit(doc_id, shown_fields) for doc_id, shown_fields in source.hits], "hits"
    else:
        hits, where = searched(svc, source, text, k, shown)
    options, shared = fields["judgeOptions"]
    return Request(Query(text, fields["referenceAnswer"]), hits, where, k, fields["judge"],
                   options, fields["debug"], shared=shared, expected_ids=fields["expectedIds"],
                   expected_count=fields["expectedRelevant"],
                   context_sufficiency=fields["contextSufficiency"])


def searched(svc: Services, source: Source, query_text: str, k: int,
             fields: list[str] | None) -> tuple[list[Hit], str]:
    """The hits of the search the request names, and the index they came from."""
    if source.config_id:
        config = Repository(svc.client, SEARCH_CONFIG_INDEX).get_source(source.config_id)
        if config is None:
            raise BadRequest(f"SearchConfiguration [{source.config_id}] does not exist")
    else:
        assert source.config is not None
        config = source.config
    found, index = search_hits(svc.client, config, query_text, k)
    return [Hit(h["_id"], pick(h.get("_source") or {}, fields)) for h in found], index


def render(done: Evaluated) -> dict[str, Any]:
    req = done.request
    is_llm = req.judge == DEFAULT_JUDGE
    hits = []
    for rank, (hit, verdict) in enumerate(zip(req.top, done.verdicts, strict=True), start=1):
        out: dict[str, Any] = {"rank": rank, "id": hit.id, "rating": verdict.rating,
                               "relevant": verdict.relevant}
        if verdict.confidence is not None or verdict.rationale is not None or is_llm:
            out.update(confidence=verdict.confidence, justification=verdict.rationale)
        if is_llm:
            out["cached"] = verdict.cached
        if verdict.score is not None:
            out["score"] = verdict.score
        if done.counted is not None:
            out["counted"] = done.counted[rank - 1]
        if done.credited is not None:
            out["reference"] = done.credited[rank - 1]
        hits.append(out)
    answer: dict[str, Any] = {"queryText": req.query.text, "judge": req.judge, "k": req.k,
                              "hits": hits, "metrics": done.metrics,
                              "usage": done.usage.as_dict()}
    if req.query.references:
        refs = req.query.references
        answer["referenceAnswer"] = refs[0] if len(refs) == 1 else list(refs)
    if "modelId" in req.options:
        answer["modelId"] = req.options["modelId"]
    if "threshold" in done.extra:
        answer["threshold"] = done.extra["threshold"]
    if done.relevant_total is not None:
        answer["relevantTotal"] = done.relevant_total
    if done.sufficiency is not None:
        answer["contextSufficiency"] = done.sufficiency.as_dict()
    if req.debug:
        answer["debug"] = {"results": [{"id": h.id, "fields": dict(h.fields)} for h in req.top],
                           "llmCalls": done.trace}
    return answer
