"""``POST /_plugins/_search_relevance/_evaluate``: score one query's result list on the spot.

Body: ``queryText`` (or ``query``), optional ``referenceAnswer``; the results as ``hits``
(``[{"id": ..., "<field>": ...}]``), or ``searchConfigurationId``, or ``index`` with a
``searchQuery``; ``fields`` shown to the judge; ``k`` (10); ``judge`` (``llm`` with ``modelId``,
``token_overlap`` or ``semantic`` with an optional ``threshold``); ``debug``.
"""

from __future__ import annotations

import json
from typing import Any

from flask import Blueprint, Response

from workbench.api import json_body, json_response, services
from workbench.api.srw import repository
from workbench.errors import BadRequest, WorkbenchError
from workbench.judgments import evaluate as core
from workbench.judgments.reference import DEFAULT_THRESHOLDS
from workbench.llm.mlcommons import UnknownModel
from workbench.schemas.numbers import MAX_RESULT_WINDOW, bounded_int
from workbench.store.indices import SEARCH_CONFIG_INDEX
from workbench.store.search_render import query_error, render

bp = Blueprint("evaluate", __name__)


class BadGateway(WorkbenchError):
    status = 502
    error_type = "llm_exception"


def _string(body: dict[str, Any], *names: str) -> str | None:
    for name in names:
        value = body.get(name)
        if value is not None:
            if not isinstance(value, str):
                raise BadRequest(f"Field '{name}' must be a string")
            return value
    return None


def _fields(body: dict[str, Any]) -> list[str] | None:
    fields = body.get("fields")
    if fields is None:
        return None
    if not isinstance(fields, list) or not fields or not all(isinstance(f, str) for f in fields):
        raise BadRequest("fields must be a non-empty list of field names")
    return fields


def _pick(source: dict[str, Any], fields: list[str] | None) -> dict[str, Any]:
    if fields is None:
        return {k: v for k, v in source.items() if k not in ("id", "_id")}
    return {f: source[f] for f in fields if f in source}


def _pasted(hits: Any, fields: list[str] | None) -> list[core.Result]:
    if not isinstance(hits, list) or not hits:
        raise BadRequest("hits must be a non-empty list of {\"id\": ..., \"<field>\": ...}")
    results = []
    for number, hit in enumerate(hits):
        if not isinstance(hit, dict):
            raise BadRequest(f"hits[{number}] must be an object")
        doc_id = hit.get("id", hit.get("_id"))
        if doc_id is None or (isinstance(doc_id, str) and not doc_id.strip()):
            raise BadRequest(f"hits[{number}] has no id")
        inner = hit.get("_source")
        source: dict[str, Any] = inner if isinstance(inner, dict) else hit
        results.append(core.Result(str(doc_id), _pick(source, fields)))
    return results


def _searched(body: dict[str, Any], query_text: str, k: int,
              fields: list[str] | None) -> tuple[list[core.Result], str]:
    config_id = _string(body, "searchConfigurationId")
    if config_id:
        config = repository(SEARCH_CONFIG_INDEX).get_source(config_id)
        if config is None:
            raise BadRequest(f"SearchConfiguration [{config_id}] does not exist")
    else:
        index = _string(body, "index")
        search_query = body.get("searchQuery")
        if not index or search_query is None:
            raise BadRequest("give hits, a searchConfigurationId, or an index and a searchQuery")
        text = search_query if isinstance(search_query, str) else json.dumps(search_query)
        error = query_error(text, "searchQuery")
        if error:
            raise BadRequest(f"searchQuery: {error}")
        config = {"index": index, "query": text, "searchPipeline": ""}
    search = render(config, query_text, k)
    answer = services().client.search(index=search.index, body=search.body,
                                      params=search.params())
    results = [core.Result(h["_id"], _pick(h.get("_source") or {}, fields))
               for h in answer["hits"]["hits"]]
    return results, search.index


@bp.post("/_evaluate")
def evaluate() -> Response:
    body = json_body()
    assert body is not None
    query_text = _string(body, "queryText", "query")
    if not query_text or not query_text.strip():
        raise BadRequest("queryText is required")
    reference = _string(body, "referenceAnswer")
    k = bounded_int(body.get("k", 10), "k", 1, MAX_RESULT_WINDOW)
    judge = body.get("judge", core.LLM_JUDGE)
    if judge not in core.JUDGES:
        raise BadRequest(f"Unknown judge [{judge}]; use one of: {', '.join(core.JUDGES)}")
    model_id = _string(body, "modelId")
    threshold = body.get("threshold")
    if threshold is not None and (isinstance(threshold, bool) or not isinstance(
            threshold, (int, float)) or not 0 <= threshold <= 1):
        raise BadRequest(f"threshold must be a number between 0 and 1, got: {threshold}")
    if judge == core.LLM_JUDGE:
        if not model_id:
            raise BadRequest("modelId is required for the llm judge")
        threshold = None  # the model grades; a reference judge's threshold does not apply
    else:
        if not reference or not reference.strip():
            raise BadRequest(f"referenceAnswer is required for the {judge} judge")
        if threshold is None:
            threshold = DEFAULT_THRESHOLDS[judge]
    debug = body.get("debug", False)
    if not isinstance(debug, bool):
        raise BadRequest("debug must be true or false")
    fields = _fields(body)
    if "hits" in body:
        results, source = _pasted(body["hits"], fields), "hits"
    else:
        results, source = _searched(body, query_text, k, fields)
    request = core.Request(query_text, reference, results, source, k, judge, model_id,
                           None if threshold is None else float(threshold), debug)
    try:
        return json_response(core.evaluate(services(), request))
    except core.JudgeFailed as exc:
        raise BadGateway(str(exc)) from exc
    except UnknownModel as exc:
        raise BadRequest(exc.reason) from exc
