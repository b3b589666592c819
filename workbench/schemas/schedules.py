"""The request body of a scheduled experiment: ``POST /experiments/schedule``.

``cronExpression`` is UNIX cron (five fields, UTC). Its runs must be at least
``scheduled_experiments_minimum_interval`` apart, a plugin setting the route reads: the schema is
given it as ``minimum_interval`` (milliseconds), asked only when the expression is read. Whether
the experiment exists is asked of the cluster by the route, after the body is valid.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

from croniter import CroniterBadDateError, croniter
from marshmallow import ValidationError

from workbench.schemas.body import Step, StepSchema

# Every value of all five fields listed one by one is about 400 characters.
MAX_CRON_CHARS = 1_000
PARSE_ERROR = ('failed to parse cron expression. For more information check out '
               'https://en.wikipedia.org/wiki/Cron. For example, "12 * * * *"')


def cron_error(expression: str, minimum_interval_ms: float, now: datetime) -> str | None:
    """The first rule a trimmed, non-empty expression breaks, or None."""
    if len(expression) > MAX_CRON_CHARS:  # croniter's cost grows with it (1.5 s at 200 KB)
        return (f"cronExpression is too long: {len(expression)} characters, at most "
                f"{MAX_CRON_CHARS} are allowed")
    if len(expression.split()) != 5 or not croniter.is_valid(expression):
        return PARSE_ERROR
    it = croniter(expression, now)
    try:
        first, second = it.get_next(datetime), it.get_next(datetime)
    except CroniterBadDateError:
        return f"cronExpression [{expression}] never fires: no date matches it"
    if (second - first).total_seconds() * 1000 < minimum_interval_ms:
        return "The interval between scheduled experiment runs is too short."
    return None


class _ExperimentId(Step):
    def check(self, value: Any) -> str:
        if not isinstance(value, str) or not value.strip():
            raise ValidationError("Invalid or missing experiment Id")
        return value  # as given: it is the experiment's id and the job's


class _Cron(Step):
    def check(self, value: Any) -> str:
        schema: ScheduleSchema = self.parent  # type: ignore[assignment]
        minimum_interval_ms = schema.minimum_interval()
        if not isinstance(value, str) or not value.strip():
            raise ValidationError("cron expression cannot be null or empty")
        expression = value.strip()
        error = cron_error(expression, minimum_interval_ms, schema.now or datetime.now(UTC))
        if error:
            raise ValidationError(error)
        return expression


class ScheduleSchema(StepSchema):
    """``POST /experiments/schedule``: experimentId, cronExpression (loaded trimmed)."""

    experimentId = _ExperimentId(data_key="experimentId")
    cronExpression = _Cron(data_key="cronExpression")

    def __init__(self, minimum_interval: Callable[[], float], now: datetime | None = None,
                 **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.minimum_interval = minimum_interval
        self.now = now


def latest_fire(expression: str, after_ms: int, now: datetime) -> datetime | None:
    """The most recent fire time in (after, now], or None when nothing is due (the scheduled
    experiments' and the monitors' loops both ask it)."""
    start = datetime.fromtimestamp(after_ms / 1000, UTC)
    upcoming = croniter(expression, start).get_next(datetime)
    if upcoming > now:
        return None
    fired: datetime = croniter(expression, now + timedelta(seconds=1)).get_prev(datetime)
    return fired
