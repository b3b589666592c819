"""The request bodies of judgment creates: ``PUT /judgments`` (one schema per ``type``) and
``POST /judgments/_estimate`` (an ``LLM_JUDGMENT`` body, its type checked first).

The fields are checked in the order the workbench has always checked them, so the first error
is the same. A few checks need a layer above this one (a stored query set or search
configuration, a model's prices, the prompt rules, the click models, the judges): the domain
gives them as ``JudgmentRules`` (built in judgments/create.py), and each is called only when
every earlier field was valid, as when the checks ran one after another. What can only be checked
once the whole body is valid (an existing judgment to reuse, a UBI events index) is the domain's.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Collection
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from marshmallow import ValidationError, pre_load

from workbench.schemas.body import BodyField, BodySchema, Text
from workbench.schemas.numbers import MAX_RESULT_WINDOW, bounded_int
from workbench.schemas.text import DESCRIPTION_LIMIT, NAME_LIMIT, text_error

LLM, UBI = "LLM_JUDGMENT", "UBI_JUDGMENT"
IMPORT, REFERENCE = "IMPORT_JUDGMENT", "REFERENCE_JUDGMENT"
TYPES = (LLM, UBI, IMPORT, REFERENCE)
MAX_EXISTING = 5
MAX_BUDGET_TOKENS = 10**12
MAX_BUDGET_COST = 1e12
DEFAULT_SIZE = 10
DEFAULT_TOKEN_LIMIT = 4000
DEFAULT_UBI_EVENTS_INDEX = "ubi_events"
QUERY_SET, SEARCH_CONFIGURATION = "QuerySet", "SearchConfiguration"
_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")


@dataclass(frozen=True)
class JudgmentRules:
    """What a judgment body's checks need from the layers above.

    ``entity(label, id)``: the stored query set (``QuerySet``) or search configuration
    (``SearchConfiguration``), or None. ``price_of(model)``: a model's prices, or None (a
    ``maxCost`` needs them). ``judge(name, options)``: the reference judge built (it raises
    the 400 of a judge it does not know or cannot build). ``missing_references(query_set)``:
    how many of a stored query set's queries have no reference answer.
    ``imported_ratings(raw)``: an ``IMPORT_JUDGMENT``'s ``judgmentRatings`` as stored
    (schemas/judgment_ratings.py checks them, with the domain's judgment size limits)."""

    entity: Callable[[str, str], dict[str, Any] | None]
    price_of: Callable[[str], object | None]
    template_error: Callable[[str | None], str | None]
    rating_type_error: Callable[[Any], str | None]
    default_template: str
    default_rating_type: str
    click_models: Collection[str]
    judge: Callable[[str, dict[str, Any]], Any]
    missing_references: Callable[[dict[str, Any]], int]
    imported_ratings: Callable[[Any], list[dict[str, Any]]]


class RulesBody(BodySchema):
    """A body checked with rules from the layers above; its fields (``BodyCheck``) see the whole
    body, the rules, the values loaded so far and whether an earlier field failed (then a check
    that asks a service is skipped: the earlier error is the answer)."""

    def __init__(self, rules: Any, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.rules = rules
        self.loaded: dict[str, Any] = {}
        self.failed = False

    @pre_load
    def _start(self, data: Any, **_: Any) -> Any:
        self.loaded, self.failed = {}, False
        return data


class BodyCheck(BodyField):
    """A field of a ``RulesBody``: ``check`` may read ``self.body``, ``self.rules`` and
    ``self.loaded``; its value is in ``loaded`` under its name once it passed."""

    body: dict[str, Any]

    @property
    def schema(self) -> RulesBody:
        assert isinstance(self.parent, RulesBody)
        return self.parent

    @property
    def rules(self) -> Any:
        return self.schema.rules

    @property
    def loaded(self) -> dict[str, Any]:
        return self.schema.loaded

    def deserialize(self, value: Any, attr: str | None = None,
                    data: Any = None, **kwargs: Any) -> Any:
        self.body = data if isinstance(data, dict) else {}
        try:
            result = super().deserialize(value, attr, data, **kwargs)
        except ValidationError:
            self.schema.failed = True
            raise
        self.loaded[str(self.name)] = result
        return result


class JudgmentBody(RulesBody):
    """A judgment create body, checked with ``JudgmentRules``."""

    def __init__(self, rules: JudgmentRules, **kwargs: Any) -> None:
        super().__init__(rules, **kwargs)


class _Field(BodyCheck):
    @property
    def rules(self) -> JudgmentRules:
        rules: JudgmentRules = self.schema.rules
        return rules


class _Name(BodyCheck, Text):
    """``name``: the text rules, stripped (schemas/body.py), its failure seen by later fields."""

    def __init__(self) -> None:
        super().__init__("name", NAME_LIMIT)


# -- the fields every type shares -----------------------------------------------------------------

class _Description(_Field):
    """Checked under the text rules when present (any type: a number is "Text must be a
    string"); a judgment does not store it."""

    def check(self, value: Any) -> Any:
        if value is not None:
            error = text_error(value, DESCRIPTION_LIMIT)
            if error:
                raise ValidationError(f"Invalid description: {error}")
        return value


class _Type(_Field):
    def check(self, value: Any) -> str:
        if value not in TYPES:
            raise ValidationError("Invalid or missing judgment type")
        assert isinstance(value, str)
        return value


class _EstimateType(_Field):
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


class _StringList(_Field):
    def check(self, value: Any) -> list[str]:
        if value is None:
            return []
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise ValidationError(f"{self.name} must be a list of strings")
        return list(value)


class _Flag(_Field):
    """A boolean; absent or null is false."""

    def check(self, value: Any) -> bool:
        if value is None:
            return False
        if not isinstance(value, bool):
            raise ValidationError(f"{self.name} must be true or false")
        return value


class _Rank(_Field):
    """``size`` (a search size, 10 when absent) and ``maxRank`` (required): 1 to the result
    window. An explicit null is "is required" for both."""

    def __init__(self, default: int | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.default = default

    def check(self, value: Any) -> int:
        if value is None and self.name not in self.body:
            value = self.default
        if value is None:
            raise ValidationError(f"{self.name} is required")
        return bounded_int(value, str(self.name), 1, MAX_RESULT_WINDOW)


def _entity(field: _Field, label: str, entity_id: Any) -> dict[str, Any] | None:
    """The stored entity ``entity_id`` refers to; a 400 naming the missing reference. None when
    an earlier field failed (its error is the answer; the cluster is not asked)."""
    if not isinstance(entity_id, str) or not entity_id.strip():
        raise ValidationError(f"{label} ID cannot be null or empty")
    if field.schema.failed:
        return None
    source = field.rules.entity(label, entity_id)
    if source is None:
        raise ValidationError(f"{label} [{entity_id}] does not exist")
    return source


class _QuerySetId(_Field):
    def check(self, value: Any) -> Any:
        _entity(self, QUERY_SET, value)
        return value


class _Configurations(_Field):
    """``searchConfigurationList``: a non-empty list of ids of stored configurations."""

    def __init__(self, judgment_type: str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.judgment_type = judgment_type

    def check(self, value: Any) -> list[Any]:
        if not isinstance(value, list) or not value:
            raise ValidationError(f"searchConfigurationList is required for {self.judgment_type}")
        for config_id in value:
            _entity(self, SEARCH_CONFIGURATION, config_id)
        return value


class _Head(JudgmentBody):
    name = _Name()
    description = _Description()
    type = _Type()


class JudgmentSchema(_Head):
    """A body whose ``type`` is not one of ``TYPES``: its name, description and type."""


# -- LLM_JUDGMENT ---------------------------------------------------------------------------------

class _ModelId(_Field):
    def check(self, value: Any) -> str:
        if not isinstance(value, str) or not value.strip():
            raise ValidationError("modelId is required for LLM_JUDGMENT")
        return value


class _TokenLimit(_Field):
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


class _Template(_Field):
    """A prompt template under the prompt rules; absent or blank is the default template."""

    def check(self, value: Any) -> str:
        if value is not None and not isinstance(value, str):
            raise ValidationError("Field 'promptTemplate' must be a string")
        error = self.rules.template_error(value)
        if error:
            raise ValidationError(error)
        return value if value and value.strip() else self.rules.default_template


class _RatingType(_Field):
    def check(self, value: Any) -> str:
        rating_type = value or self.rules.default_rating_type
        error = self.rules.rating_type_error(rating_type)
        if error:
            raise ValidationError(error)
        assert isinstance(rating_type, str)
        return rating_type


class _Existing(_StringList):
    def check(self, value: Any) -> list[str]:
        existing = super().check(value)
        if len(existing) > MAX_EXISTING:
            raise ValidationError(f"Too many existing judgments referenced: {len(existing)}. "
                                  f"Maximum allowed is {MAX_EXISTING}")
        return existing


class _MaxTokens(_Field):
    def check(self, value: Any) -> int | None:
        return None if value is None else bounded_int(value, "maxTokens", 1, MAX_BUDGET_TOKENS)


class _MaxCost(_Field):
    """A number greater than 0, for a model with prices."""

    def check(self, value: Any) -> float | None:
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, (int, float)) \
                or not math.isfinite(value) or not 0 < value <= MAX_BUDGET_COST:
            raise ValidationError(f"maxCost must be a number greater than 0, got: {value}")
        model_id = self.loaded.get("modelId")
        if not self.schema.failed and self.rules.price_of(str(model_id)) is None:
            raise ValidationError(f"maxCost needs a model with pricing; model [{model_id}] has "
                                  "none (register it with pricing, or use maxTokens)")
        return float(value)


class _LlmFields(JudgmentBody):
    modelId = _ModelId()
    tokenLimit = _TokenLimit()
    promptTemplate = _Template()
    llmJudgmentRatingType = _RatingType()
    existingJudgments = _Existing()
    size = _Rank(DEFAULT_SIZE)
    contextFields = _StringList()
    ignoreFailure = _Flag()
    overwriteCache = _Flag()
    includeRationale = _Flag()
    maxTokens = _MaxTokens()
    maxCost = _MaxCost()
    querySetId = _QuerySetId()
    searchConfigurationList = _Configurations(LLM)


class LlmJudgmentSchema(_LlmFields, _Head):
    """``PUT /judgments`` of an ``LLM_JUDGMENT`` (the head's fields come first)."""


class _EstimateHead(JudgmentBody):
    type = _EstimateType()
    name = _Name()
    description = _Description()


class LlmEstimateSchema(_LlmFields, _EstimateHead):
    """``POST /judgments/_estimate``: the body of an ``LLM_JUDGMENT`` create, its type first."""


# -- UBI_JUDGMENT ---------------------------------------------------------------------------------

class _ClickModel(_Field):
    def check(self, value: Any) -> str:
        if value is None:
            raise ValidationError("clickModel is required for UBI_JUDGMENT")
        if not isinstance(value, str) or value.lower() not in self.rules.click_models:
            raise ValidationError(f"Unsupported click model: {value}")
        return value


class _Date(_Field):
    """``yyyy-MM-dd``; absent, null or empty is no bound."""

    def __init__(self, label: str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.label = label

    def check(self, value: Any) -> str:
        value = value or ""
        if not isinstance(value, str):
            raise ValidationError(f"Field '{self.name}' must be a string")
        if value:
            valid = bool(_DATE.match(value))
            if valid:
                try:
                    datetime.strptime(value, "%Y-%m-%d")
                except ValueError:
                    valid = False
            if not valid:
                raise ValidationError(f"Invalid {self.label} date format: failed to parse date "
                                      f"field [{value}] with format [yyyy-MM-dd]")
        return value


class _EventsIndex(_Field):
    def check(self, value: Any) -> str:
        index = value or DEFAULT_UBI_EVENTS_INDEX
        if not isinstance(index, str):
            raise ValidationError("Field 'ubiEventsIndex' must be a string")
        return index


class UbiJudgmentSchema(_Head):
    """``PUT /judgments`` of a ``UBI_JUDGMENT``; whether the events index exists and holds UBI
    events is asked of the cluster afterwards."""

    clickModel = _ClickModel()
    maxRank = _Rank()
    startDate = _Date("start")
    endDate = _Date("end")
    ubiEventsIndex = _EventsIndex()


# -- REFERENCE_JUDGMENT ---------------------------------------------------------------------------

@dataclass(frozen=True)
class Judge:
    """The reference judge a body names, built with its options (``threshold`` included)."""

    name: str
    judge: Any
    options: dict[str, Any]


class _Judge(_Field):
    """``judge``, with ``judgeOptions`` (an object) and a top-level ``threshold`` (an option
    unless the options give one)."""

    def check(self, value: Any) -> Judge | None:
        if value is None:
            raise ValidationError("judge is required for REFERENCE_JUDGMENT")
        options = self.body.get("judgeOptions", {})
        if not isinstance(options, dict):
            raise ValidationError("judgeOptions must be an object")
        options = dict(options)
        if self.body.get("threshold") is not None:
            options.setdefault("threshold", self.body["threshold"])
        if self.schema.failed:
            return None
        return Judge(value, self.rules.judge(value, options), options)


class _ReferenceQuerySetId(_Field):
    """A stored query set; every query needs its reference answer when the judge compares with
    it."""

    def check(self, value: Any) -> Any:
        source = _entity(self, QUERY_SET, value)
        choice = self.loaded.get("judge")
        if source is not None and isinstance(choice, Judge):
            missing = self.rules.missing_references(source)
            if missing and choice.judge.needs_reference:
                raise ValidationError(
                    f"QuerySet [{value}] has {missing} queries without a referenceAnswer; the "
                    f"{choice.name} judge compares results with it")
        return value


class ReferenceJudgmentSchema(_Head):
    """``PUT /judgments`` of a ``REFERENCE_JUDGMENT``: a judge (not an LLM) over a query set's
    reference answers."""

    judge = _Judge()
    size = _Rank(DEFAULT_SIZE)
    contextFields = _StringList()
    querySetId = _ReferenceQuerySetId()
    searchConfigurationList = _Configurations(REFERENCE)


# -- IMPORT_JUDGMENT ------------------------------------------------------------------------------

class _ImportedRatings(_Field):
    def check(self, value: Any) -> list[dict[str, Any]]:
        return self.rules.imported_ratings(value)


class ImportJudgmentSchema(_Head):
    """``PUT /judgments`` of an ``IMPORT_JUDGMENT``: ratings made outside the workbench."""

    judgmentRatings = _ImportedRatings()


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
