"""``_evaluate`` in the request and response shape of the retrieval-evaluation API (Pinecone's
Evals API), so a client written for that API can use the workbench as its server.

Request: ``{"query": {"inputs": {"text": ...}}, "eval": {"fields": ["text"], "debug": false},
"hits": [{"id": ..., "text": ...}]}``. The hits are given (no search) and all judged, unless the
workbench's ``k`` is also given. That API names no judge: the judge is ``llm`` with the model of
the workbench's ``modelId``, on the 1-4 scale; the workbench shape's ``judge``, ``judgeOptions``
(``scale`` among them) and ``referenceAnswer`` may be added and are honoured.

Response: ``metrics`` (``ndcg``, ``map``, ``mrr``), ``hits`` (``index``, the hit's position in
the request; ``fields``, the hit as given; ``relevant``; ``score``, the grade or null;
``justification``) and ``usage`` (``evaluation_input_tokens``, ``evaluation_output_tokens`` and
the workbench's usage figures).
"""

from __future__ import annotations

from typing import Any

from workbench.errors import BadRequest
from workbench.evaluation.request import Evaluated, Request
from workbench.evaluation.workbench_shape import judge_options, pasted, references
from workbench.judges.base import Query
from workbench.schemas.numbers import MAX_RESULT_WINDOW, bounded_int

DEFAULT_FIELDS = ["text"]
DEFAULT_JUDGE = "llm"
DEFAULT_SCALE = "1-4"
# The brief's metric names and the workbench metric each one is (``{k}`` the list's k).
METRICS = (("ndcg", "NDCG@{k}"), ("map", "MAP@{k}"), ("mrr", "MRR"))


def is_brief(body: dict[str, Any]) -> bool:
    """A body in this shape: its ``query`` is an object, or it has ``eval``."""
    return isinstance(body.get("query"), dict) or "eval" in body


def query_text(body: dict[str, Any]) -> str:
    query = body.get("query")
    if not isinstance(query, dict):
        raise BadRequest("query must be an object: {\"inputs\": {\"text\": \"...\"}}")
    inputs = query.get("inputs")
    if inputs is None:
        raise BadRequest("query.inputs.text is required")
    if not isinstance(inputs, dict):
        raise BadRequest("query.inputs must be an object: {\"text\": \"...\"}")
    text = inputs.get("text")
    if text is None or (isinstance(text, str) and not text.strip()):
        raise BadRequest("query.inputs.text is required")
    if not isinstance(text, str):
        raise BadRequest("query.inputs.text must be a string")
    return text


def eval_settings(body: dict[str, Any]) -> tuple[list[str], bool]:
    """``eval.fields`` (the fields shown to the judge) and ``eval.debug``."""
    settings = body.get("eval", {})
    if settings is None:
        settings = {}
    if not isinstance(settings, dict):
        raise BadRequest("eval must be an object: {\"fields\": [...], \"debug\": false}")
    fields = settings.get("fields", DEFAULT_FIELDS)
    if not isinstance(fields, list) or not fields \
            or not all(isinstance(f, str) and f for f in fields):
        raise BadRequest("eval.fields must be a non-empty list of field names")
    debug = settings.get("debug", False)
    if not isinstance(debug, bool):
        raise BadRequest("eval.debug must be true or false")
    top_debug = body.get("debug", False)
    if not isinstance(top_debug, bool):
        raise BadRequest("debug must be true or false")
    return fields, debug or top_debug


def parse(body: dict[str, Any]) -> Request:
    """The request's evaluation; a 400 naming the field (by its path in this shape) when one is
    missing or wrong."""
    text = query_text(body)
    fields, debug = eval_settings(body)
    if body.get("hits") is None:
        raise BadRequest("hits is required: this request shape judges the hits it is given")
    raw = body["hits"]
    hits = pasted(raw, fields)
    for number, hit in enumerate(hits):
        if not hit.fields:
            raise BadRequest(f"hits[{number}] has none of the fields in eval.fields "
                             f"({', '.join(fields)})")
    k = len(hits) if body.get("k") is None else bounded_int(body["k"], "k", 1, MAX_RESULT_WINDOW)
    judge = body.get("judge", DEFAULT_JUDGE)
    options, shared = judge_options(body)
    if judge == DEFAULT_JUDGE:
        model = options.get("modelId")
        if model is None or (isinstance(model, str) and not model.strip()):
            raise BadRequest("modelId is required: this request shape names no model, so give "
                             "the workbench's modelId (a registered model or an ML Commons "
                             "model id)")
        options.setdefault("scale", DEFAULT_SCALE)
    refs = references(body.get("referenceAnswer"), "referenceAnswer")
    request = Request(Query(text, refs), hits, "hits", k, judge, options, debug, shared=shared)
    return request


def grade(value: float | None) -> int | float | None:
    """A grade as the brief writes it: an integer when it is one."""
    if value is None:
        return None
    return int(value) if float(value).is_integer() else value


def metrics(done: Evaluated) -> dict[str, float]:
    k = done.request.k
    return {name: done.metrics[key.format(k=k)] for name, key in METRICS}


def render(done: Evaluated, body: dict[str, Any]) -> dict[str, Any]:
    """The answer in this shape; ``body`` is the request, whose hits are echoed as given."""
    req = done.request
    raw = body["hits"]
    hits = []
    for index, verdict in enumerate(done.verdicts):
        hits.append({"index": index, "fields": raw[index], "relevant": verdict.relevant,
                     "score": grade(verdict.rating), "justification": verdict.rationale})
    usage = done.usage
    answer: dict[str, Any] = {
        "metrics": metrics(done),
        "hits": hits,
        "usage": {"evaluation_input_tokens": usage.input_tokens,
                  "evaluation_output_tokens": usage.output_tokens,
                  **{key: value for key, value in usage.as_dict().items()
                     if key not in ("inputTokens", "outputTokens")}},
    }
    if req.debug:
        answer["debug"] = {
            "judge": req.judge, "k": req.k,
            "scale": req.options.get("scale"), "modelId": req.options.get("modelId"),
            "results": [{"index": index, "id": hit.id, "judged": dict(hit.fields),
                         "confidence": verdict.confidence, "cached": verdict.cached,
                         "similarity": verdict.score}
                        for index, (hit, verdict) in enumerate(zip(req.top, done.verdicts,
                                                                    strict=True))],
            "llmCalls": done.trace}
    return answer
