"""The ``_evaluate`` request body in the retrieval-evaluation API's shape
(``evaluation/brief_shape.py`` documents it).

The fields are checked in the order the workbench always checked them: ``query``, ``eval`` (with
the top-level ``debug``), ``hits``, ``k``, ``judge``, ``judgeOptions`` (with ``modelId``, which
the ``llm`` judge needs here), ``referenceAnswer``. A field is named by its path in this shape
(``query.inputs.text``).
"""

from __future__ import annotations

from typing import Any

from marshmallow import ValidationError

from workbench.schemas.body import BodySchema
from workbench.schemas.evaluate import (
    DEFAULT_JUDGE,
    BodyRule,
    JudgeName,
    PastedHit,
    References,
    judge_options,
    pasted,
)
from workbench.schemas.numbers import MAX_RESULT_WINDOW, bounded_int

DEFAULT_FIELDS = ["text"]
DEFAULT_SCALE = "1-4"


class _Query(BodyRule):
    """``query.inputs.text``: the query's text."""

    def check(self, body: dict[str, Any]) -> str:
        query = body.get("query")
        if not isinstance(query, dict):
            raise ValidationError("query must be an object: {\"inputs\": {\"text\": \"...\"}}")
        inputs = query.get("inputs")
        if inputs is None:
            raise ValidationError("query.inputs.text is required")
        if not isinstance(inputs, dict):
            raise ValidationError("query.inputs must be an object: {\"text\": \"...\"}")
        text = inputs.get("text")
        if text is None or (isinstance(text, str) and not text.strip()):
            raise ValidationError("query.inputs.text is required")
        if not isinstance(text, str):
            raise ValidationError("query.inputs.text must be a string")
        return text


def eval_settings(body: dict[str, Any]) -> dict[str, Any]:
    """``eval.fields`` (the fields shown to the judge) and ``debug``: ``eval.debug`` or the
    top-level ``debug``."""
    settings = body.get("eval", {})
    if settings is None:
        settings = {}
    if not isinstance(settings, dict):
        raise ValidationError("eval must be an object: {\"fields\": [...], \"debug\": false}")
    fields = settings.get("fields", DEFAULT_FIELDS)
    if not isinstance(fields, list) or not fields \
            or not all(isinstance(f, str) and f for f in fields):
        raise ValidationError("eval.fields must be a non-empty list of field names")
    debug = settings.get("debug", False)
    if not isinstance(debug, bool):
        raise ValidationError("eval.debug must be true or false")
    top_debug = body.get("debug", False)
    if not isinstance(top_debug, bool):
        raise ValidationError("debug must be true or false")
    return {"fields": fields, "debug": debug or top_debug}


class _Eval(BodyRule):
    def check(self, body: dict[str, Any]) -> dict[str, Any]:
        return eval_settings(body)


class _Hits(BodyRule):
    """``hits``: required (this shape judges the hits it is given), each with at least one of
    ``eval.fields``."""

    def check(self, body: dict[str, Any]) -> list[PastedHit]:
        if body.get("hits") is None:
            raise ValidationError("hits is required: this request shape judges the hits it is "
                                  "given")
        fields = eval_settings(body)["fields"]  # bad settings failed in their own place
        hits = pasted(body["hits"], fields)
        for number, (_, shown) in enumerate(hits):
            if not shown:
                raise ValidationError(f"hits[{number}] has none of the fields in eval.fields "
                                      f"({', '.join(fields)})")
        return hits


class _K(BodyRule):
    """``k``: absent or null judges every hit."""

    def check(self, body: dict[str, Any]) -> int:
        if body.get("k") is None:
            hits = body.get("hits")
            return len(hits) if isinstance(hits, list) else 0
        return bounded_int(body["k"], "k", 1, MAX_RESULT_WINDOW)


class _Options(BodyRule):
    """``judgeOptions`` with the top-level options; the ``llm`` judge needs a ``modelId`` (this
    shape names no model) and judges on the 1-4 scale unless told otherwise."""

    def check(self, body: dict[str, Any]) -> tuple[dict[str, Any], frozenset[str]]:
        options, shared = judge_options(body)
        if body.get("judge", DEFAULT_JUDGE) == DEFAULT_JUDGE:
            model = options.get("modelId")
            if model is None or (isinstance(model, str) and not model.strip()):
                raise ValidationError("modelId is required: this request shape names no model, "
                                      "so give the workbench's modelId (a registered model or "
                                      "an ML Commons model id)")
            options.setdefault("scale", DEFAULT_SCALE)
        return options, shared


class BriefEvaluateSchema(BodySchema):
    """``POST /_evaluate`` in the retrieval-evaluation API's shape."""

    query = _Query(data_key="query")
    eval = _Eval(data_key="eval")
    hits = _Hits(data_key="hits")
    k = _K(data_key="k")
    judge = JudgeName(data_key="judge")
    judgeOptions = _Options(data_key="judgeOptions")
    referenceAnswer = References(data_key="referenceAnswer")
