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

import json
from typing import Any

from workbench.errors import BadRequest
from workbench.evaluation.request import Evaluated, Request
from workbench.judges.base import Hit, Query
from workbench.schemas.numbers import MAX_RESULT_WINDOW, bounded_int
from workbench.services import Services
from workbench.store.indices import SEARCH_CONFIG_INDEX
from workbench.store.repository import Repository
from workbench.store.search_render import query_error
from workbench.store.search_render import render as render_search

DEFAULT_JUDGE = "llm"
# Judge options that may be given at the top level of the request, as before judgeOptions.
TOP_LEVEL_OPTIONS = ("modelId", "threshold", "minTokens", "queryBoost")
# More expected ids than this is not a list anyone typed: refused rather than held in memory.
MAX_EXPECTED = 100_000


def string(body: dict[str, Any], *names: str) -> str | None:
    """The first of ``names`` present, which must be a string."""
    for name in names:
        value = body.get(name)
        if value is not None:
            if not isinstance(value, str):
                raise BadRequest(f"Field '{name}' must be a string")
            return value
    return None


def references(value: Any, field: str) -> tuple[str, ...]:
    """One reference answer or a list of them; blank ones are dropped."""
    if value is None:
        return ()
    items = value if isinstance(value, list) else [value]
    if not items or not all(isinstance(item, str) for item in items):
        raise BadRequest(f"{field} must be a string or a non-empty list of strings")
    return tuple(item for item in items if item.strip())


def fields_of(value: Any, field: str = "fields") -> list[str] | None:
    if value is None:
        return None
    if not isinstance(value, list) or not value or not all(isinstance(f, str) for f in value):
        raise BadRequest(f"{field} must be a non-empty list of field names")
    return value


def pick(source: dict[str, Any], fields: list[str] | None) -> dict[str, Any]:
    """The fields shown to the judge: the named ones, or all but the id."""
    if fields is None:
        return {k: v for k, v in source.items() if k not in ("id", "_id")}
    return {f: source[f] for f in fields if f in source}


def pasted(hits: Any, fields: list[str] | None, field: str = "hits") -> list[Hit]:
    if not isinstance(hits, list) or not hits:
        raise BadRequest(f"{field} must be a non-empty list of {{\"id\": ..., \"<field>\": ...}}")
    out = []
    for number, hit in enumerate(hits):
        if not isinstance(hit, dict):
            raise BadRequest(f"{field}[{number}] must be an object")
        doc_id = hit.get("id", hit.get("_id"))
        if doc_id is None or (isinstance(doc_id, str) and not doc_id.strip()):
            raise BadRequest(f"{field}[{number}] has no id")
        inner = hit.get("_source")
        source: dict[str, Any] = inner if isinstance(inner, dict) else hit
        out.append(Hit(str(doc_id), pick(source, fields)))
    return out


def searched(svc: Services, body: dict[str, Any], query_text: str, k: int,
             fields: list[str] | None) -> tuple[list[Hit], str]:
    """The hits of the search the request names, and the index they came from."""
    config_id = string(body, "searchConfigurationId")
    if config_id:
        config = Repository(svc.client, SEARCH_CONFIG_INDEX).get_source(config_id)
        if config is None:
            raise BadRequest(f"SearchConfiguration [{config_id}] does not exist")
    else:
        index = string(body, "index")
        search_query = body.get("searchQuery")
        if not index or search_query is None:
            raise BadRequest("give hits, a searchConfigurationId, or an index and a searchQuery")
        text = search_query if isinstance(search_query, str) else json.dumps(search_query)
        error = query_error(text, "searchQuery")
        if error:
            raise BadRequest(f"searchQuery: {error}")
        config = {"index": index, "query": text, "searchPipeline": ""}
    search = render_search(config, query_text, k)
    answer = svc.client.search(index=search.index, body=search.body, params=search.params())
    hits = [Hit(h["_id"], pick(h.get("_source") or {}, fields))
            for h in answer["hits"]["hits"]]
    return hits, search.index


def judge_options(body: dict[str, Any]) -> tuple[dict[str, Any], frozenset[str]]:
    """``judgeOptions`` plus the options given at the top level, and the names of the latter
    (given for whichever judge is picked, so one that does not take them ignores them)."""
    options = body.get("judgeOptions", {})
    if not isinstance(options, dict):
        raise BadRequest("judgeOptions must be an object")
    options = dict(options)
    shared = set()
    for name in TOP_LEVEL_OPTIONS:
        if body.get(name) is not None and name not in options:
            options[name] = body[name]
            shared.add(name)
    return options, frozenset(shared)


def expected_ids(value: Any) -> list[str] | None:
    """``expectedIds``: a non-empty list of document ids (strings, or integers as hits' ids may
    be), duplicates dropped."""
    if value is None:
        return None
    if (not isinstance(value, list) or not value or len(value) > MAX_EXPECTED
            or not all(_is_id(item) for item in value)):
        raise BadRequest(f"expectedIds must be a non-empty list of at most {MAX_EXPECTED} "
                         "document ids (non-blank strings or integers)")
    return list(dict.fromkeys(str(item) for item in value))


def _is_id(item: Any) -> bool:
    if isinstance(item, str):
        return bool(item.strip())
    return isinstance(item, int) and not isinstance(item, bool)


def expected_count(value: Any, ids: list[str] | None) -> int | None:
    """``expectedRelevant``: how many documents are relevant, at least the expected ids'."""
    if value is None:
        return None
    count = bounded_int(value, "expectedRelevant", 1, 1_000_000_000)
    if ids is not None and count < len(ids):
        raise BadRequest(f"expectedRelevant ({count}) is less than the number of expectedIds "
                         f"({len(ids)})")
    return count


def context_sufficiency(body: dict[str, Any], options: dict[str, Any],
                        refs: tuple[str, ...]) -> bool:
    """``contextSufficiency``: a boolean; true needs a ``modelId`` and a reference answer."""
    value = body.get("contextSufficiency", False)
    if not isinstance(value, bool):
        raise BadRequest("contextSufficiency must be true or false")
    if value:
        model_id = options.get("modelId")
        if not isinstance(model_id, str) or not model_id.strip():
            raise BadRequest("contextSufficiency needs a modelId (the model that judges it)")
        if not refs:
            raise BadRequest("contextSufficiency needs a referenceAnswer (what the results "
                             "must hold)")
    return value


def parse(svc: Services, body: dict[str, Any]) -> Request:
    query_text = string(body, "queryText", "query")
    if not query_text or not query_text.strip():
        raise BadRequest("queryText is required")
    refs = references(body.get("referenceAnswer"), "referenceAnswer")
    k = bounded_int(body.get("k", 10), "k", 1, MAX_RESULT_WINDOW)
    judge = body.get("judge", DEFAULT_JUDGE)
    debug = body.get("debug", False)
    if not isinstance(debug, bool):
        raise BadRequest("debug must be true or false")
    fields = fields_of(body.get("fields"))
    ids = expected_ids(body.get("expectedIds"))
    count = expected_count(body.get("expectedRelevant"), ids)
    options, shared = judge_options(body)
    sufficiency = context_sufficiency(body, options, refs)
    if "hits" in body:
        hits, source = pasted(body["hits"], fields), "hits"
    else:
        hits, source = searched(svc, body, query_text, k, fields)
    return Request(Query(query_text, refs), hits, source, k, judge, options, debug, shared=shared,
                   expected_ids=ids, expected_count=count, context_sufficiency=sufficiency)


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
