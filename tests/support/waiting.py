"""Waiting for a job to end: the one polling loop the integration tests share.

A job's entity (a judgment, an experiment, a scheduled run, a test job's entity) says PROCESSING
while it runs, RETRYING while a transient fault is retried; a test polls it until it says
something else and then checks what it says. Each caller keeps its own timeout, its own pace
and its own idea of which statuses still mean running.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, TypeVar

from opensearchpy import OpenSearch

from tests.support.api import SrwCaller

T = TypeVar("T")

#: the statuses of a job that has not ended
RUNNING = ("PROCESSING", "RETRYING")


def poll(read: Callable[[], T | None], timeout: float, interval: float, failure: str) -> T:
    """What ``read()`` returns once it is not None, asked every ``interval`` seconds; an
    AssertionError saying ``failure`` when ``timeout`` seconds pass first."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = read()
        if value is not None:
            return value
        time.sleep(interval)
    raise AssertionError(f"{failure} after {timeout}s")


def finished(api: SrwCaller, path: str, timeout: float, *,
             running: tuple[str, ...] = RUNNING, interval: float = 0.2,
             retry_errors: bool = False) -> dict[str, Any]:
    """The ``_source`` of the SRW entity at ``path`` (``/judgments/<id>``, ...) once its status
    is not in ``running``. A reply other than a 200 fails the test, unless ``retry_errors``:
    a test of an outage, during which the API may answer an error for a while."""

    def read() -> dict[str, Any] | None:
        reply = api.srw("GET", path)
        if retry_errors and reply.status != 200:
            return None
        assert reply.status == 200, reply.data[:500]
        source: dict[str, Any] = reply.json["hits"]["hits"][0]["_source"]
        return None if source["status"] in running else source

    return poll(read, timeout, interval, f"{path} still running")


def settled(direct: OpenSearch, index: str, doc_id: str, timeout: float, *,
            running: tuple[str, ...] = RUNNING, interval: float = 0.2) -> dict[str, Any]:
    """The document ``doc_id`` of ``index``, read from the cluster itself (no API in between),
    once its status is not in ``running``."""

    def read() -> dict[str, Any] | None:
        source: dict[str, Any] = direct.get(index=index, id=doc_id)["_source"]
        return None if source["status"] in running else source

    return poll(read, timeout, interval, f"{index}/{doc_id} still running")
