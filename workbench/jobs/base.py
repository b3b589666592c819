"""The base class of every job: it owns delivery and failure policy, tasks own only their work.

* Acknowledged late and rejected when the worker process dies, so a job interrupted by a crash
  is delivered again (jobs are idempotent: they take an entity id and overwrite its result).
* Transient faults (cluster or broker unreachable) are retried with exponential backoff.
* A job that fails for good writes ``status: ERROR`` and its reason into the entity document.
* A running job holds a lease in Redis (``jobs.leases``), renewed while it works; a message
  that arrives while another live worker holds the lease (a late redelivery) does nothing.
"""

from __future__ import annotations

import logging
from typing import Any

import redis
from celery import Task
from celery.exceptions import Retry
from opensearchpy.exceptions import ConnectionError as OpenSearchConnectionError
from opensearchpy.exceptions import ConnectionTimeout

from workbench.errors import ClusterUnavailable
from workbench.jobs import leases
from workbench.jobs.celery_app import worker_client, worker_services
from workbench.store.identity import Identity, acting_as, service_identity

log = logging.getLogger(__name__)

TRANSIENT = (OpenSearchConnectionError, ConnectionTimeout, ClusterUnavailable)


class JobFailed(Exception):
    """A job that ends ERROR by its own rules (not a crash); ``metadata`` adds fields such as
    ``lastFailureReason`` next to the error."""

    def __init__(self, reason: str, metadata: dict[str, Any] | None = None) -> None:
        super().__init__(reason)
        self.metadata = metadata or {}


def extra_metadata(exc: BaseException) -> dict[str, Any]:
    return exc.metadata if isinstance(exc, JobFailed) else {}


def failure_reason(exc: BaseException) -> str:
    """A one-line reason for ``metadata.error``: the message, or the exception type."""
    text = str(exc).strip() or type(exc).__name__
    return text.splitlines()[0][:2000]


class WorkbenchTask(Task):
    """Subclasses set ``status_index`` and may override ``error_fields``."""

    abstract = True
    acks_late = True
    reject_on_worker_lost = True
    autoretry_for = TRANSIENT
    max_retries = 4
    retry_backoff = 2
    retry_backoff_max = 60
    retry_jitter = True

    #: index holding the entity whose id is the job's first argument
    status_index: str | None = None

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """Run the job under its lease, as the identity it was created for (``store.identity``).
        Another worker's live lease means the job is running there: this delivery does nothing
        (its message is acknowledged)."""
        entity_id = args[0] if args else kwargs.get("entity_id")
        lease = None
        if self.status_index and entity_id and self.request.id is not None:
            svc = worker_services()
            lease = leases.Lease(svc.redis, self.name, str(entity_id), svc.config.lease_seconds)
            try:
                if not lease.acquire(wait=min(5.0, svc.config.lease_seconds)):
                    return None
            except redis.exceptions.RedisError as exc:
                log.warning("%s for %s runs without a lease (Redis: %s)", self.name, entity_id,
                            type(exc).__name__)
                lease = None
        requeued = False
        try:
            with acting_as(self.job_identity(args, kwargs)):
                return super().__call__(*args, **kwargs)
        except Retry:
            requeued = True
            raise
        finally:
            if lease is not None:
                lease.release(requeued)

    def job_identity(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Identity:
        """The service identity; with ``WORKBENCH_JOB_IMPERSONATION``, impersonating the user
        recorded as ``createdBy`` on the job's entity (checked at creation with the user's own
        credentials)."""
        svc = worker_services()
        service = service_identity(svc.config)
        entity_id = args[0] if args else kwargs.get("entity_id")
        if not svc.config.job_impersonation or not self.status_index or not entity_id:
            return service
        with acting_as(service):
            found = svc.client.get(index=self.status_index, id=str(entity_id),
                                   params={"_source_includes": "createdBy"}, ignore=[404])
        user = (found.get("_source") or {}).get("createdBy") if found.get("found") else None
        return Identity(service.authorization, impersonate=user) if user else service

    def error_fields(self, reason: str, exc: BaseException) -> dict[str, Any]:
        """The top-level fields written when the job fails for good."""
        return {"status": "ERROR", "metadata": {"error": reason, **extra_metadata(exc)}}

    def on_failure(
        self, exc: BaseException, task_id: str, args: tuple[Any, ...], kwargs: dict[str, Any],
        einfo: Any,
    ) -> None:
        entity_id = args[0] if args else kwargs.get("entity_id")
        reason = failure_reason(exc)
        log.error("job %s for %s failed: %s", self.name, entity_id, reason)
        if self.status_index and entity_id:
            self.mark_failed(str(entity_id), self.error_fields(reason, exc))

    def mark_failed(self, entity_id: str, fields: dict[str, Any]) -> None:
        """Write ERROR and the reason; never raises (the job is already lost)."""
        try:
            # Top-level keys are replaced whole (``metadata`` becomes just the error), as the
            # contract's ERROR documents have it; a partial ``doc`` update would merge them.
            worker_client().update(
                index=self.status_index,
                id=entity_id,
                body={
                    "script": {
                        "source": "ctx._source.putAll(params.fields)",
                        "params": {"fields": fields},
                    }
                },
                refresh=True,
                retry_on_conflict=3,
            )
        except Exception:
            log.exception("could not record the failure of %s", entity_id)
