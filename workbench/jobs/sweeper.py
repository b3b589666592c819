"""No job stays PROCESSING forever, and no job is failed for waiting: leases, not ages.

Every PROCESSING/RETRYING entity has a queued marker or a live lease in Redis (``jobs.leases``).
The sweeper re-queues an entity that has neither — its worker died and its lease lapsed, or its
message was lost with a Redis that kept nothing on disk — once it is older than ``grace``
(the API writes the entity a moment before it queues the job; a second message sent in that
moment would only find the first one's lease) and it was seen so in two passes at least half a
lease TTL apart: a Redis that stopped answering for most of a TTL lets a live job's lease
expire, and its heartbeat takes the lease back within a third of the TTL once Redis answers
(a job run twice at once would fail both). An entity whose lease is held by a dead process of
this host is re-queued at once, whatever its age: its worker was killed, and no lease TTL needs
to pass to know it. After ``WORKBENCH_JOB_MAX_ATTEMPTS`` re-runs the entity ends ERROR
with what happened.

Runs in every ``workbench worker`` consumer, at its start and then on a timer, so a job whose
whole worker was killed is queued again within seconds of a worker starting on the same host,
and from any other host within one lease TTL and two periods. Two sweepers may re-queue the
same entity at once: the second message finds the first one's lease (or a final status) and
does nothing. The ERROR update is conditional on the status, so a job that finishes meanwhile
keeps its result.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import redis
from opensearchpy import OpenSearch

from workbench.jobs import leases
from workbench.jobs.base import failure_reason, is_transient
from workbench.store.indices import (
    EVALUATE_BATCH_INDEX,
    EXPERIMENT_INDEX,
    HISTORY_INDEX,
    JUDGMENT_INDEX,
    MONITOR_RUN_INDEX,
    QUERY_SET_INDEX,
)
from workbench.store.repository import Repository
from workbench.telemetry import instruments

log = logging.getLogger(__name__)

_JUDGMENT_ERROR = (
    "ctx._source.status = 'ERROR'; "
    "if (ctx._source.metadata == null) { ctx._source.metadata = [:]; } "
    "ctx._source.metadata.error = params.reason;")

# index -> (status field, {status: task that runs it}, script writing ERROR and params.reason)
WATCHED: dict[str, tuple[str, dict[str, str], str]] = {
    JUDGMENT_INDEX: (
        "status.keyword",
        {"PROCESSING": "workbench.judgments.generate", "RETRYING": "workbench.judgments.retry"},
        _JUDGMENT_ERROR,
    ),
    EXPERIMENT_INDEX: (
        "status",
        {"PROCESSING": "workbench.experiments.run"},
        "ctx._source.status = 'ERROR'; ctx._source.results = [['error': params.reason]];",
    ),
    HISTORY_INDEX: (
        "status",
        {"PROCESSING": "workbench.experiments.scheduled_run"},
        "ctx._source.status = 'ERROR'; ctx._source.results = ['error': params.reason];",
    ),
    QUERY_SET_INDEX: (
        "status",
        {"PROCESSING": "workbench.querygen.generate"},
        "ctx._source.status = 'ERROR'; ctx._source.metadata = ['error': params.reason];",
    ),
    EVALUATE_BATCH_INDEX: (
        "status",
        {"PROCESSING": "workbench.evaluation.batch"},
        "ctx._source.status = 'ERROR'; ctx._source.error = params.reason;",
    ),
    MONITOR_RUN_INDEX: (
        "status",
        {"PROCESSING": "workbench.monitors.run"},
        "ctx._source.status = 'ERROR'; ctx._source.error = params.reason;",
    ),
}

#: index -> {entity type: {status: task}}: the entities of that type whose job is another task
#: (an experiment's filled judgment list is a judgment run by workbench/holes/tasks.py)
BY_TYPE: dict[str, dict[str, dict[str, str]]] = {
    JUDGMENT_INDEX: {"FILLED_JUDGMENT": {"PROCESSING": "workbench.holes.fill"}},
}



def task_for(index: str, tasks: dict[str, str], source: dict[str, Any]) -> str | None:
    """The task that runs the entity ``source`` of ``index`` in its status (``BY_TYPE`` first)."""
    kind = (BY_TYPE.get(index) or {}).get(str(source.get("type")))
    return (kind if kind is not None else tasks).get(str(source.get("status")))


PAGE = 500
#: the longest an entity without queued marker or lease is left alone after it was written
MAX_GRACE_SECONDS = 30.0


def grace_seconds(lease_seconds: float) -> float:
    """How old an entity with neither queued marker nor lease must be before it is re-queued."""
    return min(2 * lease_seconds, MAX_GRACE_SECONDS)


def period_seconds(lease_seconds: float) -> float:
    return max(0.5, min(60.0, lease_seconds / 2))


def _iso(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


class Suspects:
    """Entities seen with neither marker nor lease, and when (monotonic seconds): one is taken
    for lost only when it was seen so at least ``confirm`` seconds before."""

    def __init__(self, confirm: float) -> None:
        self.confirm = confirm
        self.first_seen: dict[tuple[str, str], float] = {}

    def confirmed(self, task: str, entity_id: str) -> bool:
        now = time.monotonic()
        first = self.first_seen.setdefault((task, entity_id), now)
        return now - first >= self.confirm

    def keep_only(self, seen: set[tuple[str, str]]) -> None:
        """Forget the entities that were not suspect in the last pass."""
        self.first_seen = {k: v for k, v in self.first_seen.items() if k in seen}


def sweep(client: OpenSearch, r: redis.Redis, lease_seconds: float, max_attempts: int,
          enqueue: Callable[[str, str], None],
          suspects: Suspects | None = None) -> dict[str, int]:
    """One pass; returns how many entities were re-queued and how many were marked ERROR.
    ``suspects`` carries what earlier passes saw (None: this pass alone decides)."""
    cutoff = _iso(datetime.now(UTC) - timedelta(seconds=grace_seconds(lease_seconds)))
    counts = {"requeued": 0, "failed": 0}
    suspects = suspects if suspects is not None else Suspects(0.0)
    seen: set[tuple[str, str]] = set()
    for index, (status_field, tasks, script) in WATCHED.items():
        repository = Repository(client, index)
        if not repository.exists():
            continue
        answer = repository.search({
            "size": PAGE, "_source": ["status", "timestamp", "type"],
            "sort": [{"timestamp": "asc"}],
            "query": {"bool": {"filter": [{"terms": {status_field: list(tasks)}}]}}},
            params={"ignore_unavailable": "true"})
        for hit in answer["hits"]["hits"]:
            status = hit["_source"].get("status")
            task = task_for(index, tasks, hit["_source"])
            if task is None:
                continue
            young = str(hit["_source"].get("timestamp") or "") >= cutoff
            _check(client, r, index, script, status_field, status, task, hit["_id"],
                   max_attempts, enqueue, counts, young, suspects, seen)
    suspects.keep_only(seen)
    if counts["requeued"] or counts["failed"]:
        log.warning("lost jobs: %(requeued)d queued again, %(failed)d marked ERROR", counts)
    return counts


def _check(client: OpenSearch, r: redis.Redis, index: str, script: str, status_field: str,
           status: str, task: str, entity_id: str, max_attempts: int,
           enqueue: Callable[[str, str], None], counts: dict[str, int], young: bool,
           suspects: Suspects, seen: set[tuple[str, str]]) -> None:
    """``young``: written within the grace period, so only a dead holder's lease counts."""
    queued, lease = leases.state(r, task, entity_id)
    if queued is not None:
        return
    if lease is not None:
        if not leases.holder_is_dead(lease):
            return
        leases.release_if(r, leases.lease_key(task, entity_id), lease)  # its process is gone
        lost = "worker"
    elif young:
        return
    else:
        seen.add((task, entity_id))
        if not suspects.confirmed(task, entity_id):
            return
        lost = "worker or queued message"
    key = leases.attempts_key(task, entity_id)
    attempts = int(r.incr(key))
    r.expire(key, leases.ATTEMPTS_TTL)
    if attempts <= max_attempts:
        log.warning("%s %s lost its %s; queued again (re-run %d of %d)", task, entity_id, lost,
                    attempts, max_attempts)
        enqueue(task, entity_id)
        instruments.SWEEPER_ACTIONS.labels("requeued").inc()
        counts["requeued"] += 1
        return
    reason = (f"the job was lost {attempts} times (its worker died or its queued message was "
              f"lost) and was queued again {max_attempts} times (WORKBENCH_JOB_MAX_ATTEMPTS)")
    guarded = f"if (ctx._source.status != params.status) {{ ctx.op = 'noop'; return; }} {script}"
    answer = Repository(client, index).update_by_query(
        {"query": {"bool": {"filter": [{"ids": {"values": [entity_id]}},
                                       {"term": {status_field: status}}]}},
         "script": {"source": guarded, "params": {"reason": reason, "status": status}}})
    if answer.get("updated"):
        log.error("%s %s: %s", task, entity_id, reason)
        instruments.SWEEPER_ACTIONS.labels("failed").inc()
        counts["failed"] += 1


def start(client_factory: Any, redis_factory: Any, lease_seconds: float, max_attempts: int,
          enqueue: Callable[[str, str], None]) -> threading.Thread:
    """Sweep now and then every ``period_seconds(lease)`` in a daemon thread."""
    period = period_seconds(lease_seconds)
    stop = threading.Event()
    suspects = Suspects(confirm=lease_seconds / 2)

    def loop() -> None:
        while True:
            try:
                sweep(client_factory(), redis_factory(), lease_seconds, max_attempts, enqueue,
                      suspects)
            except Exception as exc:
                if is_transient(exc):  # the cluster or Redis is away: the next pass tries again
                    log.warning("sweeping lost jobs: %s (%s)", type(exc).__name__,
                                failure_reason(exc))
                else:
                    log.exception("sweeping lost jobs failed")
            if stop.wait(period):
                return

    thread = threading.Thread(target=loop, name="job-sweeper", daemon=True)
    thread.start()
    return thread
