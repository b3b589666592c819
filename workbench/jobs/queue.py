"""Sending jobs from the API: by name and entity id only, after the entity is written."""

from __future__ import annotations

import logging

from kombu.exceptions import OperationalError

from workbench.errors import WorkbenchError
from workbench.jobs.celery_app import celery_app

log = logging.getLogger(__name__)


class QueueUnavailable(WorkbenchError):
    status = 503
    error_type = "queue_unavailable_exception"


def enqueue(task_name: str, entity_id: str) -> None:
    """Queue ``task_name(entity_id)``; a broker that cannot be reached is a 503."""
    try:
        celery_app.send_task(task_name, args=[entity_id], task_id=f"{task_name}:{entity_id}",
                             retry=True, retry_policy={"max_retries": 2, "interval_start": 0.2,
                                                       "interval_step": 0.5})
    except (OperationalError, OSError) as exc:
        log.error("could not queue %s for %s: %s", task_name, entity_id, type(exc).__name__)
        raise QueueUnavailable(
            "The job queue (Redis) cannot be reached; the job was not started") from exc
