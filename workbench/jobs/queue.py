"""Sending jobs from the API: by name and entity id only, after the entity is written."""

from __future__ import annotations

import contextlib
import logging
from functools import lru_cache

import redis
from kombu.exceptions import OperationalError
from redis.exceptions import RedisError

from workbench import redis_client
from workbench.config import Config
from workbench.errors import WorkbenchError
from workbench.jobs import leases
from workbench.jobs.celery_app import celery_app, current_config
from workbench.telemetry import instruments

log = logging.getLogger(__name__)


class QueueUnavailable(WorkbenchError):
    status = 503
    error_type = "queue_unavailable_exception"


# One quick retry: the API must answer (503) within a few seconds when the broker is down.
RETRY_POLICY = {"max_retries": 1, "interval_start": 0.2, "interval_step": 0.5,
                "interval_max": 1.0}


@lru_cache(maxsize=4)
def _redis(config: Config) -> redis.Redis:
    return redis_client.connect(config, socket_timeout=5, socket_connect_timeout=2)


def enqueue(task_name: str, entity_id: str, entity_type: str = "") -> None:
    """Queue ``task_name(entity_id)``; a broker that cannot be reached is a 503. Callers undo
    what they wrote for the job, so nothing is left waiting for a job that was never queued.

    The queued marker (``jobs.leases``) is written first: the sweeper re-queues an entity whose
    marker and lease are both missing. ``entity_type`` labels the metrics."""
    marker = leases.queued_key(task_name, entity_id)
    r = _redis(current_config())
    try:
        leases.mark_queued(r, task_name, entity_id, "queued")
        celery_app.send_task(task_name, args=[entity_id], task_id=f"{task_name}:{entity_id}",
                             retry=True, retry_policy=RETRY_POLICY)
    except (OperationalError, OSError, RedisError) as exc:
        log.error("could not queue %s for %s: %s", task_name, entity_id, type(exc).__name__)
        with contextlib.suppress(RedisError):
            r.delete(marker)
        raise QueueUnavailable(
            "The job queue (Redis) cannot be reached; the job was not started") from exc
    instruments.JOBS_CREATED.labels(instruments.job_kind(task_name), entity_type).inc()
