"""The body of ``POST experiments/{id}/_fill`` and ``.../_fill/_estimate`` (docs/holes.md): who
rates the holes, either a model (``modelId``, with the ``LLM_JUDGMENT`` fields, checked by the
same code as ``PUT judgments``) or a reference judge (``judge`` and ``judgeOptions``, as a
``REFERENCE_JUDGMENT`` takes it), and how deep the pool is (``size``, at most the experiment's).
"""

from __future__ import annotations

from typing import Any

from marshmallow import ValidationError

from workbench.schemas.body import Step, Text
from workbench.schemas.judgment_fields import JudgmentBody, JudgmentField, JudgmentRules, StringList
from workbench.schemas.judgment_sources import ChosenJudge
from workbench.schemas.judgments import (
    _Flag,
    _MaxCost,
    _MaxTokens,
    _RatingType,
    _Template,
    _TokenLimit,
)
from workbench.schemas.text import NAME_LIMIT

NEITHER = "either modelId (a model) or judge (a reference judge) is required"
BOTH = "give either modelId or judge, not both"


class _Name(Step, Text):
    """Optional: absent, the view names the list after the experiment."""

    def __init__(self) -> None:
        super().__init__("name", NAME_LIMIT, optional=True)


class _Model(JudgmentField):
    def check(self, value: Any) -> str | None:
        if value is None:
            return None
        if not isinstance(value, str) or not value.strip():
            raise ValidationError("modelId must be a non-empty string")
        return value


class _Judge(JudgmentField):
    """``judge`` with its ``judgeOptions`` (an object), built as a REFERENCE_JUDGMENT's."""

    def check(self, value: Any) -> ChosenJudge | None:
        model = self.loaded.get("modelId")
        if value is None:
            if model is None:
                raise ValidationError(NEITHER)
            if self.body.get("judgeOptions") is not None:
                raise ValidationError("judgeOptions applies only to a fill by a judge")
            return None
        if model is not None:
            raise ValidationError(BOTH)
        options = self.body.get("judgeOptions", {})
        if options is None:
            options = {}
        if not isinstance(options, dict):
            raise ValidationError("judgeOptions must be an object")
        return ChosenJudge(value, self.rules.judge(value, dict(options)), dict(options))


class _ForModel(JudgmentField):
    """A field of the model's prompt or budget: refused in a fill by a judge."""

    def check(self, value: Any) -> Any:
        if self.loaded.get("modelId") is None:
            if value is not None:
                raise ValidationError(f"{self.name} applies only to a fill by a model "
                                      "(modelId), not by a judge")
            return None
        return super().check(value)


class _RatingTypeFor(_ForModel, _RatingType):
    pass


class _TemplateFor(_ForModel, _Template):
    pass


class _TokenLimitFor(_ForModel, _TokenLimit):
    pass


class _MaxTokensFor(_ForModel, _MaxTokens):
    pass


class _MaxCostFor(_ForModel, _MaxCost):
    pass


class _OverwriteFor(_ForModel, _Flag):
    pass


class _Size(JudgmentField):
    """The depth of the pool: 1 to the experiment's ``size``, which it is when absent."""

    def check(self, value: Any) -> int:
        limit = self.schema.max_size  # type: ignore[attr-defined]
        if value is None and "size" not in self.body:
            return int(limit)
        if value is None:
            raise ValidationError("size is required")
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValidationError(f"size must be a positive integer, got: {value}")
        if value > limit:
            raise ValidationError(f"size must be at most {limit} (the experiment's size), "
                                  f"got: {value}")
        return value


class FillSchema(JudgmentBody):
    """``POST experiments/{id}/_fill`` (and its ``_estimate``), for an experiment of size
    ``max_size``; ``rules`` are the judgment creates' (judgments/create.py)."""

    name = _Name()
    modelId = _Model()
    judge = _Judge()
    llmJudgmentRatingType = _RatingTypeFor()
    promptTemplate = _TemplateFor()
    contextFields = StringList()
    tokenLimit = _TokenLimitFor()
    maxTokens = _MaxTokensFor()
    maxCost = _MaxCostFor()
    overwriteCache = _OverwriteFor()
    size = _Size()

    def __init__(self, rules: JudgmentRules, max_size: int, **kwargs: Any) -> None:
        super().__init__(rules, **kwargs)
        self.max_size = max_size
