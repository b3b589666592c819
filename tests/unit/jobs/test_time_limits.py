"""Time limits are endings: WORKBENCH_JOB_TIMEOUT's minimum, the job's own stop before it, the
ending it raises, and a split job's helper interrupted by Celery's soft limit."""

from __future__ import annotations

import logging
import time
from types import SimpleNamespace
from typing import Any

import pytest
from celery.exceptions import SoftTimeLimitExceeded

from workbench.config import Config, ConfigError
from workbench.jobs import base, fanout
from workbench.jobs.control import Cancelled, JobControl, TimedOut

REFUSED = ("WORKBENCH_JOB_TIMEOUT: 25 s is below the minimum of 60 s (a job is stopped 30 s "
           "before its timeout to end cleanly, which leaves it 30 s of work at the minimum)")
REASON = ("the job ran past its time limit: stopped after 30 s of work "
          "(WORKBENCH_JOB_TIMEOUT=60 s, less 30 s to end it)")


def test_a_timeout_below_the_minimum_is_refused_naming_the_setting() -> None:
    with pytest.raises(ConfigError) as refused:
        Config.from_env({"WORKBENCH_JOB_TIMEOUT": "25"})
    assert str(refused.value) == REFUSED
    with pytest.raises(ConfigError, match="below the minimum of 60 s"):
        Config.from_env({"WORKBENCH_JOB_TIMEOUT": "59"})


def test_the_minimum_is_accepted_and_its_limits_are_what_the_docs_say() -> None:
    config = Config.from_env({"WORKBENCH_JOB_TIMEOUT": "60"})
    assert config.job_timeout == 60
    assert config.job_interrupt_after == 45  # Celery's soft limit; the job stops itself at 30
    assert Config.from_env({}).job_interrupt_after == 3600 - 15


@pytest.fixture
def sixty(monkeypatch: pytest.MonkeyPatch) -> Config:
    config = Config.from_env({"WORKBENCH_JOB_TIMEOUT": "60"})
    monkeypatch.setattr(base, "current_config", lambda: config)
    return config


def test_the_ending_names_the_setting_and_the_limit(sixty: Config) -> None:
    ended = TimedOut({"progress": {"done": 3}})
    assert str(ended) == REASON
    assert isinstance(ended, Cancelled)  # it ends as a cancel does (experiments discard so)
    assert ended.log_level == logging.WARNING and ended.ending == "timeout"
    assert ended.metadata == {"progress": {"done": 3}}
    interrupted = TimedOut({}, interrupted=True)  # by Celery's soft limit
    assert str(interrupted) == ("the job ran past its time limit: interrupted after 45 s of "
                                "work (WORKBENCH_JOB_TIMEOUT=60 s, less 15 s)")


def control(started: float | None) -> JobControl:
    token = base._job_started.set(started)
    try:
        return JobControl(None, "index", {"_id": "e1"}, "queries",  # type: ignore[arg-type]
                          in_metadata=True)
    finally:
        base._job_started.reset(token)


def test_a_job_past_its_stop_is_stopped_as_a_cancel_is_with_its_own_ending(sixty: Config) -> None:
    job = control(time.monotonic() - 31)  # started 31 s ago: past 60 - 30
    assert job.stop_at is not None
    assert job.cancelled()
    ended = job.error()
    assert isinstance(ended, TimedOut) and str(ended) == REASON
    assert ended.metadata["progress"]["unit"] == "queries"
    with pytest.raises(TimedOut):
        job.check()


def test_outside_a_job_there_is_no_time_limit() -> None:
    assert control(None).stop_at is None


class _Units:
    threads = 1

    def __init__(self) -> None:
        self.closed = False

    def unit(self, payload: Any) -> Any:
        return payload

    def close(self) -> None:
        self.closed = True


class _Redis:
    """What ``help_run`` asks Redis before it works: a run with a unit left."""

    def get(self, key: str) -> bytes:
        return b"{}"

    def exists(self, key: str) -> int:
        return 0

    def llen(self, key: str) -> int:
        return 1

    def register_script(self, script: str) -> Any:
        return lambda **_: None


def test_a_helper_interrupted_by_its_soft_limit_logs_one_warning_without_a_traceback(
        monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    units = _Units()
    monkeypatch.setitem(fanout.KINDS, "test_kind", lambda svc, entity, head: units)

    def interrupted(self: fanout.Crew, on_first: Any = None) -> None:
        raise SoftTimeLimitExceeded()

    monkeypatch.setattr(fanout.Crew, "work", interrupted)
    svc = SimpleNamespace(redis=_Redis(), config=Config.from_env({"WORKBENCH_JOB_TIMEOUT": "60"}))
    with caplog.at_level(logging.INFO, logger="workbench.jobs.fanout"):
        assert fanout.help_run(svc, "test_kind", "e1", "run1") == 0  # type: ignore[arg-type]
    assert units.closed
    assert [(r.levelname, r.getMessage(), r.exc_info) for r in caplog.records] == [
        ("WARNING", "test_kind e1: this helper ran past its time limit "
                    "(WORKBENCH_JOB_TIMEOUT=60 s, interrupted after 45 s) and takes no more "
                    "units", None)]
