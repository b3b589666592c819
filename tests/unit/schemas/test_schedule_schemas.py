"""The request-body schema of a scheduled experiment (issue 21): the exact 400 reasons the
integration tests pin (test_schedules.py, test_bad_input.py), their order, and the minimum
interval asked only when the expression is read."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from workbench.errors import BadRequest
from workbench.experiments.scheduling import PARSE_ERROR as SCHEDULING_PARSE_ERROR
from workbench.schemas.body import load
from workbench.schemas.schedules import PARSE_ERROR, ScheduleSchema

HOUR_MS = 3_600_000
NOW = datetime(2025, 1, 1, 12, 0, tzinfo=UTC)


def schedule(body: dict[str, Any], minimum_ms: float = 0) -> dict[str, Any]:
    return load(ScheduleSchema(minimum_interval=lambda: minimum_ms, now=NOW), body)


def reason(body: dict[str, Any], minimum_ms: float = 0) -> str:
    with pytest.raises(BadRequest) as caught:
        schedule(body, minimum_ms)
    assert type(caught.value) is BadRequest
    assert (caught.value.status, caught.value.error_type) == (400, "illegal_argument_exception")
    return caught.value.reason


def test_a_valid_body_loads_the_expression_trimmed_and_the_id_as_given() -> None:
    assert schedule({"experimentId": " e ", "cronExpression": "  0 * * * * ", "x": 1}) == {
        "experimentId": " e ", "cronExpression": "0 * * * *"}


def test_the_parse_error_is_the_one_scheduling_names() -> None:
    assert SCHEDULING_PARSE_ERROR == PARSE_ERROR


@pytest.mark.parametrize(("body", "expected"), [
    # tests/integration/test_schedules.py::test_schedule_bad_input
    ({"cronExpression": "0 * * * *"}, "Invalid or missing experiment Id"),
    ({"experimentId": "", "cronExpression": "0 * * * *"}, "Invalid or missing experiment Id"),
    ({"experimentId": "X"}, "cron expression cannot be null or empty"),
    ({"experimentId": "X", "cronExpression": "  "}, "cron expression cannot be null or empty"),
    ({"experimentId": "X", "cronExpression": "every hour"}, PARSE_ERROR),
    ({"experimentId": "X", "cronExpression": "61 * * * *"}, PARSE_ERROR),
    ({"experimentId": "X", "cronExpression": "* * * * * *"}, PARSE_ERROR),
    # tests/integration/test_bad_input.py::test_a_cron_that_never_fires_is_a_400
    ({"experimentId": "X", "cronExpression": "0 0 30 2 *"},
     "cronExpression [0 0 30 2 *] never fires: no date matches it"),
    ({"experimentId": "X", "cronExpression": "0 0 31 4,6,9,11 *"},
     "cronExpression [0 0 31 4,6,9,11 *] never fires: no date matches it"),
    ({"experimentId": 5, "cronExpression": 5}, "Invalid or missing experiment Id"),
    ({"experimentId": "X", "cronExpression": 5}, "cron expression cannot be null or empty"),
])
def test_reasons(body: dict[str, Any], expected: str) -> None:
    assert reason(body) == expected


def test_a_long_expression_is_refused_before_it_is_parsed() -> None:
    cron = "0 " + "1," * 600 + "2 * * *"
    assert reason({"experimentId": "X", "cronExpression": cron}) == (
        f"cronExpression is too long: {len(cron)} characters, at most 1000 are allowed")


def test_the_minimum_interval() -> None:
    # tests/integration/test_schedules.py::test_minimum_interval_and_the_gate
    body = {"experimentId": "X", "cronExpression": "0 * * * *"}
    assert reason(body, minimum_ms=2 * HOUR_MS) == (
        "The interval between scheduled experiment runs is too short.")
    assert schedule(body, minimum_ms=HOUR_MS)["cronExpression"] == "0 * * * *"


def test_the_minimum_interval_is_asked_only_when_the_expression_is_read() -> None:
    asked: list[bool] = []

    def minimum() -> float:
        asked.append(True)
        return 0

    with pytest.raises(BadRequest):
        load(ScheduleSchema(minimum_interval=minimum), {"cronExpression": "0 * * * *"})
    assert asked == []
    load(ScheduleSchema(minimum_interval=minimum), {"experimentId": "e",
                                                    "cronExpression": "0 * * * *"})
    assert asked == [True]
