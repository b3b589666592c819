"""Outages are waited out: a job whose cluster goes away for two minutes mid-run completes once it
is back (real processes: a test-owned OpenSearch node, API, worker, stand-in LLM).

Slow (about four minutes: two node starts and a two-minute outage), but it runs in CI.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
from opensearchpy import OpenSearch

from tests.support.api import Api
from tests.support.processes import REPO, Server, Worker
from tests.support.small_job import GENERATE, leases_gone, small_job
from workbench.bench.llm_server import LLMServer
from workbench.jobs import leases

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1200)]

OUTAGE = 120.0  # seconds the node stays down, as a node restart can take
BUDGET = "300"  # WORKBENCH_OUTAGE_BUDGET of the test worker
HOME = Path("/var/lib/workbench-outage") if os.geteuid() == 0 else None
SHARED_DIST = Path(os.environ.get("WORKBENCH_HOME", "/var/lib/workbench")) / "opensearch/dist"
INDEX = "search-relevance-judgment"


def _port_pair() -> int:
    """A free HTTP port whose transport port (+100) is free too."""
    for _ in range(50):
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            port = int(sock.getsockname()[1])
        if port + 100 >= 65536:
            continue
        with socket.socket() as sock:
            try:
                sock.bind(("127.0.0.1", port + 100))
            except OSError:
                continue
        return port
    raise RuntimeError("no free port pair")


class Node:
    """A single OpenSearch node of this test's own, run by scripts/opensearch.sh."""

    def __init__(self, home: Path, port: int) -> None:
        self.env = dict(os.environ, WORKBENCH_HOME=str(home), OPENSEARCH_PORT=str(port),
                        OPENSEARCH_HEAP="512m")
        self.url = f"http://127.0.0.1:{port}"

    def _script(self, action: str) -> None:
        subprocess.run([str(REPO / "scripts/opensearch.sh"), action], env=self.env, check=True,
                       cwd=REPO, stdout=subprocess.DEVNULL, timeout=300)

    def start(self) -> None:
        self._script("start")

    def stop(self) -> None:
        self._script("stop")


@pytest.fixture(scope="module")
def node() -> Iterator[Node]:
    if HOME is None or not (SHARED_DIST.is_dir() and any(SHARED_DIST.iterdir())):
        pytest.skip("needs root and the cached OpenSearch distribution")
    # The cached distribution, not a new download; the node (user wbsearch) must reach its home.
    shutil.rmtree(HOME, ignore_errors=True)
    (HOME / "opensearch").mkdir(parents=True)
    HOME.chmod(0o755)
    (HOME / "opensearch").chmod(0o755)
    (HOME / "opensearch/dist").symlink_to(SHARED_DIST)
    wb_node = Node(HOME, _port_pair())
    wb_node.start()
    try:
        yield wb_node
    finally:
        wb_node.stop()
        shutil.rmtree(HOME, ignore_errors=True)


@pytest.fixture(scope="module")
def oenv(env: dict[str, str], node: Node) -> dict[str, str]:
    return dict(env, OPENSEARCH_URL=node.url, WORKBENCH_QUEUE=f"outage-{uuid.uuid4().hex[:8]}",
                WORKBENCH_OUTAGE_BUDGET=BUDGET, WORKBENCH_WORKER_CONCURRENCY="1")


def test_a_job_waits_out_a_two_minute_cluster_outage(
    node: Node, oenv: dict[str, str], llm: LLMServer, redis_url: str,
) -> None:
    own = OpenSearch(hosts=[node.url], timeout=60)
    srv = Server(oenv)
    wrk = Worker(oenv)
    try:
        api = Api(srv.url)
        job = small_job(own, api, "outage-products")
        llm.latency = 3.0  # the job is mid-LLM-calls when the node goes
        judgment_id = job.start(api, "outage")
        deadline = time.monotonic() + 60
        while llm.calls < 1 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert llm.calls >= 1

        node.stop()
        down = time.monotonic()
        llm.latency = 0.0
        time.sleep(OUTAGE)
        r = redis.Redis.from_url(redis_url)
        assert r.get(leases.lease_key(GENERATE, judgment_id)) is not None  # still its own
        node.start()
        back = time.monotonic()

        deadline = back + 240
        while True:
            doc = own.get(index=INDEX, id=judgment_id)["_source"]
            if doc["status"] not in ("PROCESSING", "RETRYING") or time.monotonic() > deadline:
                break
            time.sleep(0.5)
        done = time.monotonic()
        released = leases_gone(r, judgment_id)
        print(f"node down {back - down:.0f}s (stop {OUTAGE:.0f}s + start); "
              f"back -> {doc['status']} in {done - back:.1f}s")
    finally:
        llm.latency = 0.0
        wrk.stop()
        srv.stop()
    log = wrk.log()
    assert doc["status"] == "COMPLETED", (doc.get("metadata"), log[-4000:])
    assert sorted(e["query"] for e in doc["judgmentRatings"]) == [
        "earbuds", "red shoes", "usb cable"]
    titles = {"p0", "p1", "p2", "p3", "p4"}
    for entry in doc["judgmentRatings"]:
        ids = [rating["docId"] for rating in entry["ratings"]]
        assert ids and len(ids) == len(set(ids)) and set(ids) <= titles, entry
        for rating in entry["ratings"]:
            float(rating["rating"])
    # Every call made is in the usage, the calls of the attempt the outage cut short included.
    assert doc["metadata"]["usage"]["llmCalls"] == llm.calls, (doc["metadata"]["usage"],
                                                                llm.calls)
    assert "trying again" in log  # waited out by the job itself ...
    assert "queued again" not in log  # ... not re-run by the sweeper
    assert released, r.mget([leases.lease_key(GENERATE, judgment_id),
                             leases.queued_key(GENERATE, judgment_id)])
