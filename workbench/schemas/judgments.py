"""The request bodies of judgment creates: ``PUT /judgments`` (one schema per ``type``, chosen by
``judgment_schema``) and ``POST /judgments/_estimate`` (an ``LLM_JUDGMENT`` body, its type checked
first).

This module holds the ``LLM_JUDGMENT`` fields; the head every type shares and the rules the domain
gives (``JudgmentRules``, built in judgments/create.py) are schemas/judgment_fields.py, the other
types schemas/judgment_sources.py. What can only be checked once the whole body is valid (an
existing judgment to reuse, a UBI events index) is the domain's.
"""

from __future__ import annotations

from typing import Any

from marshmallow import ValidationError

from workbench.schemas import budget
from workbench.schemas.judgment_fields import (
    DEFAULT_SIZE,
    IMPORT,
    LLM,
    REFERENCE,
    TYPES,
    UBI,
    Configurations,
    Description,
    Head,
    JudgmentBody,
    JudgmentField,
    JudgmentRules,
    JudgmentSchema,
    Name,
    QuerySetId,
    Rank,
    StringList,
)
from workbench.schemas.judgment_sources import (
    ImportJudgmentSchema,
    ReferenceJudgmentSchema,
    UbiJudgmentSchema,
)

__all__ = [
    "IMPORT", "LLM", "REFERENCE", "SCHEMAS", "TYPES", "UBI", "JudgmentBody", "JudgmentRules",
    "JudgmentSchema", "LlmEstimateSchema", "LlmJudgmentSchema", "judgment_schema",
]

MAX_EXISTING = 5
DEFAULT_TOKEN_LIMIT = 4000


class _EstimateType(JudgmentField):
    def check(self, value: Any) -> str:
        if value != LLM:
            raise ValidationError(f"type must be LLM_JUDGMENT to estimate a judgment, got: "
                                  f"{value}")
        return LLM


def _java_class(value: Any) -> str:
    """The simple class name Jackson would give a JSON value."""
    if isinstance(value, bool):
        return "Boolean"
    if isinstance(value, list):
        return "ArrayList"
    if isinstance(value, dict):
        return "LinkedHashMap"
    return type(value).__name__


class _Flag(JudgmentField):
    """A boolean; absent or null is false."""

    def check(self, value: Any) -> bool:
        if value is None:
            return False
        if not isinstance(value, bool):
            raise ValidationError(f"{self.name} must be true or false")
        return value


class _ModelId(JudgmentField):
    def check(self, value: Any) -> str:
        if not isinstance(value, str) or not value.strip():
            raise ValidationError("modelId is required for LLM_JUDGMENT")
        return value


class _TokenLimit(JudgmentField):
    """A number or a numeric string, 1000 to 500000; 4000 when absent."""

    def check(self, value: Any) -> int:
        if value is None:
            return DEFAULT_TOKEN_LIMIT
        if isinstance(value, bool) or not isinstance(value, (int, float, str)):
            raise ValidationError("Invalid tokenLimit type. Expected numeric value or string, "
                                  "got: " + _java_class(value))
        if isinstance(value, str):
            try:
                limit = int(value.strip())
            except ValueError:
                raise ValidationError(
                    f"Invalid tokenLimit value. Expected numeric value, got: {value}") from None
        else:
            limit = int(value)
        if not 1000 <= limit <= 500000:
            raise ValidationError(f"TokenLimit must be between 1000 and 500000, got: {limit}")
        return limit


class _Template(JudgmentField):
    """A prompt template under the prompt rules; absent or blank is the default template."""

    def check(self, value: Any) -> str:
        if value is not None and not isinstance(value, str):
            raise ValidationError("Field 'promptTemplate' must be a string")
        error = self.rules.template_error(value)
        if error:
            raise ValidationError(error)
        return value if value and value.strip() else self.rules.default_template


class _RatingType(JudgmentField):
    def check(self, value: Any) -> str:
        rating_type = value or self.rules.default_rating_type
        error = self.rules.rating_type_error(rating_type)
        if error:
            raise ValidationError(error)
        assert isinstance(rating_type, str)
        return rating_type


class _Existing(StringList):
    def check(self, value: Any) -> list[str]:
        existing = super().check(value)
        if len(existing) > MAX_EXISTING:
            raise ValidationError(f"Too many existing judgments referenced: {len(existing)}. "
                                  f"Maximum allowed is {MAX_EXISTING}")
        return existing


class _MaxTokens(JudgmentField):
    def check(self, value: Any) -> int | None:
        return budget.max_tokens(value)


class _MaxCost(JudgmentField):
    """A number greater than 0, for a model with prices."""

    def check(self, value: Any) -> float | None:
        return budget.max_cost(value, self.loaded.get("modelId"), self.rules.price_of)


class _LlmFields(JudgmentBody):
    modelId = _ModelId()
    tokenLimit = _TokenLimit()
    promptTemplate = _Template()
    llmJudgmentRatingType = _RatingType()
    existingJudgments = _Existing()
    size = Rank(DEFAULT_SIZE)
    contextFields = StringList()
    ignoreFailure = _Flag()
    overwriteCache = _Flag()
    includeRationale = _Flag()
    expandCoverage = _Flag()  # its hybrid configurations: judgments/create.py
    maxTokens = _MaxTokens()
    maxCost = _MaxCost()
    querySetId = QuerySetId()
    searchConfigurationList = Configurations(LLM)


class LlmJudgmentSchema(_LlmFields, Head):
    """``PUT /judgments`` of an ``LLM_JUDGMENT`` (the head's fields come first)."""


class _EstimateHead(JudgmentBody):
    type = _EstimateType()
    name = Name()
    description = Description()


class LlmEstimateSchema(_LlmFields, _EstimateHead):
    """``POST /judgments/_estimate``: the body of an ``LLM_JUDGMENT`` create, its type first."""


SCHEMAS: dict[str, type[JudgmentBody]] = {
    LLM: LlmJudgmentSchema, UBI: UbiJudgmentSchema, IMPORT: ImportJudgmentSchema,
    REFERENCE: ReferenceJudgmentSchema,
}


def judgment_schema(body: dict[str, Any], rules: JudgmentRules) -> JudgmentBody:
    """The schema of a ``PUT /judgments`` body, by its ``type`` (an unknown type: the shared
    fields only, whose last check refuses it)."""
    judgment_type = body.get("type")
    schema = SCHEMAS.get(judgment_type) if isinstance(judgment_type, str) else None
    return (schema or JudgmentSchema)(rules)
