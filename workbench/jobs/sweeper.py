"""No job stays PROCESSING forever: entities whose job has run longer than
``WORKBENCH_JOB_TIMEOUT`` (a worker died and nothing redelivered it) are marked ERROR.

Runs in every ``workbench worker`` main process, on a timer; the update is conditional on the
status so two sweepers never fight and a job that finishes meanwhile keeps its result.
"""

from __future__ import annotations

import logging
import threading
from datetime import UTC, datetime, timedelta
from typing import Any

from opensearchpy import OpenSearch

from workbench.store.indices import EXPERIMENT_INDEX, JUDGMENT_INDEX

log = logging.getLogger(__name__)

# index -> (statuses that mean "a job is running", fields written when it is lost)
WATCHED: dict[str, tuple[tuple[str, ...], str]] = {
    JUDGMENT_INDEX: (
        ("PROCESSING", "RETRYING"),
        "ctx._source.status = 'ERROR'; "
        "if (ctx._source.metadata == null) { ctx._source.metadata = [:]; } "
        "ctx._source.metadata.error = params.reason;",
    ),
    EXPERIMENT_INDEX: (
        ("PROCESSING",),
        "ctx._source.status = 'ERROR'; ctx._source.results = [['error': params.reason]];",
    ),
}


def sweep(client: OpenSearch, timeout_seconds: int) -> int:
    """Mark every entity stuck longer than the timeout; returns how many were marked."""
    cutoff = (datetime.now(UTC) - timedelta(seconds=timeout_seconds)).strftime(
        "%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"
    reason = (f"the job did not finish within {timeout_seconds} seconds "
              "(WORKBENCH_JOB_TIMEOUT); its worker was lost")
    marked = 0
    for index, (statuses, script) in WATCHED.items():
        status_field = "status.keyword" if index == JUDGMENT_INDEX else "status"
        query: dict[str, Any] = {"bool": {"filter": [
            {"terms": {status_field: list(statuses)}},
            {"range": {"timestamp": {"lt": cutoff}}},
        ]}}
        if not client.indices.exists(index=index):
            continue
        answer = client.update_by_query(
            index=index, body={"query": query, "script": {"source": script,
                                                            "params": {"reason": reason}}},
            refresh=True, conflicts="proceed")
        marked += int(answer.get("updated", 0))
    if marked:
        log.warning("marked %d stuck job(s) ERROR", marked)
    return marked


def start(client_factory: Any, timeout_seconds: int) -> threading.Thread:
    """Sweep every ``min(60, timeout / 4)`` seconds in a daemon thread."""
    period = max(1.0, min(60.0, timeout_seconds / 4))
    stop = threading.Event()

    def loop() -> None:
        while not stop.wait(period):
            try:
                sweep(client_factory(), timeout_seconds)
            except Exception:
                log.exception("sweeping stuck jobs failed")

    thread = threading.Thread(target=loop, name="job-sweeper", daemon=True)
    thread.start()
    return thread
