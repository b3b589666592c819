"""The base class of every job: it owns delivery and failure policy, tasks own only their work.

* Acknowledged late and rejected when the worker process dies, so a job interrupted by a crash
  is delivered again (jobs are idempotent: they take an entity id and overwrite its result).
* Outages are waited out: a job that loses the cluster or Redis (a transient fault) is run again
  in the same process, with capped exponential backoff, until ``WORKBENCH_OUTAGE_BUDGET``
  seconds have passed since its first failure (``wait_out``, a tenacity ``Retrying``); its lease
  heartbeat keeps running meanwhile, and its message stays unacknowledged (``acks_late``). Jobs
  are idempotent, so running one again from the start is safe.
* A job that fails for good writes ``status: ERROR`` and its reason into the entity document.
  If even that write cannot reach the cluster (waited for up to ``FAILURE_WRITE_WAIT``), the
  entity stays ``PROCESSING``/``RETRYING`` with neither a queued marker nor a lease (the lease
  was released when the job ended, or lapses with its worker): the lease sweeper
  (``jobs.sweeper``) of any worker queues it again once the cluster answers, so the job runs
  again rather than being silently lost (bounded by ``WORKBENCH_JOB_MAX_ATTEMPTS``).
* A running job holds a lease in Redis (``jobs.leases``), renewed while it works; a message
  that arrives while another live worker holds the lease (a late redelivery) does nothing.
* Time limits are endings, not crashes: a job is asked to stop ``JOB_STOP_MARGIN`` seconds
  before ``WORKBENCH_JOB_TIMEOUT`` (its ``JobControl`` reports it stopped, as for a cancel:
  calls in flight finish and are counted), and ends ``ERROR`` with ``TimedOut``'s reason and
  what it spent. Code that does not look (a long cluster call) is interrupted by Celery's soft
  time limit ``JOB_INTERRUPT_MARGIN`` seconds before the timeout; its ``SoftTimeLimitExceeded``
  ends the job the same way. At the timeout itself Celery kills the process.
* A worker asked to stop hands its jobs over (``jobs.handover``): the job stops at its next
  checkpoint with ``HandedOver`` and is queued again at once for another worker, without ERROR.
"""

from __future__ import annotations

import contextlib
import contextvars
import logging
import time
from collections.abc import Callable
from typing import Any

import redis
from celery import Task
from celery.exceptions import Retry, SoftTimeLimitExceeded
from opensearchpy.exceptions import ConnectionError as OpenSearchConnectionError
from opensearchpy.exceptions import ConnectionTimeout, NotFoundError, TransportError
from tenacity import RetryCallState, Retrying, retry_if_exception, wait_exponential

from workbench.config import JOB_INTERRUPT_MARGIN, JOB_STOP_MARGIN
from workbench.errors import ClusterUnavailable
from workbench.jobs import handover, leases
from workbench.jobs.celery_app import current_config, worker_client, worker_services
from workbench.store.identity import Identity, acting_as, service_identity
from workbench.store.repository import Repository
from workbench.telemetry import instruments

log = logging.getLogger(__name__)

TRANSIENT = (OpenSearchConnectionError, ConnectionTimeout, ClusterUnavailable,
             redis.exceptions.ConnectionError, redis.exceptions.TimeoutError)

#: longest pause between two attempts while an outage is waited out
OUTAGE_BACKOFF_MAX = 30.0
#: how long writing ERROR waits for an unreachable cluster before it leaves the job to the sweeper
FAILURE_WRITE_WAIT = 30.0


#: when the job running in this context started (``time.monotonic``), set by ``WorkbenchTask``
_job_started: contextvars.ContextVar[float | None] = contextvars.ContextVar(
    "workbench_job_started", default=None)


#: what the job running in this context keeps across its attempts (``job_state``)
_job_state: contextvars.ContextVar[dict[str, Any] | None] = contextvars.ContextVar(
    "workbench_job_state", default=None)


def job_state() -> dict[str, Any]:
    """A dict that lives as long as the job running in this context, across the attempts
    ``wait_out`` makes after an outage (each attempt starts the job from the beginning, so what
    an attempt paid for — an LLM judgment's calls — would otherwise be forgotten by the next);
    outside a job, a new empty dict."""
    state = _job_state.get()
    return state if state is not None else {}


