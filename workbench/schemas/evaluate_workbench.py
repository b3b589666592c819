"""The workbench's own ``_evaluate`` request body (``evaluation/workbench_shape.py`` documents it).

The fields are checked in the order the workbench always checked them: ``queryText``,
``referenceAnswer``, ``k``, ``judge``, ``debug``, ``fields``, ``expectedIds``,
``expectedRelevant``, ``judgeOptions``, ``contextSufficiency``, then where the results come from
(``hits``, ``searchConfigurationId``, or ``index`` and ``searchQuery``). Whether a
``searchQuery`` can be sent is the store's rule (store/search_render.query_error, a layer above
this one): the schema is given it as ``query_check``. Whether a search configuration exists is
asked of the cluster by ``evaluation/workbench_shape.py``, after the body is valid.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, NamedTuple

from marshmallow import ValidationError

from workbench.schemas.body import BodyField, BodySchema
from workbench.schemas.evaluate import (
    BodyRule,
    JudgeName,
    JudgeOptions,
    PastedHit,
    References,
    field_names,
    judge_options,
    pasted,
    references,
    string_of,
)
from workbench.schemas.numbers import MAX_RESULT_WINDOW, bounded_int

DEFAULT_K = 10
# More expected ids than this is not a list anyone typed: refused rather than held in memory.
MAX_EXPECTED = 100_000
MAX_RELEVANT = 1_000_000_000


class Source(NamedTuple):
    """Where the results come from: the ``hits`` given, a search configuration's id, or a
    search configuration made of ``index`` and ``searchQuery`` (``config``)."""

    hits: list[PastedHit] | None = None
    config_id: str | None = None
    config: dict[str, Any] | None = None


class _QueryText(BodyRule):
    def check(self, body: dict[str, Any]) -> str:
        text = string_of(body, "queryText", "query")
        if not text or not text.strip():
            raise ValidationError("queryText is required")
        return text


class _K(BodyRule):
    def check(self, body: dict[str, Any]) -> int:
        return bounded_int(body.get("k", DEFAULT_K), "k", 1, MAX_RESULT_WINDOW)


class _Debug(BodyRule):
    def check(self, body: dict[str, Any]) -> bool:
        debug = body.get("debug", False)
        if not isinstance(debug, bool):
            raise ValidationError("debug must be true or false")
        return debug


class _Fields(BodyField):
    def check(self, value: Any) -> list[str] | None:
        return field_names(value)


def expected_ids(value: Any) -> list[str] | None:
    """``expectedIds``: a non-empty list of document ids (strings, or integers as hits' ids may
    be), duplicates dropped."""
    if value is None:
        return None
    if (not isinstance(value, list) or not value or len(value) > MAX_EXPECTED
            or not all(_is_id(item) for item in value)):
        raise ValidationError(f"expectedIds must be a non-empty list of at most {MAX_EXPECTED} "
                              "document ids (non-blank strings or integers)")
    return list(dict.fromkeys(str(item) for item in value))


def _is_id(item: Any) -> bool:
    if isinstance(item, str):
        return bool(item.strip())
    return isinstance(item, int) and not isinstance(item, bool)


class _ExpectedIds(BodyField):
    def check(self, value: Any) -> list[str] | None:
        return expected_ids(value)


class _ExpectedRelevant(BodyRule):
    """``expectedRelevant``: how many documents are relevant, at least the expected ids'."""

    def check(self, body: dict[str, Any]) -> int | None:
        value = body.get("expectedRelevant")
        if value is None:
            return None
        count = bounded_int(value, "expectedRelevant", 1, MAX_RELEVANT)
        ids = expected_ids(body.get("expectedIds"))  # a bad list failed in its own place
        if ids is not None and count < len(ids):
            raise ValidationError(f"expectedRelevant ({count}) is less than the number of "
                                  f"expectedIds ({len(ids)})")
        return count


class _ContextSufficiency(BodyRule):
    """``contextSufficiency``: a boolean; true needs a ``modelId`` and a reference answer."""

    def check(self, body: dict[str, Any]) -> bool:
        value = body.get("contextSufficiency", False)
        if not isinstance(value, bool):
            raise ValidationError("contextSufficiency must be true or false")
        if value:
            model_id = judge_options(body)[0].get("modelId")
            if not isinstance(model_id, str) or not model_id.strip():
                raise ValidationError("contextSufficiency needs a modelId (the model that "
                                      "judges it)")
            if not references(body.get("referenceAnswer")):
                raise ValidationError("contextSufficiency needs a referenceAnswer (what the "
                                      "results must hold)")
        return value


class _Source(BodyRule):
    """``hits``, else ``searchConfigurationId``, else ``index`` and ``searchQuery``."""

    def check(self, body: dict[str, Any]) -> Source:
        if "hits" in body:
            return Source(hits=pasted(body["hits"], field_names(body.get("fields"))))
        config_id = string_of(body, "searchConfigurationId")
        if config_id:
            return Source(config_id=config_id)
        index = string_of(body, "index")
        search_query = body.get("searchQuery")
        if not index or search_query is None:
            raise ValidationError("give hits, a searchConfigurationId, or an index and a "
                                  "searchQuery")
        text = search_query if isinstance(search_query, str) else json.dumps(search_query)
        error = self.parent.query_check(text, "searchQuery")  # type: ignore[union-attr]
        if error:
            raise ValidationError(f"searchQuery: {error}")
        return Source(config={"index": index, "query": text, "searchPipeline": ""})


class WorkbenchEvaluateSchema(BodySchema):
    """``POST /_evaluate`` in the workbench's shape; ``source`` says where the results are."""

    queryText = _QueryText(data_key="queryText")
    referenceAnswer = References(data_key="referenceAnswer")
    k = _K(data_key="k")
    judge = JudgeName(data_key="judge")
    debug = _Debug(data_key="debug")
    shown = _Fields(data_key="fields")
    expectedIds = _ExpectedIds(data_key="expectedIds")
    expectedRelevant = _ExpectedRelevant(data_key="expectedRelevant")
    judgeOptions = JudgeOptions(data_key="judgeOptions")
    contextSufficiency = _ContextSufficiency(data_key="contextSufficiency")
    source = _Source(data_key="hits")

    def __init__(self, query_check: Callable[[str, str], str | None], **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.query_check = query_check
