"""The parts of a stopping worker's hand-over that need no service (jobs/handover.py,
jobs/supervisor.py); the hand-over itself is tests/integration/test_job_handover.py."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest

from workbench.config import Config, ConfigError
from workbench.jobs import handover, supervisor


def test_the_stop_setting_takes_handover_or_finish_and_names_itself_otherwise() -> None:
    assert Config.from_env({}).worker_stop == "handover"
    assert Config.from_env({}).worker_stop_seconds == 20
    assert Config.from_env({"WORKBENCH_WORKER_STOP": " Finish "}).worker_stop == "finish"
    with pytest.raises(ConfigError) as caught:
        Config.from_env({"WORKBENCH_WORKER_STOP": "wait"})
    assert str(caught.value) == "WORKBENCH_WORKER_STOP: expected handover or finish, got 'wait'"
    with pytest.raises(ConfigError) as caught:
        Config.from_env({"WORKBENCH_WORKER_STOP_SECONDS": "0"})
    assert str(caught.value) == \
        "WORKBENCH_WORKER_STOP_SECONDS: expected a positive integer, got '0'"


def test_the_supervisor_bounds_a_stop_only_when_jobs_are_handed_over() -> None:
    assert supervisor.stop_bound(Config.from_env({})) == 25.0
    assert supervisor.stop_bound(Config.from_env({"WORKBENCH_WORKER_STOP_SECONDS": "3"})) == 8.0
    assert supervisor.stop_bound(Config.from_env({"WORKBENCH_WORKER_STOP": "finish"})) is None


def test_a_consumer_still_running_past_the_bound_is_killed() -> None:
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    stopped_at = [time.monotonic()]
    returncode = supervisor._wait(child, stopped_at, 1.0)
    took = time.monotonic() - stopped_at[0]
    assert returncode == -9
    assert 1.0 <= took < 2.0


def test_without_a_stop_signal_the_supervisor_just_waits() -> None:
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(1.5)"])
    assert supervisor._wait(child, [], 0.1) == 0


def test_the_pool_processes_are_this_processs_children() -> None:
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        assert child.pid in handover.pool_processes()
        assert handover.pool_processes(child.pid) == []
    finally:
        child.kill()
        child.wait()
