"""Progress and cancellation of a running judgment or experiment job.

* **Cancel**: the API sets ``workbench:cancel:<id>`` in Redis (with a TTL); the job checks it
  between units of work (and the LLM thread pool before every call), at most every
  ``CHECK_INTERVAL`` seconds, and stops by raising :class:`Cancelled`, a :class:`JobFailed`, so
  the job ends ``ERROR`` with the reason ``cancelled by the user``.
* **Progress**: ``done``/``total`` units (and, for LLM judgments, the usage so far) written as a
  small partial update of the entity document, at most once every ``WRITE_INTERVAL`` seconds.
  Each write is conditional on the version the job last saw, and the job's final write is
  conditional on the version its last progress write produced, so nothing else that changes the
  document (a delete, the sweeper) is overwritten. A document that changed or vanished under the
  job stops the job too: its result could not be stored anyway.
* **Time limit**: past ``jobs.base.job_stop_at`` (``WORKBENCH_JOB_TIMEOUT`` less
  ``JOB_STOP_MARGIN``) the job is stopped as a cancel stops it, and ends with
  :class:`TimedOut` (a WARNING, not a user's cancel).
* **Worker stopping**: once ``jobs.handover`` was requested in this process the job is stopped
  the same way, with :class:`HandedOver` (queued again for another worker, not an ending).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any

import redis
from opensearchpy.exceptions import ConflictError, NotFoundError, TransportError

from workbench.jobs import handover
from workbench.jobs.base import CANCEL_REASON as CANCEL_REASON  # where it was defined before
from workbench.jobs.base import Cancelled, HandedOver, TimedOut, job_stop_at
from workbench.redis_keys import cancel_key
from workbench.services import Services
from workbench.store.identity import carry
from workbench.store.repository import Repository, now_iso

log = logging.getLogger(__name__)

CANCEL_TTL_SECONDS = 24 * 3600
CHECK_INTERVAL = 0.5
WRITE_INTERVAL = 2.0


def without_progress(metadata: dict[str, Any]) -> dict[str, Any]:
    """A judgment's metadata without the ``progress`` its job writes as it runs: what names the
    work (a split job's run is named after it, so a run again resumes)."""
    return {k: v for k, v in metadata.items() if k != "progress"}


def request_cancel(client: redis.Redis, entity_id: str) -> None:
    """Ask the job of ``entity_id`` to stop (Redis errors reach the caller: a 503 in the API)."""
    client.set(cancel_key(entity_id), "1", ex=CANCEL_TTL_SECONDS)


def forget_cancel(client: redis.Redis, entity_id: str) -> None:
    """Drop a leftover cancel request (before a judgment's retry is queued); best effort."""
    try:
        client.delete(cancel_key(entity_id))
    except redis.exceptions.RedisError as exc:
        log.warning("could not clear the cancel flag of %s: %s", entity_id, type(exc).__name__)


class JobControl:
    """The progress and cancel flag of one job; thread-safe (the LLM pool checks it)."""

    def __init__(self, svc: Services, index: str, hit: dict[str, Any], unit: str,
                 in_metadata: bool) -> None:
        """``hit`` is the entity as the job read it (``_seq_no``/``_primary_term`` are kept up
        to date in it, so the final conditional write follows the progress writes);
        ``in_metadata``: progress goes to ``metadata.progress`` (judgments), else to a
        top-level ``progress`` (experiments)."""
        self.svc = svc
        self.index = index
        self.hit = hit
        self.entity_id = str(hit["_id"])
        self.unit = unit
        self.in_metadata = in_metadata
        self.done = 0
        self.total = 0
        self.phase = ""
        self.usage: Callable[[], dict[str, int]] | None = None
        #: what the job has spent, as its ``metadata.usage`` (an LLM judgment's calls, tokens
        #: and cost, an earlier run's included), kept however the job ends
        self.spent: Callable[[], dict[str, Any]] | None = None
        self._lock = threading.Lock()
        self._cancelled = False
        #: when the job's time limit stops it (``time.monotonic``); None: no limit
        self.stop_at = job_stop_at()
        self._timed_out = False
        self._handed_over = False
        self._flag_unread = False  # the last read of the cancel flag failed (Redis away)
        self._checked_at = float("-inf")
        self._written_at = float("-inf")
        #: the first progress write when ``start`` did not wait for it (``settle``)
        self._starting: threading.Thread | None = None
        self._settling = threading.Lock()

    # -- cancellation ---------------------------------------------------------------------

    def cancelled(self) -> bool:
        """True once a cancel was requested (asks Redis at most every ``CHECK_INTERVAL``), the
        time limit passed, or the worker is stopping (``jobs.handover``)."""
        if self.handing_over():
            return True
        with self._lock:
            if self._cancelled:
                return True
            now = time.monotonic()
            if self.stop_at is not None and now >= self.stop_at:
                self._cancelled = self._timed_out = True
                return True
            if now - self._checked_at < CHECK_INTERVAL:
                return False
            self._checked_at = now
            try:
                flagged = bool(self.svc.redis.exists(cancel_key(self.entity_id)))
            except redis.exceptions.RedisError as exc:  # Redis down: keep working
                if not self._flag_unread:  # once an outage, not every CHECK_INTERVAL
                    log.warning("cannot read the cancel flag of %s (%s); the job goes on",
                                self.entity_id, type(exc).__name__)
                self._flag_unread = True
                return False
            self._flag_unread = False
            if flagged:
                self._stop()
            return self._cancelled

    def _stop(self) -> None:
        self._cancelled = True
        forget_cancel(self.svc.redis, self.entity_id)  # honoured: a later retry starts clean
        log.info("job of %s cancelled", self.entity_id)

    def handing_over(self) -> bool:
        """True once this process was asked to hand its jobs over (``jobs.handover``): the job
        stops as for a cancel, and ``error`` is :class:`HandedOver`. Apart from ``cancelled``,
        which a subclass may replace (a scheduled run's deadline)."""
        if not handover.requested():
            return False
        with self._lock:
            self._cancelled = self._handed_over = True
        return True

    def check(self) -> None:
        """Raise :class:`Cancelled` if the job was cancelled (or is handed over)."""
        if self.handing_over() or self.cancelled():
            raise self.error()

    def error(self) -> Cancelled:
        """The ending to raise: :class:`HandedOver` when the worker is stopping,
        :class:`TimedOut` past the time limit, else :class:`Cancelled`."""
        metadata = {"progress": self.snapshot()} if self.in_metadata else None
        if self._handed_over:
            return HandedOver(metadata)
        return TimedOut(metadata) if self._timed_out else Cancelled(metadata)

    # -- progress -------------------------------------------------------------------------

    def start(self, total: int, phase: str = "", wait: bool = True) -> None:
        """Progress from zero of ``total``, written at once. ``wait=False``: the write goes on
        its way while the job starts its work (a round trip a short job would otherwise wait
        for); any later write, and ``settle``, wait for it first, so writes keep their order
        and ``hit`` its version."""
        with self._lock:
            self.total, self.done, self.phase = total, 0, phase
        if wait:
            self.write(force=True)
            return
        with self._settling:
            if self._starting is not None:  # an earlier start's write: one write at a time
                self._starting.join()
            self._starting = threading.Thread(target=carry(self._write), args=(True,),
                                              name="progress", daemon=True)
            self._starting.start()

    def settle(self) -> None:
        """Wait for the write a ``start(wait=False)`` left on its way: afterwards ``hit``
        holds the entity's version as the job last wrote it."""
        with self._settling:
            starting, self._starting = self._starting, None
            if starting is not None:
                starting.join()

    def set_phase(self, phase: str) -> None:
        with self._lock:
            self.phase = phase
        self.write()

    def advance(self, count: int = 1) -> None:
        with self._lock:
            self.done += count
        self.write()

    def reach(self, done: int) -> None:
        """``done`` units in all (counted elsewhere, as across the workers of a split job)."""
        with self._lock:
            self.done = done
        self.write()

    def due(self) -> bool:
        """Whether a progress write would be made now (worth counting what is done)."""
        with self._lock:
            return time.monotonic() - self._written_at >= WRITE_INTERVAL

    def snapshot(self) -> dict[str, Any]:
        with self._lock:
            out: dict[str, Any] = {"unit": self.unit, "done": self.done, "total": self.total,
                                   "percent": round(100.0 * self.done / self.total, 1)
                                   if self.total else 0.0,
                                   "updatedAt": now_iso()}
            if self.phase:
                out["phase"] = self.phase
        if self.usage is not None:
            out["usage"] = self.usage()
        return out

    def write(self, force: bool = False) -> None:
        """One partial update, unless one was written less than ``WRITE_INTERVAL`` ago."""
        self.settle()
        self._write(force)

    def _write(self, force: bool) -> None:
        with self._lock:
            now = time.monotonic()
            if self._cancelled or (not force and now - self._written_at < WRITE_INTERVAL):
                return
            self._written_at = now
        progress = self.snapshot()
        doc = {"metadata": {"progress": progress}} if self.in_metadata else {"progress": progress}
        try:
            answer = Repository(self.svc.client, self.index).update_partial(
                self.entity_id, doc, seq_no=self.hit["_seq_no"],
                primary_term=self.hit["_primary_term"])
        except NotFoundError:  # deleted (a DELETE cancels the job first): expected, quiet
            log.info("%s was deleted while its job ran; stopping the job", self.entity_id)
            with self._lock:
                self._cancelled = True
            return
        except ConflictError:
            # sent again after its node died or its shard moved, it may find itself applied
            try:
                answer = Repository(self.svc.client, self.index).holding(
                    self.entity_id, doc, merged=True) or {}
            except TransportError:
                answer = {}
            if "_seq_no" not in answer:
                log.warning("%s changed while its job ran; stopping the job", self.entity_id)
                with self._lock:
                    self._cancelled = True
                return
        except TransportError as exc:  # progress is informative: never fail the job for it
            log.warning("could not write the progress of %s: %s", self.entity_id, exc)
            return
        if "_seq_no" in answer:
            self.hit["_seq_no"] = answer["_seq_no"]
            self.hit["_primary_term"] = answer["_primary_term"]
