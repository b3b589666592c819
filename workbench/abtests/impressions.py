"""Recording what an interleaved search showed, as a UBI query, without slowing the search
(docs/ab-tests.md, "Impressions").

A search puts its impression on this process's queue and answers at once; one writer thread
sends the queue as a ``_bulk`` to ``WORKBENCH_AB_QUERIES_INDEX`` every
``WORKBENCH_AB_FLUSH_SECONDS`` (sooner once ``FLUSH_AT`` wait), as the service identity (the
caller searched; recording is the workbench's bookkeeping). A clean shutdown (``atexit``, which
a gunicorn worker and a Flask process both run) flushes what is left. A bulk the cluster refuses
as busy (429) or failing (5xx), or cannot be reached, is kept and sent again at the next flush;
the queue is bounded (``MAX_QUEUED``) so an unreachable cluster cannot exhaust memory: past it
the oldest impressions are dropped, with a WARNING that counts them.

Written here rather than with ``opensearchpy.helpers.parallel_bulk`` or a logging handler: those
send from the caller's thread or lose the batch on an error; what is needed is a single
background sender with retries and a bounded buffer, which is about 100 lines.
"""

from __future__ import annotations

import atexit
import json
import logging
import threading
from collections import deque
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from opensearchpy import OpenSearch
from opensearchpy.exceptions import ConnectionError as OpenSearchConnectionError
from opensearchpy.exceptions import TransportError

from workbench.abtests.definitions import ABTest
from workbench.store.bootstrap import ensure_index, load_spec
from workbench.store.identity import as_service

log = logging.getLogger(__name__)

#: what ``application`` says on an impression, so that UBI tools can tell them apart
APPLICATION = "search-relevance-ab-test"
FLUSH_AT = 500
MAX_QUEUED = 100_000


def impression(test: ABTest, query_id: str, query_text: str, client_id: str, index: str,
               start: int, shown: list[tuple[str, str]]) -> dict[str, Any]:
    """The UBI query document of one interleaved search: what ``_results`` reads back."""
    return {
        "timestamp": datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z"),
        "query_id": query_id,
        "user_query": query_text,
        "client_id": client_id,
        "application": APPLICATION,
        "indexes": [index],
        "query_response_hit_ids": [doc_id for doc_id, _ in shown],
        "query_attributes": {
            "ab_test_id": test.test_id,
            "ab_test_version": str(test.version),
            # with the version, these tell a test from an earlier one of the same id
            "ab_test_config_a_uuid": test.uuid_a,
            "ab_test_config_b_uuid": test.uuid_b,
            "ab_test_teams": [team for _, team in shown],
            "ab_test_from": str(start),
        },
    }


class ImpressionWriter:
    """The queue and writer thread of one process (started by the first impression, so after
    a server forks its workers)."""

    def __init__(self, client: OpenSearch, mappings_dir: str | Path, flush_seconds: float,
                 index: str) -> None:
        self.client = client
        self.mappings_dir = mappings_dir
        self.flush_seconds = flush_seconds
        self.index = index
        self._queue: deque[dict[str, Any]] = deque()
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._thread: threading.Thread | None = None
        self.dropped = 0

    def add(self, doc: dict[str, Any]) -> None:
        with self._lock:
            if len(self._queue) >= MAX_QUEUED:
                self._queue.popleft()
                self.dropped += 1
                if self.dropped in (1, 100) or self.dropped % 10_000 == 0:
                    log.warning("A/B impressions queue full (%d): %d dropped so far",
                                MAX_QUEUED, self.dropped)
            self._queue.append(doc)
            size = len(self._queue)
            if self._thread is None:
                self._start()
        if size >= FLUSH_AT:
            self._wake.set()

    def _start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="ab-impressions", daemon=True)
        self._thread.start()
        atexit.register(self.flush)

    def _run(self) -> None:
        while True:
            self._wake.wait(self.flush_seconds)
            self._wake.clear()
            self.flush()

    def flush(self) -> int:
        """Send what is queued; the number of impressions stored. What could not be sent stays
        queued, in order, for the next flush."""
        with self._lock:
            batch = list(self._queue)
            self._queue.clear()
        if not batch:
            return 0
        try:
            failed = self._send(batch)
        except (OpenSearchConnectionError, TransportError) as exc:
            log.warning("A/B impressions not stored yet (%d kept for the next flush): %s",
                        len(batch), _describe(exc))
            failed = batch
        if failed:
            with self._lock:
                self._queue.extendleft(reversed(failed))
        return len(batch) - len(failed)

    def _send(self, batch: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """The impressions the cluster did not store for a reason that may pass (429, 5xx);
        those refused for good (a 400: a mapping that cannot take them) are logged and
        dropped."""
        with as_service(self.client):
            # Created with the UBI mapping when missing (asked at every flush: an index deleted
            # meanwhile would otherwise come back with a dynamic mapping); an existing index
            # (the UBI plugin's, an application's) is used as it is.
            if not self.client.indices.exists(index=self.index):
                spec = load_spec(self.mappings_dir, "ubi/ubi_queries.json")
                ensure_index(self.client, spec, self.index)
            lines = []
            for doc in batch:
                lines.append(json.dumps({"index": {"_index": self.index}}))
                lines.append(json.dumps(doc, ensure_ascii=False))
            answer = self.client.bulk(body="\n".join(lines) + "\n")
        if not answer.get("errors"):
            return []
        retry, refused = [], []
        for doc, item in zip(batch, answer["items"], strict=True):
            result = item.get("index") or {}
            status = int(result.get("status") or 200)
            if status == 429 or status >= 500:
                retry.append(doc)
            elif status >= 300:
                refused.append(result.get("error"))
        if refused:
            log.warning("A/B impressions refused by [%s] (%d dropped): %s", self.index,
                        len(refused), refused[0])
        return retry


def _describe(exc: Exception) -> str:
    if isinstance(exc, TransportError):
        return f"{exc.status_code} {exc.error}"
    return type(exc).__name__
