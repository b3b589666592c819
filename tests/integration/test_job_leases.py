"""Leases, not ages: lost jobs are queued again, waiting jobs are never failed (real processes)."""

from __future__ import annotations

import signal
import time
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import psutil
import pytest
import redis
from opensearchpy import OpenSearch

from tests.support.api import Api
from tests.support.processes import Server, Worker
from tests.support.small_job import GENERATE, SmallJob, leases_gone, small_job, wait_lease
from tests.support.waiting import settled
from workbench.bench.llm_server import LLMServer
from workbench.jobs import leases

LEASE = "2"
INDEX = "search-relevance-judgment"


@pytest.fixture(scope="module")
def lenv(env: dict[str, str]) -> dict[str, str]:
    return dict(env, WORKBENCH_QUEUE=f"lease-{uuid.uuid4().hex[:8]}",
                WORKBENCH_LEASE_SECONDS=LEASE, WORKBENCH_WORKER_CONCURRENCY="1")


@pytest.fixture(scope="module")
def lapi(lenv: dict[str, str]) -> Iterator[Api]:
    srv = Server(lenv)
    yield Api(srv.url)
    srv.stop()


@pytest.fixture
def setup(lapi: Api, direct: OpenSearch) -> Iterator[SmallJob]:
    job = small_job(direct, lapi, f"test-lease-products-{uuid.uuid4().hex[:6]}")
    yield job
    direct.indices.delete(index=job.index)


def start_judgment(lapi: Api, setup: SmallJob) -> str:
    return setup.start(lapi, f"lease-{uuid.uuid4().hex[:8]}")


def wait_done(direct: OpenSearch, judgment_id: str, timeout: float = 120) -> dict[str, Any]:
    return settled(direct, INDEX, judgment_id, timeout)


def assert_no_duplicates(doc: dict[str, Any]) -> None:
    assert doc["status"] == "COMPLETED", doc["metadata"]
    queries = [e["query"] for e in doc["judgmentRatings"]]
    assert sorted(queries) == ["earbuds", "red shoes", "usb cable"]
    for entry in doc["judgmentRatings"]:
        ids = [r["docId"] for r in entry["ratings"]]
        assert len(ids) == len(set(ids)), entry


def owner(workers: list[Worker], lease_value: str) -> Worker:
    pid = int(lease_value.split(":")[-2])
    for wrk in workers:
        tree = {wrk.pid} | {c.pid for c in psutil.Process(wrk.pid).children(recursive=True)}
        if pid in tree:
            return wrk
    raise AssertionError(f"no worker runs pid {pid}")


def test_a_job_whose_whole_worker_is_killed_is_run_again(
    lenv: dict[str, str], lapi: Api, setup: SmallJob, llm: LLMServer,
    direct: OpenSearch, redis_url: str,
) -> None:
    r = redis.Redis.from_url(redis_url)
    first = Worker(lenv)
    try:
        llm.latency = 3.0
        judgment_id = start_judgment(lapi, setup)
        wait_lease(r, judgment_id)
        deadline = time.monotonic() + 30
        while llm.calls < 1 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert llm.calls >= 1
    finally:
        first.stop(signal.SIGKILL)  # the main process and its pool, as the OOM killer would
    killed = time.monotonic()
    llm.latency = 0.0
    second = Worker(lenv)
    try:
        doc = wait_done(direct, judgment_id, timeout=120)
        released = leases_gone(r, judgment_id)
    finally:
        second.stop()
    took = time.monotonic() - killed
    print(f"killed -> COMPLETED in {took:.1f}s")
    assert_no_duplicates(doc)
    assert took < 120
    assert released, r.mget([leases.lease_key(GENERATE, judgment_id),
                             leases.queued_key(GENERATE, judgment_id)])


