"""The ``PUT /judgments`` bodies of judgments not made by an LLM: from clicks (``UBI_JUDGMENT``),
by a reference judge (``REFERENCE_JUDGMENT``) and made outside the workbench
(``IMPORT_JUDGMENT``). Their head and shared fields are schemas/judgment_fields.py.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from marshmallow import ValidationError

from workbench.schemas.judgment_fields import (
    DEFAULT_SIZE,
    QUERY_SET,
    REFERENCE,
    Configurations,
    Head,
    JudgmentField,
    Rank,
    StringList,
    entity,
)

DEFAULT_UBI_EVENTS_INDEX = "ubi_events"
_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")


# -- UBI_JUDGMENT ---------------------------------------------------------------------------------

class _ClickModel(JudgmentField):
    def check(self, value: Any) -> str:
        if value is None:
            raise ValidationError("clickModel is required for UBI_JUDGMENT")
        if not isinstance(value, str) or value.lower() not in self.rules.click_models:
            raise ValidationError(f"Unsupported click model: {value}")
        return value


class _Date(JudgmentField):
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


class _EventsIndex(JudgmentField):
    """The index the body names, or None when it names none (absent, null or blank: the plugin
    then reads ``DEFAULT_UBI_EVENTS_INDEX`` and words its refusal differently)."""

    def check(self, value: Any) -> str | None:
        if value is None or value == "":
            return None
        if not isinstance(value, str):
            raise ValidationError("Field 'ubiEventsIndex' must be a string")
        return value if value.strip() else None


class UbiJudgmentSchema(Head):
    """``PUT /judgments`` of a ``UBI_JUDGMENT``; whether the events index exists and holds UBI
    events is asked of the cluster afterwards."""

    clickModel = _ClickModel()
    maxRank = Rank()
    startDate = _Date("start")
    endDate = _Date("end")
    ubiEventsIndex = _EventsIndex()


# -- REFERENCE_JUDGMENT ---------------------------------------------------------------------------

@dataclass(frozen=True)
class ChosenJudge:
    """The reference judge a body names, built with its options (``threshold`` included)."""

    name: str
    judge: Any
    options: dict[str, Any]


class _Judge(JudgmentField):
    """``judge``, with ``judgeOptions`` (an object) and a top-level ``threshold`` (an option
    unless the options give one)."""

    def check(self, value: Any) -> ChosenJudge:
        if value is None:
            raise ValidationError("judge is required for REFERENCE_JUDGMENT")
        options = self.body.get("judgeOptions", {})
        if not isinstance(options, dict):
            raise ValidationError("judgeOptions must be an object")
        options = dict(options)
        if self.body.get("threshold") is not None:
            options.setdefault("threshold", self.body["threshold"])
        return ChosenJudge(value, self.rules.judge(value, options), options)


class _ReferenceQuerySetId(JudgmentField):
    """A stored query set; every query needs its reference answer when the judge compares with
    it."""

    def check(self, value: Any) -> Any:
        source = entity(self, QUERY_SET, value)
        choice = self.loaded.get("judge")
        if isinstance(choice, ChosenJudge):
            missing = self.rules.missing_references(source)
            if missing and choice.judge.needs_reference:
                raise ValidationError(
                    f"QuerySet [{value}] has {missing} queries without a referenceAnswer; the "
                    f"{choice.name} judge compares results with it")
        return value


class ReferenceJudgmentSchema(Head):
    """``PUT /judgments`` of a ``REFERENCE_JUDGMENT``: a judge (not an LLM) over a query set's
    reference answers."""

    judge = _Judge()
    size = Rank(DEFAULT_SIZE)
    contextFields = StringList()
    querySetId = _ReferenceQuerySetId()
    searchConfigurationList = Configurations(REFERENCE)


# -- IMPORT_JUDGMENT ------------------------------------------------------------------------------

class _ImportedRatings(JudgmentField):
    def check(self, value: Any) -> list[dict[str, Any]]:
        return self.rules.imported_ratings(value)


class ImportJudgmentSchema(Head):
    """``PUT /judgments`` of an ``IMPORT_JUDGMENT``: ratings made outside the workbench."""

    judgmentRatings = _ImportedRatings()
