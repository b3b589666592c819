"""An API worker that read a request body above WORKBENCH_WEB_RECYCLE_BYTES is replaced by a
fresh process once it has answered (serving/gunicorn_app.py, ``Recycler``): the request that
triggered it succeeds, a request in flight on that worker gets its whole answer, and the arbiter
forks a new worker. A smaller body, or a larger pass-through body (streamed, never held), keeps
the worker."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from typing import Any

import psutil
import pytest
from opensearchpy import OpenSearch

from tests.support.api import Api, Reply
from tests.support.processes import Server, Worker

THRESHOLD = 64 * 1024
HEALTH = "cluster:monitor/health"


def import_body(ratings: int, name: str) -> bytes:
    return json.dumps({"name": name, "type": "IMPORT_JUDGMENT", "judgmentRatings": [
        {"query": f"recycle query {q}", "ratings": [
            {"docId": f"recycle-{q}-{d}", "rating": str(d % 4)} for d in range(10)]}
        for q in range(ratings // 10)]}).encode()


@pytest.fixture
def recycling_server(env: dict[str, str]) -> Iterator[Server]:
    """One worker (so every request meets the same one) that retires above 64 KiB."""
    srv = Server(dict(env, WORKBENCH_WEB_RECYCLE_BYTES=str(THRESHOLD)), workers=1)
    yield srv
    srv.stop()


def until(condition: Any, what: str, timeout: float = 60) -> Any:
    """Poll ``condition`` until it is truthy (a wait, not a measure of time)."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"never happened: {what}")
        time.sleep(0.1)


def wait_done(api: Api, judgment_id: str) -> str:
    def status() -> str | None:
        reply = api.srw("GET", f"/judgments/{judgment_id}",
                        params={"filter_path": "hits.hits._source.status"})
        value = reply.json["hits"]["hits"][0]["_source"]["status"]
        return None if value == "PROCESSING" else str(value)

    return str(until(status, f"judgment {judgment_id} to finish"))


def test_a_worker_that_read_a_large_body_is_replaced_after_answering(
        recycling_server: Server, worker: Worker, direct: OpenSearch, index_name: str) -> None:
    server = recycling_server
    api = Api(server.url)
    (first,) = server.worker_pids()
    created = []

    # Below the threshold, the worker stays.
    small = import_body(200, "recycle small")
    assert len(small) < THRESHOLD
    reply = api.srw("PUT", "/judgments", raw=small)
    assert reply.status == 200, reply.data
    created.append(reply.json["judgment_id"])
    # A pass-through body above it is streamed to the cluster, not held: the worker stays.
    bulk = "".join(json.dumps({"index": {"_index": index_name}}) + "\n"
                   + json.dumps({"n": n, "text": "lorem ipsum " * 20}) + "\n"
                   for n in range(400)).encode()
    assert len(bulk) > THRESHOLD
    reply = api.call("POST", "/_bulk", raw=bulk, headers={"Content-Type": "application/x-ndjson"})
    assert reply.status == 200 and reply.json["errors"] is False, reply.data[:300]
    assert server.worker_pids() == [first]

    # A request in flight on the worker: a cluster health that waits for nodes that never come,
    # answered by the cluster when its own timeout ends. It is in flight once the cluster runs it.
    slow: dict[str, Reply] = {}

    def wait_for_nodes() -> None:
        slow["reply"] = Api(server.url).call(
            "GET", "/_cluster/health", params={"wait_for_nodes": ">=99", "timeout": "4s"})

    thread = threading.Thread(target=wait_for_nodes)
    thread.start()
    until(lambda: direct.tasks.list(actions=HEALTH + "*")["nodes"], "the slow request to reach "
          "the cluster")

    large = import_body(3000, "recycle large")
    assert len(large) > THRESHOLD
    reply = Api(server.url).srw("PUT", "/judgments", raw=large)
    assert reply.status == 200, reply.data
    created.append(reply.json["judgment_id"])

    # The worker answers its request in flight, exits, and the arbiter forks a fresh one.
    thread.join()
    answer = slow["reply"]
    assert answer.status == 408, answer.data  # the cluster's own answer, whole
    assert answer.json["timed_out"] is True
    replacement = until(lambda: [pid for pid in server.worker_pids() if pid != first],
                        "a new worker")
    until(lambda: not psutil.pid_exists(first) or psutil.Process(first).status()
          == psutil.STATUS_ZOMBIE, "the old worker to exit")
    assert server.worker_pids() == replacement
    assert f"worker {first} retires" in server.log()

    # The fresh worker serves, and the import's job ran on what the request stored.
    assert api.call("GET", "/").status == 200
    for judgment_id in created:
        assert wait_done(api, judgment_id) == "COMPLETED"
        api.srw("DELETE", f"/judgments/{judgment_id}")
