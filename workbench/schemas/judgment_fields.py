"""What every judgment create body shares: the types, the rules from the layers above, the head
(``name``, ``description``, ``type``) and the fields several types check alike.

The bodies are ``StepSchema``s (schemas/body.py): their fields are checked in the order the
workbench has always checked them, so the first error is the same, and a check that asks the
layers above (a stored query set or search configuration, a model's prices, the prompt rules,
the click models, the judges) runs only when every earlier field was valid. The per-type schemas
are schemas/judgments.py (LLM, the estimate) and schemas/judgment_sources.py (UBI, reference,
import).
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from dataclasses import dataclass
from typing import Any

from marshmallow import ValidationError

from workbench.schemas.body import Step, StepSchema, Text
from workbench.schemas.configuration_list import REMOTE_LABEL, ConfigurationIds, resolve
from workbench.schemas.numbers import MAX_RESULT_WINDOW, bounded_int
from workbench.schemas.text import DESCRIPTION_LIMIT, NAME_LIMIT, text_error

LLM, UBI = "LLM_JUDGMENT", "UBI_JUDGMENT"
IMPORT, REFERENCE = "IMPORT_JUDGMENT", "REFERENCE_JUDGMENT"
TYPES = (LLM, UBI, IMPORT, REFERENCE)
DEFAULT_SIZE = 10
QUERY_SET, SEARCH_CONFIGURATION = "QuerySet", "SearchConfiguration"
REMOTE_SEARCH_CONFIGURATION = REMOTE_LABEL


@dataclass(frozen=True)
class JudgmentRules:
    """What a judgment body's checks need from the layers above.

    ``entity(label, id)``: the stored query set (``QuerySet``), search configuration
    (``SearchConfiguration``) or remote search configuration (``RemoteSearchConfiguration``),
    or None. ``price_of(model)``: a model's prices, or None (a
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


class JudgmentBody(StepSchema):
    """A judgment create body, checked with ``JudgmentRules``."""

    def __init__(self, rules: JudgmentRules, **kwargs: Any) -> None:
        super().__init__(rules, **kwargs)


class JudgmentField(Step):
    """A field of a ``JudgmentBody``: its ``rules`` are ``JudgmentRules``."""

    @property
    def rules(self) -> JudgmentRules:
        rules: JudgmentRules = self.schema.rules
        return rules


class Name(Step, Text):
    """``name``: the text rules, stripped (schemas/body.py), its failure seen by later fields."""

    def __init__(self) -> None:
        super().__init__("name", NAME_LIMIT)


class Description(JudgmentField):
    """Checked under the text rules when present (any type: a number is "Text must be a
    string"); a judgment does not store it."""

    def check(self, value: Any) -> Any:
        if value is not None:
            error = text_error(value, DESCRIPTION_LIMIT)
            if error:
                raise ValidationError(f"Invalid description: {error}")
        return value


class _Type(JudgmentField):
    def check(self, value: Any) -> str:
        if value not in TYPES:
            raise ValidationError("Invalid or missing judgment type")
        assert isinstance(value, str)
        return value


class StringList(JudgmentField):
    def check(self, value: Any) -> list[str]:
        if value is None:
            return []
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise ValidationError(f"{self.name} must be a list of strings")
        return list(value)


class Rank(JudgmentField):
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


def entity(field: JudgmentField, label: str, entity_id: Any) -> dict[str, Any]:
    """The stored entity ``entity_id`` refers to; a 400 naming the missing reference."""
    if not isinstance(entity_id, str) or not entity_id.strip():
        raise ValidationError(f"{label} ID cannot be null or empty")
    source = field.rules.entity(label, entity_id)
    if source is None:
        raise ValidationError(f"{label} [{entity_id}] does not exist")
    return source


class QuerySetId(JudgmentField):
    def check(self, value: Any) -> Any:
        entity(self, QUERY_SET, value)
        return value


class Configurations(JudgmentField):
    """``searchConfigurationList``: a non-empty list naming stored configurations, local or
    remote (schemas/configuration_list.py)."""

    def __init__(self, judgment_type: str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.judgment_type = judgment_type

    def check(self, value: Any) -> ConfigurationIds:
        if not isinstance(value, list) or not value:
            raise ValidationError(f"searchConfigurationList is required for {self.judgment_type}")
        rules = self.rules
        return resolve(value, lambda c: rules.entity(SEARCH_CONFIGURATION, c) is not None,
                       lambda c: rules.entity(REMOTE_SEARCH_CONFIGURATION, c) is not None)


class Head(JudgmentBody):
    """The fields every ``PUT /judgments`` body opens with."""

    name = Name()
    description = Description()
    type = _Type()


class JudgmentSchema(Head):
    """A body whose ``type`` is not one of ``TYPES``: its name, description and type."""