def test_the_surviving_worker_finishes_a_job_of_a_killed_one(
    lenv: dict[str, str], lapi: Api, setup: SmallJob, llm: LLMServer,
    direct: OpenSearch, redis_url: str,
) -> None:
    r = redis.Redis.from_url(redis_url)
    workers = [Worker(lenv), Worker(lenv)]
    try:
        llm.latency = 3.0
        judgment_id = start_judgment(lapi, setup)
        victim = owner(workers, wait_lease(r, judgment_id))
        victim.stop(signal.SIGKILL)
        killed = time.monotonic()
        llm.latency = 0.0
        doc = wait_done(direct, judgment_id, timeout=120)
        print(f"killed -> COMPLETED by the survivor in {time.monotonic() - killed:.1f}s")
    finally:
        llm.latency = 0.0
        for wrk in workers:
            wrk.stop()
    assert_no_duplicates(doc)


def test_queued_jobs_are_never_failed_for_waiting(
    lenv: dict[str, str], lapi: Api, setup: SmallJob, llm: LLMServer,
    direct: OpenSearch,
) -> None:
    # One job at a time, each ~3 s: the last waits several lease TTLs (and sweeps) in the queue.
    wrk = Worker(lenv)
    try:
        llm.latency = 1.5
        ids = [start_judgment(lapi, setup) for _ in range(4)]
        docs = [wait_done(direct, judgment_id, timeout=120) for judgment_id in ids]
    finally:
        llm.latency = 0.0
        wrk.stop()
    for doc in docs:
        assert_no_duplicates(doc)
    # The sweeper may recover other tests' lost jobs (it looks at every running entity), never
    # one of these, which only waited.
    requeued = [line for line in wrk.log().splitlines() if "queued again" in line]
    assert not [line for line in requeued if any(i in line for i in ids)], requeued


def _lost_entity(direct: OpenSearch) -> str:
    entity_id = str(uuid.uuid4())
    ten_s_ago = (datetime.now(UTC) - timedelta(seconds=10)).strftime("%Y-%m-%dT%H:%M:%S.000Z")
    direct.index(index=INDEX, id=entity_id, refresh=True, body={
        "id": entity_id, "timestamp": ten_s_ago, "name": "lost message",
        "status": "PROCESSING", "type": "IMPORT_JUDGMENT",
        "metadata": {"judgmentRatings": [
            {"query": "red shoes", "ratings": [{"docId": "p0", "rating": "1"}]}]},
        "judgmentRatings": []})
    return entity_id


def test_a_job_whose_message_and_lease_are_lost_is_run_again(
    lenv: dict[str, str], direct: OpenSearch, redis_url: str,
) -> None:
    # PROCESSING with neither a queued marker nor a lease: a Redis that lost everything.
    entity_id = _lost_entity(direct)
    wrk = Worker(lenv)
    try:
        doc = wait_done(direct, entity_id, timeout=60)
    finally:
        wrk.stop()
    assert doc["status"] == "COMPLETED", doc
    assert doc["judgmentRatings"] == [
        {"query": "red shoes", "ratings": [{"docId": "p0", "rating": "1.0"}]}] or \
        doc["judgmentRatings"][0]["query"] == "red shoes"
    assert redis.Redis.from_url(redis_url).get(leases.attempts_key(GENERATE, entity_id)) is None


def test_a_job_lost_too_often_ends_error_with_why(
    lenv: dict[str, str], direct: OpenSearch, redis_url: str,
) -> None:
    entity_id = _lost_entity(direct)
    r = redis.Redis.from_url(redis_url)
    r.set(leases.attempts_key(GENERATE, entity_id), 3, ex=600)  # lost three times already
    wrk = Worker(lenv)
    try:
        doc = wait_done(direct, entity_id, timeout=60)
    finally:
        wrk.stop()
        r.delete(leases.attempts_key(GENERATE, entity_id))
    assert doc["status"] == "ERROR"
    assert doc["metadata"]["error"] == (
        "the job was lost 4 times (its worker died or its queued message was lost) and was "
        "queued again 3 times (WORKBENCH_JOB_MAX_ATTEMPTS)")
