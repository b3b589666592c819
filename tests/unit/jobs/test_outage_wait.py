"""wait_out: transient faults are retried with capped backoff until the outage budget is spent."""

from __future__ import annotations

from typing import Any

import pytest
from opensearchpy.exceptions import ConnectionError as OpenSearchConnectionError
from opensearchpy.exceptions import TransportError

from workbench.jobs import base


class Clock:
    def __init__(self) -> None:
        self.now = 0.0
        self.pauses: list[float] = []

    def monotonic(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.pauses.append(seconds)
        self.now += seconds


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    fake = Clock()
    monkeypatch.setattr(base.time, "monotonic", fake.monotonic)
    monkeypatch.setattr(base.time, "sleep", fake.sleep)
    return fake


def failing(times: int, exc: Exception) -> Any:
    calls = {"n": 0}

    def action() -> str:
        calls["n"] += 1
        if calls["n"] <= times:
            raise exc
        return "done"

    return action


def test_an_outage_shorter_than_the_budget_is_waited_out(clock: Clock) -> None:
    down = OpenSearchConnectionError("N/A", "refused", Exception("refused"))
    assert base.wait_out(failing(8, down), 600, "job") == "done"
    assert clock.pauses == [1, 2, 4, 8, 16, 30, 30, 30]


def test_the_budget_bounds_the_wait(clock: Clock) -> None:
    down = OpenSearchConnectionError("N/A", "refused", Exception("refused"))
    with pytest.raises(OpenSearchConnectionError):
        base.wait_out(failing(10**6, down), 600, "job")
    assert sum(clock.pauses) == 600


def test_a_starting_node_answering_503_is_waited_for(clock: Clock) -> None:
    assert base.wait_out(failing(2, TransportError(503, "cluster_block_exception")), 60,
                         "job") == "done"


def test_other_faults_are_not_retried(clock: Clock) -> None:
    with pytest.raises(TransportError):
        base.wait_out(failing(1, TransportError(400, "bad")), 600, "job")
    with pytest.raises(ValueError):
        base.wait_out(failing(1, ValueError("no")), 600, "job")
    assert clock.pauses == []