def job_stop_at() -> float | None:
    """When the job running in this context is to stop (``time.monotonic``): ``JOB_STOP_MARGIN``
    seconds before ``WORKBENCH_JOB_TIMEOUT``; None outside a job."""
    started = _job_started.get()
    if started is None:
        return None
    return started + current_config().job_timeout - JOB_STOP_MARGIN


def time_limit_reason(interrupted: bool = False) -> str:
    """The reason an ERROR document gives for a job stopped at its time limit (``interrupted``:
    by Celery's soft limit, not having stopped by itself)."""
    config = current_config()
    timeout = config.job_timeout
    if interrupted:
        return (f"the job ran past its time limit: interrupted after {config.job_interrupt_after}"
                f" s of work (WORKBENCH_JOB_TIMEOUT={timeout} s, less {JOB_INTERRUPT_MARGIN} s)")
    return (f"the job ran past its time limit: stopped after {timeout - JOB_STOP_MARGIN} s "
            f"of work (WORKBENCH_JOB_TIMEOUT={timeout} s, less {JOB_STOP_MARGIN} s to end it)")


def is_transient(exc: BaseException) -> bool:
    """The cluster or the broker is unreachable, or the cluster answers 503 (a node starting:
    state not recovered, no shard available yet): worth waiting for."""
    if isinstance(exc, TRANSIENT):
        return True
    return isinstance(exc, TransportError) and exc.status_code == 503


class _OutageBudget:
    """The stop, wait and logging of one ``wait_out``: the budget runs from the first transient
    fault (not from the first attempt, which may have worked for an hour before the outage)."""

    def __init__(self, budget: float, what: str, backoff_max: float) -> None:
        self.budget = budget
        self.what = what
        self.first: float | None = None
        self.backoff = wait_exponential(multiplier=1, max=backoff_max)  # 1, 2, 4 ... max

    def spent(self, state: RetryCallState) -> float:
        """Seconds from the first transient fault to the one ``state`` holds."""
        now = state.outcome_timestamp
        now = time.monotonic() if now is None else now
        self.first = now if self.first is None else self.first
        return now - self.first

    def wait(self, state: RetryCallState) -> float:
        return min(self.backoff(state), self.budget - self.spent(state))

    def stop(self, state: RetryCallState) -> bool:
        return self.budget - self.spent(state) <= 0

    def give_up(self, state: RetryCallState) -> Any:
        """Log, then raise the last fault."""
        exc = _fault(state)
        log.error("%s: still failing after %.0f s (%s); giving up", self.what, self.spent(state),
                  failure_reason(exc))
        raise exc

    def warn(self, state: RetryCallState) -> None:
        assert state.next_action is not None
        exc = _fault(state)
        log.warning("%s: %s (%s); trying again in %.0f s (outage budget left %.0f s)",
                    self.what, type(exc).__name__, failure_reason(exc), state.next_action.sleep,
                    self.budget - self.spent(state))


def _fault(state: RetryCallState) -> BaseException:
    """The fault of the attempt ``state`` holds (only failed attempts are retried)."""
    exc = state.outcome.exception() if state.outcome is not None else None
    assert exc is not None
    return exc


def wait_out(action: Callable[[], Any], budget: float, what: str,
             backoff_max: float = OUTAGE_BACKOFF_MAX) -> Any:
    """Run ``action`` until it returns or raises a fault that is not transient; transient faults
    are retried after 1, 2, 4 ... ``backoff_max`` s until ``budget`` seconds have passed since
    the first of them, then the last one is raised."""
    outage = _OutageBudget(budget, what, backoff_max)
    return Retrying(
        retry=retry_if_exception(is_transient), stop=outage.stop, wait=outage.wait,
        before_sleep=outage.warn, retry_error_callback=outage.give_up,
        sleep=lambda seconds: time.sleep(float(seconds)),
    )(action)


class JobFailed(Exception):
    """A job that ends ERROR by its own rules (not a crash); ``metadata`` adds fields such as
    ``lastFailureReason`` next to the error."""

    #: how its ending is logged (a user's cancel is INFO)
    log_level = logging.WARNING
    #: its ending in the job metrics (``telemetry.instruments``)
    ending = "error"

    def __init__(self, reason: str, metadata: dict[str, Any] | None = None) -> None:
        super().__init__(reason)
        self.metadata = metadata or {}


