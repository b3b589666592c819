"""Jobs that exist only for tests of the base task's delivery and failure policy.

They run in a real ``workbench worker`` started with ``python -m tests.support.job_tasks worker``.
"""

from __future__ import annotations

import sys
import time

import redis
from celery.exceptions import SoftTimeLimitExceeded

from workbench.errors import ClusterUnavailable
from workbench.jobs.base import JobFailed, WorkbenchTask, keep_metadata
from workbench.jobs.celery_app import celery_app, current_config, worker_client
from workbench.jobs.control import Cancelled

ENTITY_INDEX = "test-job-entities"


class EntityTask(WorkbenchTask):
    abstract = True
    status_index = ENTITY_INDEX
    outage_budget = 3.0  # transient faults are retried after 1 and 2 s, then fail


def _attempt(entity_id: str) -> int:
    """Count deliveries of a job across processes (in Redis)."""
    return int(redis.Redis.from_url(current_config().redis_url).incr(f"attempts:{entity_id}"))


def _complete(entity_id: str, attempts: int) -> None:
    worker_client().index(index=ENTITY_INDEX, id=entity_id, refresh=True,
                          body={"status": "COMPLETED", "attempts": attempts})


@celery_app.task(name="tests.always_fails", base=EntityTask)
def always_fails(entity_id: str) -> None:
    _attempt(entity_id)
    raise ValueError("the input is not valid")


@celery_app.task(name="tests.fails_as_documented", base=EntityTask)
def fails_as_documented(entity_id: str) -> None:
    """A failure the job names (as a judgment whose query set is gone does)."""
    _attempt(entity_id)
    raise JobFailed("QuerySet [gone] does not exist", {"lastFailureReason": "gone"})


@celery_app.task(name="tests.cancelled", base=EntityTask)
def cancelled(entity_id: str) -> None:
    """A job that finds it was cancelled."""
    _attempt(entity_id)
    raise Cancelled()


@celery_app.task(name="tests.stuck", base=EntityTask)
def stuck(entity_id: str) -> None:
    """A job that never looks at its control (one long call): Celery's soft time limit
    interrupts it, and what it spent is kept as ``runner.keeping_usage`` keeps it."""
    _attempt(entity_id)
    try:
        time.sleep(3600)
    except SoftTimeLimitExceeded as exc:
        keep_metadata(exc, usage={"llmCalls": 2})
        raise


@celery_app.task(name="tests.flaky", base=EntityTask)
def flaky(entity_id: str, failures: int) -> None:
    attempts = _attempt(entity_id)
    if attempts <= failures:
        raise ClusterUnavailable("OpenSearch cluster at http://127.0.0.1:1 is unreachable")
    _complete(entity_id, attempts)


@celery_app.task(name="tests.slow_once", base=EntityTask)
def slow_once(entity_id: str) -> None:
    attempts = _attempt(entity_id)
    if attempts == 1:
        time.sleep(60)  # the test kills the worker process here
    _complete(entity_id, attempts)


if __name__ == "__main__":
    from workbench.cli.main import main

    sys.exit(main())
