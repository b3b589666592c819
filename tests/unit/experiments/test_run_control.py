"""An experiment's progress writes held back at its start (``runner.RunControl``): a run that
ends within the quiet time writes no progress, a longer one writes it as before."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from workbench.experiments import runner


class FakeClient:
    def __init__(self) -> None:
        self.updates: list[dict[str, Any]] = []

    def update(self, **kwargs: Any) -> dict[str, Any]:
        self.updates.append(kwargs)
        return {"_seq_no": 2, "_primary_term": 1}


def control() -> tuple[runner.RunControl, FakeClient]:
    client = FakeClient()
    svc: Any = SimpleNamespace(client=client)
    hit = {"_id": "e1", "_seq_no": 1, "_primary_term": 1, "_source": {}}
    return runner.RunControl(svc, "experiments", hit, "pairs", in_metadata=False), client


def test_no_progress_is_written_while_quiet() -> None:
    ctl, client = control()
    ctl.quiet_for(60)
    ctl.start(300, "searching")
    ctl.advance(200)
    assert client.updates == []
    assert ctl.snapshot()["done"] == 200  # counted, for a cancel's report


def test_progress_is_written_once_the_quiet_time_is_over(
        monkeypatch: pytest.MonkeyPatch) -> None:
    ctl, client = control()
    ctl.quiet_for(2)
    ctl.start(300, "searching")
    now = runner.time.monotonic()
    monkeypatch.setattr(runner.time, "monotonic", lambda: now + 3)
    ctl.advance(100)
    assert [u["body"]["doc"]["progress"]["done"] for u in client.updates] == [100]
    assert ctl.hit["_seq_no"] == 2  # the final conditional write follows it


def test_without_quiet_the_start_is_written_at_once() -> None:
    ctl, client = control()
    ctl.start(0, "waiting for judgments")
    assert len(client.updates) == 1
