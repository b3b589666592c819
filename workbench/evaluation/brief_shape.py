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

from workbench.evaluation.request import Evaluated, Request
from workbench.judges.base import Hit, Query
from workbench.schemas.body import load
from workbench.schemas.evaluate_brief import BriefEvaluateSchema

# The brief's metric names and the workbench metric each one is (``{k}`` the list's k).
METRICS = (("ndcg", "NDCG@{k}"), ("map", "MAP@{k}"), ("mrr", "MRR"))


def is_brief(body: dict[str, Any]) -> bool:
    """A body in this shape: its ``query`` is an object, or it has ``eval``."""
    return isinstance(body.get("query"), dict) or "eval" in body


def parse(body: dict[str, Any]) -> Request:
    """The request's evaluation; a 400 naming the field (by its path in this shape) when one is
    missing or wrong (schemas/evaluate_brief.py)."""
    fields = load(BriefEvaluateSchema(), body)
    hits = [Hit(doc_id, shown) for doc_id, shown in fields["hits"]]
    options, shared = fields["judgeOptions"]
    return Request(Query(fields["query"], fields["referenceAnswer"]), hits, "hits", fields["k"],
                   fields["judge"], options, fields["eval"]["debug"], shared=shared)


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
