"""A worker asked to stop hands its running jobs over to another worker instead of finishing them.

Kubernetes gives a stopping pod 30 s (``terminationGracePeriodSeconds``) and ``docker stop`` 10 s
before SIGKILL. A job that runs for an hour cannot finish in that time, and a killed one waits
for its lease to lapse before another worker runs it again. With ``WORKBENCH_WORKER_STOP=handover``
(the default; ``finish`` keeps Celery's warm shutdown, which waits for the jobs):

* The consumer's main process, at its warm shutdown (SIGTERM, or a first SIGINT), sends
  ``REQUEST_SIGNAL`` to each of its pool processes (``ask_pool``).
* In a pool process that signal sets ``requested()``. The running job's ``JobControl`` reports
  it stopped at its next checkpoint (the ones a cancel and the time limit use) and raises
  ``jobs.base.HandedOver``, a ``Cancelled``: the domain stops as for a cancel (calls in flight
  finish, paid LLM ratings go to the judgment cache, an experiment's partial results are
  removed), a split job's parent stops every participant, a helper takes no more units.
  ``WorkbenchTask`` then hands the job over (``hand_over``): queued marker written, lease
  released, the message sent again. The task ends without ERROR, Celery acknowledges the old
  message and the worker exits. A job that starts after the signal is handed over at once.
* A job still running ``WORKBENCH_WORKER_STOP_SECONDS`` after the signal (blocked in one long
  call) is handed over by force from a watchdog thread, the same way, and its process exits at
  once (Celery puts the old message back too; whichever delivery comes second finds the lease or
  the final status and does nothing). The supervisor kills a consumer still alive
  ``jobs.supervisor.STOP_MARGIN`` seconds later, so a worker exits within
  ``WORKBENCH_WORKER_STOP_SECONDS`` + 5 s of the signal.

Cold shutdown (SIGQUIT, or a second SIGINT) stays Celery's: jobs are killed at once and come
back as a killed worker's do (``jobs.sweeper``). docs/reliability.md, "A worker asked to stop
hands its jobs over".
"""

from __future__ import annotations

import logging
import os
import signal
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import Any

import redis
from kombu.exceptions import OperationalError

from workbench.jobs import leases
from workbench.jobs.celery_app import celery_app, current_config

log = logging.getLogger(__name__)

#: sent by the consumer's main process to its pool processes: hand your jobs over
REQUEST_SIGNAL = signal.SIGUSR2
#: exit status of a pool process that handed its job over by force
FORCED_EXIT = 75
#: one quick retry of the message, as the API's (``jobs.queue``)
RETRY_POLICY = {"max_retries": 1, "interval_start": 0.2, "interval_step": 0.5,
                "interval_max": 1.0}

_requested = threading.Event()
_requested_at: float | None = None


@dataclass
class Running:
    """The job this pool process runs (``WorkbenchTask`` sets it), for the watchdog."""

    task: str
    args: tuple[Any, ...]
    kwargs: dict[str, Any]
    task_id: str | None
    entity_id: str | None
    #: its lease (``jobs.leases.Lease``); None: a job without one (a split job's helper)
    lease: leases.Lease | None


_running: Running | None = None
_running_lock = threading.Lock()


def requested() -> bool:
    """True once this process was asked to hand its jobs over."""
    return _requested.is_set()


def since_request() -> float:
    """Seconds since this process was asked to hand its jobs over (0 if it was not)."""
    return 0.0 if _requested_at is None else time.monotonic() - _requested_at


def request() -> None:
    """Ask this process's jobs to hand themselves over (what ``REQUEST_SIGNAL`` does)."""
    global _requested_at
    if _requested.is_set():
        return
    _requested_at = time.monotonic()
    _requested.set()
    seconds = current_config().worker_stop_seconds
    threading.Thread(target=_watchdog, args=(seconds,), name="handover-watchdog",
                     daemon=True).start()


def set_running(job: Running | None) -> None:
    global _running
    with _running_lock:
        _running = job


def hand_over(job: Running) -> None:
    """Queue ``job`` again for another worker: the queued marker first, then the lease goes,
    then the message (what the sweeper does, without waiting for a lapse). A message that
    cannot be sent takes the marker back: with neither marker nor lease, the sweeper of any
    worker queues the job once Redis answers."""
    r = None
    if job.lease is not None:
        job.lease.release(requeued=True, why="handover")
        r = job.lease.redis
    try:
        celery_app.send_task(job.task, args=list(job.args), kwargs=job.kwargs,
                             task_id=job.task_id, retry=True, retry_policy=RETRY_POLICY)
    except (OperationalError, OSError, redis.exceptions.RedisError) as exc:
        log.warning("%s for %s: could not queue it again (%s); the lease sweeper will",
                    job.task, job.entity_id, type(exc).__name__)
        if r is not None and job.entity_id is not None:
            try:
                r.delete(leases.queued_key(job.task, job.entity_id))
            except redis.exceptions.RedisError:
                return


def _watchdog(seconds: float) -> None:
    """Hand over by force the job still running ``seconds`` after the request, then end this
    process (the job would go on beside its next run otherwise)."""
    time.sleep(seconds)
    with _running_lock:
        job = _running
    if job is None:
        return
    log.warning("%s for %s did not stop within %d s of the stop signal "
                "(WORKBENCH_WORKER_STOP_SECONDS); handed over by force, its process exits",
                job.task, job.entity_id, seconds)
    if job.entity_id is not None:
        hand_over(job)
    for stream in (sys.stdout, sys.stderr):
        stream.flush()
    os._exit(FORCED_EXIT)


def _on_request(_signum: int, _frame: FrameType | None) -> None:
    request()


def install_in_pool_process() -> None:
    """In a pool process (Celery's ``worker_process_init``): listen for ``REQUEST_SIGNAL``."""
    signal.signal(REQUEST_SIGNAL, _on_request)


def pool_processes(parent: int | None = None) -> list[int]:
    """The pids of the processes whose parent is ``parent`` (this process): the pool's."""
    parent = os.getpid() if parent is None else parent
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_bytes()
        except OSError:
            continue
        fields = stat.rsplit(b")", 1)[-1].split()
        if len(fields) > 1 and fields[1] == str(parent).encode():
            found.append(int(entry.name))
    return found


def ask_pool(how: str) -> None:
    """In the consumer's main process, at the start of its shutdown: a warm one (the first
    SIGTERM or SIGINT) with ``WORKBENCH_WORKER_STOP=handover`` asks every pool process to hand
    its jobs over."""
    config = current_config()
    if how != "Warm" or config.worker_stop != "handover":
        return
    pids = pool_processes()
    for pid in pids:
        try:
            os.kill(pid, REQUEST_SIGNAL)
        except ProcessLookupError:
            continue
    log.info("stop signal: the %d job process(es) hand any running job over to another "
             "worker (by force after %d s, WORKBENCH_WORKER_STOP_SECONDS)", len(pids),
             config.worker_stop_seconds)


def connect() -> None:
    """Wire the above to Celery's signals (in a worker: ``jobs.tasks`` calls this)."""
    from celery.signals import worker_process_init, worker_shutting_down

    def _pool_init(**_: object) -> None:
        install_in_pool_process()

    def _shutting_down(how: str = "", **_: object) -> None:
        ask_pool(how)

    worker_process_init.connect(_pool_init, weak=False)
    worker_shutting_down.connect(_shutting_down, weak=False)