CANCEL_REASON = "cancelled by the user"


class Cancelled(JobFailed):
    """The job stopped because it was cancelled (or its document went away); raised by its
    ``jobs.control.JobControl``."""

    log_level = logging.INFO
    ending = "cancelled"

    def __init__(self, metadata: dict[str, Any] | None = None) -> None:
        super().__init__(CANCEL_REASON, metadata)


class TimedOut(Cancelled):
    """The job ran past its time limit: it ends as a cancel does (its partial progress and
    usage kept), but it is the operator's concern, not the user's: WARNING,
    ``ending="timeout"``."""

    log_level = logging.WARNING
    ending = "timeout"

    def __init__(self, metadata: dict[str, Any] | None = None,
                 interrupted: bool = False) -> None:
        JobFailed.__init__(self, time_limit_reason(interrupted), metadata)


class HandedOver(Cancelled):
    """The job stopped because its worker is stopping (``jobs.handover``): a ``Cancelled`` to
    the domain, which stops as for a cancel, but not an ending. ``WorkbenchTask`` queues the job
    again for another worker; nothing is written to the entity."""

    log_level = logging.INFO
    ending = ""

    def __init__(self, metadata: dict[str, Any] | None = None) -> None:
        JobFailed.__init__(self, "its worker is stopping: handed over to another worker",
                           metadata)


def extra_metadata(exc: BaseException) -> dict[str, Any]:
    """The fields the ERROR document of a job that ended with ``exc`` keeps besides its reason
    (``JobFailed.metadata``, or what ``keep_metadata`` attached to any other exception)."""
    if isinstance(exc, JobFailed):
        return exc.metadata
    kept: dict[str, Any] = getattr(exc, "_workbench_metadata", {})
    return kept


def keep_metadata(exc: BaseException, **fields: Any) -> None:
    """Have the ERROR document of the job ``exc`` ends keep ``fields`` (what the job had
    spent, say), whatever the exception."""
    if isinstance(exc, JobFailed):
        exc.metadata.update(fields)
    else:
        exc._workbench_metadata = {**extra_metadata(exc), **fields}  # type: ignore[attr-defined]


def failure_reason(exc: BaseException) -> str:
    """A one-line reason for ``metadata.error``: the message, or the exception type."""
    text = str(exc).strip() or type(exc).__name__
    return text.splitlines()[0][:2000]


