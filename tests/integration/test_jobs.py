"""The base job class's policy, on a real worker over the real broker."""

from __future__ import annotations

import signal
import time
import uuid
from collections.abc import Iterator
from typing import Any

import psutil
import pytest
import redis
from opensearchpy import OpenSearch

from tests.support.job_tasks import ENTITY_INDEX
from tests.support.processes import Worker
from tests.support.waiting import settled
from workbench.jobs.celery_app import celery_app


@pytest.fixture(scope="module")
def job_worker(env: dict[str, str], direct: OpenSearch, celery: object) -> Iterator[Worker]:
    direct.indices.create(index=ENTITY_INDEX, ignore=400)
    wrk = Worker(env, module="tests.support.job_tasks", queue=f"jobs-{uuid.uuid4().hex[:8]}")
    yield wrk
    wrk.stop()


def new_entity(direct: OpenSearch) -> str:
    entity_id = str(uuid.uuid4())
    direct.index(index=ENTITY_INDEX, id=entity_id, refresh=True,
                 body={"status": "PROCESSING", "metadata": {"param": 1}})
    return entity_id


def wait_status(direct: OpenSearch, entity_id: str, timeout: float = 60) -> dict[str, Any]:
    return settled(direct, ENTITY_INDEX, entity_id, timeout, running=("PROCESSING",))


def send(worker: Worker, name: str, *args: Any) -> None:
    celery_app.send_task(name, args=args, queue=worker.queue)


def wait_for_line(worker: Worker, text: str, before: int, timeout: float = 20) -> None:
    """Until ``text`` is in the worker's log after offset ``before``: a task's own lines come
    after its status write, and must not spill into the next test's window."""
    deadline = time.monotonic() + timeout
    while text not in worker.log()[before:] and time.monotonic() < deadline:
        time.sleep(0.1)


def test_a_job_that_fails_ends_error_with_its_reason(job_worker: Worker,
                                                     direct: OpenSearch) -> None:
    before = len(job_worker.log())
    entity_id = new_entity(direct)
    send(job_worker, "tests.always_fails", entity_id)
    assert wait_status(direct, entity_id) == {
        "status": "ERROR", "metadata": {"error": "the input is not valid"},
    }
    wait_for_line(job_worker, "raised unexpected", before)


@pytest.mark.parametrize("task, level, reason, extra", [
    ("tests.fails_as_documented", "WARNING", "QuerySet [gone] does not exist",
     {"lastFailureReason": "gone"}),
    ("tests.cancelled", "INFO", "cancelled by the user", {}),
])
def test_an_expected_ending_is_one_line_without_a_traceback(
        job_worker: Worker, direct: OpenSearch, task: str, level: str, reason: str,
        extra: dict[str, Any]) -> None:
    """A cancel or a failure the job names: ERROR written with its reason, and in the worker's
    log one line at INFO or WARNING with the entity id: no ERROR line, no traceback, no
    Celery "raised unexpected" (an operator alerting on ERROR is not paged for it)."""
    before = len(job_worker.log())
    entity_id = new_entity(direct)
    send(job_worker, task, entity_id)
    assert wait_status(direct, entity_id) == {"status": "ERROR",
                                              "metadata": {"error": reason, **extra}}
    # The task's own lines come after the status write: wait for its line (a loaded machine
    # may take more than a moment), then a moment more for any line that should not follow.
    wait_for_line(job_worker, f"job {task} for {entity_id} ended ERROR: {reason}", before)
    time.sleep(0.5)
    new = job_worker.log()[before:]
    lines = [line for line in new.splitlines() if entity_id in line]
    assert len(lines) == 1, lines
    assert f" {level} " in lines[0] and lines[0].endswith(
        f"job {task} for {entity_id} ended ERROR: {reason}"), lines
    assert " ERROR " not in new and "Traceback" not in new and "raised unexpected" not in new


def test_an_unexpected_failure_is_logged_error_with_its_traceback(
        job_worker: Worker, direct: OpenSearch) -> None:
    before = len(job_worker.log())
    entity_id = new_entity(direct)
    send(job_worker, "tests.always_fails", entity_id)
    wait_status(direct, entity_id)
    wait_for_line(job_worker, "raised unexpected", before)
    time.sleep(0.5)
    new = job_worker.log()[before:]
    assert "Task tests.always_fails[" in new and "raised unexpected: ValueError('the input is " \
        "not valid')" in new
    assert "Traceback (most recent call last)" in new
    assert "ERROR [" in new and f"job tests.always_fails for {entity_id} failed: the input is " \
        "not valid" in new


def test_transient_faults_are_retried_then_succeed(job_worker: Worker,
                                                   direct: OpenSearch) -> None:
    entity_id = new_entity(direct)
    send(job_worker, "tests.flaky", entity_id, 2)
    assert wait_status(direct, entity_id) == {"status": "COMPLETED", "attempts": 3}


def test_transient_faults_that_persist_end_error(job_worker: Worker, direct: OpenSearch) -> None:
    entity_id = new_entity(direct)
    send(job_worker, "tests.flaky", entity_id, 99)
    doc = wait_status(direct, entity_id)
    assert doc == {
        "status": "ERROR",
        "metadata": {"error": "OpenSearch cluster at http://127.0.0.1:1 is unreachable"},
    }


def test_a_job_whose_worker_process_dies_is_delivered_again(
    job_worker: Worker, direct: OpenSearch, redis_url: str
) -> None:
    entity_id = new_entity(direct)
    attempts_key = f"attempts:{entity_id}"
    r = redis.Redis.from_url(redis_url)
    send(job_worker, "tests.slow_once", entity_id)
    deadline = time.monotonic() + 30
    while r.get(attempts_key) is None and time.monotonic() < deadline:
        time.sleep(0.1)
    assert r.get(attempts_key) == b"1"
    # Kill the pool processes (one of them runs the job), as the OOM killer would.
    for pid in job_worker.pool_pids():
        psutil.Process(pid).send_signal(signal.SIGKILL)
    assert wait_status(direct, entity_id, timeout=90) == {"status": "COMPLETED", "attempts": 2}
