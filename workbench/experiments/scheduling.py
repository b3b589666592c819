"""Scheduled experiments (docs/contract.md, "Scheduled experiments"): the scheduler loop and a
scheduled run (a schedule's body, its cron included, is schemas/schedules.py).

``workbench scheduler`` polls the job index; each fire time is claimed in Redis with SET NX, so
any number of schedulers fire a job once. A run writes a history document and evaluation results
tagged with its run id; one that outlives ``scheduled_experiments_timeout`` ends ``TIMEOUT``.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from datetime import UTC, datetime, timedelta
from typing import Any

from opensearchpy.exceptions import NotFoundError

from workbench.experiments.context import load
from workbench.experiments.runner import execute
from workbench.experiments.searching import remote_outcome
from workbench.experiments.waiting import await_judgments
from workbench.jobs.base import JobFailed
from workbench.redis_keys import schedule_claim_key, schedule_last_key
from workbench.schemas.schedules import PARSE_ERROR as PARSE_ERROR  # where tests look
from workbench.schemas.schedules import latest_fire
from workbench.services import Services
from workbench.store.indices import EXPERIMENT_INDEX, HISTORY_INDEX, JOBS_INDEX
from workbench.store.repository import Repository, new_id, now_iso
from workbench.telemetry import instruments

log = logging.getLogger(__name__)


def job_document(experiment_id: str, expression: str) -> dict[str, Any]:
    now_ms = int(time.time() * 1000)
    return {"id": experiment_id, "enabled": True,
            "schedule": {"cron": {"expression": expression, "timezone": "UTC"}},
            "enabledTime": now_ms, "lastUpdateTime": now_ms, "timestamp": now_iso()}


def last_fire_key(job_id: str) -> str:
    """Redis key of the fire time a scheduler last handled for a job."""
    return schedule_last_key(job_id)


class Scheduler:
    """Fires due jobs; one instance per ``workbench scheduler`` process."""

    def __init__(self, svc: Services) -> None:
        self.svc = svc

    def tick(self, now: datetime | None = None) -> list[str]:
        """Start every run that is due; returns the history ids it created."""
        now = now or datetime.now(UTC)
        settings = self.svc.settings.load()
        self.expire_runs(settings.value("scheduled_experiments_timeout"))
        if not settings.value("scheduled_experiments_enabled"):
            return []
        jobs = Repository(self.svc.client, JOBS_INDEX).search(
            {"query": {"term": {"enabled": True}}, "size": 10_000})["hits"]["hits"]
        started = []
        for hit in jobs:
            job = hit["_source"]
            try:
                history_id = self._maybe_fire(job, now)
            except Exception:  # one bad schedule must not stop the others
                log.exception("schedule %s could not be fired", job.get("id"))
                continue
            if history_id:
                started.append(history_id)
        return started

    def _maybe_fire(self, job: dict[str, Any], now: datetime) -> str | None:
        job_id = job["id"]
        expression = job["schedule"]["cron"]["expression"]
        last_key = last_fire_key(job_id)
        last = self.svc.redis.get(last_key)
        after_ms = int(last) if last else int(job.get("enabledTime") or 0)
        fire = latest_fire(expression, after_ms, now)
        if fire is None:
            return None
        fire_ms = int(fire.timestamp() * 1000)
        self.svc.redis.set(last_key, fire_ms)
        # The claim is per schedule (its enabledTime): a schedule deleted and created again
        # starts with no claimed fire times.
        claim = schedule_claim_key(job_id, job.get("enabledTime"), fire_ms)
        if not self.svc.redis.set(claim, 1, nx=True, ex=7 * 86400):
            return None  # another scheduler fired it
        history_id = new_id()
        Repository(self.svc.client, HISTORY_INDEX).create({
            "id": history_id, "experimentId": job_id, "jobId": job_id,
            "jobIndexName": JOBS_INDEX, "timestamp": now_iso(), "status": "PROCESSING",
            "results": None, **({"createdBy": job["createdBy"]} if job.get("createdBy") else {}),
        })
        from workbench.jobs.queue import enqueue

        enqueue("workbench.experiments.scheduled_run", history_id)
        log.info("scheduled run %s of experiment %s (fire time %s)", history_id, job_id, fire)
        return history_id

    def expire_runs(self, timeout_ms: float) -> None:
        """Runs still PROCESSING past the timeout end ``TIMEOUT``."""
        cutoff = (datetime.now(UTC) - timedelta(milliseconds=timeout_ms)).strftime(
            "%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"
        with contextlib.suppress(NotFoundError):  # no run has happened yet
            Repository(self.svc.client, HISTORY_INDEX).update_by_query(
                {"query": {"bool": {"filter": [{"term": {"status": "PROCESSING"}},
                                               {"range": {"timestamp": {"lt": cutoff}}}]}},
                 "script": {"source": "ctx._source.status = 'TIMEOUT'"}})

    def run_forever(self, interval: float, stop: threading.Event | None = None) -> None:
        stop = stop or threading.Event()
        while not stop.is_set():
            try:
                self.tick()
            except Exception:
                log.exception("scheduler tick failed")
            stop.wait(interval)


def run_history(svc: Services, history_id: str) -> None:
    """The job of one scheduled run: re-run the experiment, tag results with the run id."""
    history_repo = Repository(svc.client, HISTORY_INDEX)
    history = history_repo.get_source(history_id)
    if history is None or history.get("status") != "PROCESSING":
        return
    experiment = Repository(svc.client, EXPERIMENT_INDEX).get_source(history["experimentId"])
    instruments.note_job_type((experiment or {}).get("type"))
    if experiment is None:
        Repository(svc.client, JOBS_INDEX).delete(history["jobId"])
        raise JobFailed(f"Experiment [{history['experimentId']}] no longer exists; its "
                        "schedule was removed")
    # A judgment being regenerated (``_retry``) is waited for as at creation, from the fire time.
    await_judgments(svc.client, experiment.get("judgmentList") or [], history.get("timestamp"),
                    svc.config.judgment_wait)
    timeout_s = svc.settings.load().value("scheduled_experiments_timeout") / 1000
    ctx = load(svc, experiment, run_id=history_id, timeout_seconds=timeout_s)
    results, remote_fields = remote_outcome(ctx, execute(ctx))
    history_repo.update_fields(history_id, {"status": "COMPLETED", "results": results,
                                            **remote_fields})