class WorkbenchTask(Task):
    """Subclasses set ``status_index`` and may override ``error_fields``."""

    abstract = True
    acks_late = True
    reject_on_worker_lost = True
    # Transient faults are waited out inside the job (``wait_out``), not retried through the
    # broker, which may be the thing that is down.
    autoretry_for = ()
    max_retries = 0

    #: index holding the entity whose id is the job's first argument
    status_index: str | None = None
    #: seconds to wait out an outage; None: ``WORKBENCH_OUTAGE_BUDGET``
    outage_budget: float | None = None

    def log_entity(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        """The entity id this job's log lines name (``telemetry.logs.JobFields``)."""
        return args[0] if args else kwargs.get("entity_id")

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
        job = handover.Running(self.name, tuple(args), dict(kwargs), self.request.id,
                               str(entity_id) if entity_id and self.status_index else None,
                               lease)
        if handover.requested() and self.status_index and entity_id:
            # its worker is stopping: another one runs it (the lease, if taken, goes first)
            log.info("%s for %s: this worker is stopping; handed over at once", self.name,
                     entity_id)
            handover.hand_over(job)
            return None
        handover.set_running(job)
        requeued = handed_over = False
        started = _job_started.set(time.monotonic())
        state = _job_state.set({})
        metered = instruments.job_run(instruments.job_kind(self.name)) \
            if self.status_index and entity_id else contextlib.nullcontext({"ending": ""})
        try:
            with metered as run:
                try:
                    return wait_out(lambda: self._run_once(args, kwargs), self.budget(),
                                    f"{self.name} for {entity_id}")
                except (Retry, HandedOver):
                    run["ending"] = ""  # queued again: not an ending
                    raise
                except JobFailed as exc:
                    run["ending"] = exc.ending
                    raise
                except SoftTimeLimitExceeded as exc:
                    # Celery's soft limit, raised wherever the job was: an ending like any
                    # other time limit, keeping what the job had spent (``keep_metadata``).
                    timed_out = TimedOut(extra_metadata(exc), interrupted=True)
                    run["ending"] = timed_out.ending
                    raise timed_out from None
        except Retry:
            requeued = True
            raise
        except HandedOver:
            if not (self.status_index and entity_id):
                return None  # a split job's helper: the parent hands the job over
            handed_over = True
            log.info("%s for %s: handed over to another worker %.1f s after the stop signal",
                     self.name, entity_id, handover.since_request())
            return None
        except JobFailed as exc:
            if not (self.status_index and entity_id):
                raise
            self.end_failed(str(entity_id), exc)
            return None
        finally:
            handover.set_running(None)
            _job_started.reset(started)
            _job_state.reset(state)
            if handed_over:
                handover.hand_over(job)  # releases the lease
            elif lease is not None:
                lease.release(requeued)

    def budget(self) -> float:
        return self.outage_budget if self.outage_budget is not None else \
            current_config().outage_budget

    def _run_once(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        """One run of the job, from the start (reading its entity again)."""
        with acting_as(self.job_identity(args, kwargs)):
            return super().__call__(*args, **kwargs)

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
            found = Repository(svc.client, self.status_index).get_source(str(entity_id),
                                                                         ["createdBy"])
        user = (found or {}).get("createdBy")
        return Identity(service.authorization, impersonate=user) if user else service

    def error_fields(self, reason: str, exc: BaseException) -> dict[str, Any]:
        """The top-level fields written when the job fails for good."""
        return {"status": "ERROR", "metadata": {"error": reason, **extra_metadata(exc)}}

    def end_failed(self, entity_id: str, exc: JobFailed) -> None:
        """An expected ending (a cancel, or a failure the job names: bad input found late, a
        model that cannot be called): ERROR and its reason written, one log line without a
        traceback, and the task itself succeeds, so Celery logs no "raised unexpected"."""
        reason = failure_reason(exc)
        log.log(exc.log_level, "job %s for %s ended ERROR: %s", self.name, entity_id, reason)
        self.mark_failed(entity_id, self.error_fields(reason, exc))

    def on_failure(
        self, exc: BaseException, task_id: str, args: tuple[Any, ...], kwargs: dict[str, Any],
        einfo: Any,
    ) -> None:
        """What no job expects (a crash, an outage past its budget): Celery has logged it with
        its traceback; ERROR and the reason are written too."""
        entity_id = args[0] if args else kwargs.get("entity_id")
        reason = failure_reason(exc)
        log.error("job %s for %s failed: %s", self.name, entity_id, reason)
        if self.status_index and entity_id:
            self.mark_failed(str(entity_id), self.error_fields(reason, exc))

    def mark_failed(self, entity_id: str, fields: dict[str, Any]) -> None:
        """Write ERROR and the reason, waiting up to ``FAILURE_WRITE_WAIT`` s for an unreachable
        cluster; never raises. A write that cannot be made leaves the entity to the lease
        sweeper, which queues the job again once the cluster answers (module docstring)."""
        try:
            wait_out(lambda: self.write_failure(entity_id, fields),
                     min(FAILURE_WRITE_WAIT, self.budget()), f"recording ERROR of {entity_id}")
        except NotFoundError:
            # Deleted while its job ran (a DELETE cancels the job first): nothing to record, and
            # the update, which never upserts, cannot bring the document back.
            log.info("%s was deleted while its job ran; its ending is not recorded", entity_id)
        except Exception as exc:
            if is_transient(exc):
                log.error("could not record the failure of %s (%s): it stays as it is, and the "
                          "lease sweeper queues its job again once the cluster answers",
                          entity_id, failure_reason(exc))
            else:
                log.exception("could not record the failure of %s", entity_id)

    def write_failure(self, entity_id: str, fields: dict[str, Any]) -> None:
        """The ERROR write itself; raises when it cannot be made."""
        # Top-level keys are replaced whole (``metadata`` becomes just the error), as the
        # contract's ERROR documents have it; a partial ``doc`` update would merge them.
        assert self.status_index is not None  # only jobs with a status index record failure
        Repository(worker_client(), self.status_index).update_fields(entity_id, fields)
