"""``workbench worker`` supervises its consumer, and a killed worker's jobs come back quickly.

Real processes: supervised workers (``jobs.supervisor``) on queues of their own, the shared
OpenSearch and Redis, the stand-in LLM made slow so that a job is mid-way when its worker dies.

* A consumer killed outright is started again by its supervisor and takes new jobs;
  ``workbench status`` says it was restarted, and DOWN once it keeps dying.
* A whole worker (supervisor, consumer and pool) killed mid-job, with the default lease of
  60 s: a replacement worker on the same host finishes the job within 30 s of starting, a split
  job included, without rating any pair twice.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from typing import Any

import psutil
import pytest
from opensearchpy import OpenSearch

from tests.conftest import JUDGE_MODEL
from tests.support.api import Api
from tests.support.processes import Server, Worker
from tests.support.small_job import item_catalogue
from tests.support.waiting import finished
from workbench.bench.llm_server import LLMServer

QUERIES = 12
DOCS = 3


@pytest.fixture(scope="module")
def wenv(env: dict[str, str]) -> dict[str, str]:
    """The session's environment (the default lease) with a queue of its own, splitting any
    judgment of 4 queries or more."""
    assert "WORKBENCH_LEASE_SECONDS" not in env
    return dict(env, WORKBENCH_QUEUE=f"sup-{uuid.uuid4().hex[:8]}", WORKBENCH_SPLIT_QUERIES="4",
                WORKBENCH_LLM_CONCURRENCY="2")


@pytest.fixture(scope="module")
def wapi(wenv: dict[str, str]) -> Iterator[Api]:
    srv = Server(wenv)
    yield Api(srv.url)
    srv.stop()


@pytest.fixture(scope="module")
def catalogue(wapi: Api, direct: OpenSearch) -> Iterator[dict[str, str]]:
    index = f"test-sup-{uuid.uuid4().hex[:6]}"
    yield item_catalogue(direct, wapi, index, QUERIES, DOCS)
    direct.indices.delete(index=index)


def consumer(worker: Worker, other_than: int | None = None, timeout: float = 30) -> int:
    """The pid of the worker's consumer (its supervisor's child), once it is not ``other_than``
    and answers as a Celery worker."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        children = psutil.Process(worker.pid).children()
        if children and children[0].pid != other_than and "ready." in worker.log().rsplit(
                "job consumer started", 1)[-1]:
            return children[0].pid
        time.sleep(0.1)
    raise AssertionError(f"no new consumer in {timeout}s:\n{worker.log()[-3000:]}")


def status(env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "workbench.cli", "status"], env=env,
                          capture_output=True, text=True, timeout=60)


def imported(api: Api) -> dict[str, Any]:
    reply = api.srw("PUT", "/judgments", {
        "name": f"sup-{uuid.uuid4().hex[:6]}", "type": "IMPORT_JUDGMENT",
        "judgmentRatings": [{"query": "q", "ratings": [{"docId": "d", "rating": "2"}]}]})
    assert reply.status == 200, reply.data
    return done(api, reply.json["judgment_id"], timeout=60)


def done(api: Api, judgment_id: str, timeout: float) -> dict[str, Any]:
    return finished(api, f"/judgments/{judgment_id}", timeout, interval=0.1)


def test_a_killed_consumer_is_started_again_and_takes_new_jobs(wenv: dict[str, str],
                                                               wapi: Api) -> None:
    worker = Worker(wenv)
    try:
        first = consumer(worker)
        psutil.Process(first).send_signal(signal.SIGKILL)
        second = consumer(worker, other_than=first)
        assert imported(wapi)["status"] == "COMPLETED"
        line = f"(supervisor pid {worker.pid}, queue {wenv['WORKBENCH_QUEUE']})"
        report = status(wenv)
        assert f"{line} was restarted: 1 exit(s) in the last 10 min, last killed by SIGKILL" \
            in report.stdout, report.stdout

        third = second
        for _ in range(2):  # three deaths within minutes: it keeps dying
            psutil.Process(third).send_signal(signal.SIGKILL)
            third = consumer(worker, other_than=third)
        report = status(wenv)
        assert f"{line} keeps dying: 3 exit(s) in the last 10 min, last killed by SIGKILL" \
            in report.stdout, report.stdout
        assert report.returncode == 1
        assert "workers    DOWN" in report.stdout
        assert imported(wapi)["status"] == "COMPLETED"  # and it still works
    finally:
        worker.stop()
    log = worker.log()
    assert log.count("stopped unexpectedly") == 3
    assert "starting it again in 1 s" in log and "starting it again in 4 s" in log
    assert "Warm shutdown" in log.rsplit("job consumer started", 1)[-1]  # asked to stop


def test_a_whole_worker_killed_mid_job_is_finished_soon_after_a_new_one_starts(
    wenv: dict[str, str], wapi: Api, catalogue: dict[str, str], llm: LLMServer,
) -> None:
    first = Worker(wenv)
    llm.latency = 2.0
    try:
        reply = wapi.srw("PUT", "/judgments", {
            "name": f"sup-llm-{uuid.uuid4().hex[:6]}", "type": "LLM_JUDGMENT",
            "modelId": JUDGE_MODEL, "querySetId": catalogue["querySetId"],
            "searchConfigurationList": [catalogue["config"]], "size": DOCS,
            "contextFields": ["title"], "overwriteCache": True})
        assert reply.status == 200, reply.data
        judgment_id = reply.json["judgment_id"]
        deadline = time.monotonic() + 30
        while llm.calls < 4 and time.monotonic() < deadline:  # parent and helpers at work
            time.sleep(0.05)
        assert llm.calls >= 4
        tree = [first.pid] + [c.pid for c in psutil.Process(first.pid).children(True)]
    finally:
        first.stop(signal.SIGKILL)  # the supervisor's group; the rest die with their parents
        llm.latency = 0.0
    deadline = time.monotonic() + 10
    while any(psutil.pid_exists(pid) and psutil.Process(pid).status() != "zombie"
              for pid in tree) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not [pid for pid in tree if psutil.pid_exists(pid)
                and psutil.Process(pid).status() != "zombie"], "a process outlived its worker"
    started = time.monotonic()
    second = Worker(wenv)
    try:
        doc = done(wapi, judgment_id, timeout=120)
        took = time.monotonic() - started
    finally:
        second.stop()
    print(f"\nreplacement worker started -> COMPLETED in {took:.1f}s")
    assert doc["status"] == "COMPLETED", doc["metadata"]
    assert doc["metadata"]["successfulQueries"] == QUERIES
    for entry in doc["judgmentRatings"]:
        ids = [r["docId"] for r in entry["ratings"]]
        assert len(ids) == DOCS == len(set(ids)), entry
    assert took < 30
