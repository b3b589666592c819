"""A worker's SIGTERM hands its running job over to another worker (issue 48; jobs/handover.py).

Real processes: supervised ``workbench worker`` processes on a queue of their own, the shared
OpenSearch and Redis, the stand-in LLM made slow so that a judgment is mid-way when its worker
is asked to stop. Each test judges a catalogue of its own (a cold judgment cache) that is a
copy of the reference run's, so an undisturbed run's ratings are the expected ones, and the
stand-in server's request log says how often each prompt was paid for.

* Two workers: the one running an LLM judgment gets SIGTERM. It exits within the documented
  bound, the judgment ends COMPLETED on the other worker with the reference ratings, every
  prompt was sent once (the ratings paid before the stop come from the judgment cache).
* One worker: after its SIGTERM the judgment waits, queued (PROCESSING, marker ``handover``,
  no lease); a worker started later completes it the same way.
* A split judgment (parent and helpers on both workers): the same, for the parent's worker.
* ``WORKBENCH_WORKER_STOP=finish``: the old warm shutdown, the job finishes before the exit.
"""

from __future__ import annotations

import os
import signal
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from typing import Any

import psutil
import pytest
import redis
from opensearchpy import OpenSearch

from tests.conftest import JUDGE_MODEL
from tests.support.api import Api
from tests.support.processes import Server, Worker
from tests.support.small_job import GENERATE, item_catalogue, leases_gone, wait_lease
from tests.support.waiting import settled
from workbench.bench.llm_server import LLMServer
from workbench.jobs import leases

QUERIES = 12
DOCS = 3
INDEX = "search-relevance-judgment"
#: WORKBENCH_WORKER_STOP_SECONDS (the default) plus the supervisor's margin: the bound
STOP_SECONDS = 20
BOUND = STOP_SECONDS + 5


@pytest.fixture(scope="module")
def henv(env: dict[str, str]) -> dict[str, str]:
    """A queue of its own, one job per worker, two LLM calls at once per job, never split."""
    return dict(env, WORKBENCH_QUEUE=f"hand-{uuid.uuid4().hex[:8]}",
                WORKBENCH_WORKER_CONCURRENCY="1", WORKBENCH_LLM_CONCURRENCY="2",
                WORKBENCH_SPLIT_QUERIES="0")


@pytest.fixture(scope="module")
def hapi(henv: dict[str, str]) -> Iterator[Api]:
    srv = Server(henv, workers=1)
    yield Api(srv.url)
    srv.stop()


@pytest.fixture(scope="module")
def indices(direct: OpenSearch) -> Iterator[list[str]]:
    made: list[str] = []
    yield made
    for index in made:
        direct.indices.delete(index=index, ignore_unavailable=True)


def catalogue(direct: OpenSearch, api: Api, indices: list[str]) -> dict[str, str]:
    """A fresh copy of the catalogue (a new index: nothing of it in the judgment cache)."""
    index = f"test-hand-{uuid.uuid4().hex[:8]}"
    indices.append(index)
    return item_catalogue(direct, api, index, QUERIES, DOCS)


def start(api: Api, world: dict[str, str]) -> str:
    """An LLM judgment over ``world``, reading and writing the judgment cache."""
    reply = api.srw("PUT", "/judgments", {
        "name": f"hand-{uuid.uuid4().hex[:6]}", "type": "LLM_JUDGMENT", "modelId": JUDGE_MODEL,
        "querySetId": world["querySetId"], "searchConfigurationList": [world["config"]],
        "size": DOCS, "contextFields": ["title"]})
    assert reply.status == 200, reply.data
    return str(reply.json["judgment_id"])


def done(direct: OpenSearch, judgment_id: str, timeout: float = 120) -> dict[str, Any]:
    return settled(direct, INDEX, judgment_id, timeout)


@pytest.fixture(scope="module")
def reference(henv: dict[str, str], hapi: Api, direct: OpenSearch, indices: list[str],
              llm_server: LLMServer) -> list[dict[str, Any]]:
    """The ratings of an undisturbed run of the judgment, on a copy of the catalogue."""
    llm_server.latency = 0.0
    worker = Worker(henv)
    try:
        doc = done(direct, start(hapi, catalogue(direct, hapi, indices)))
    finally:
        worker.stop()
    assert doc["status"] == "COMPLETED", doc["metadata"]
    assert doc["metadata"]["usage"]["llmCalls"] == QUERIES  # one prompt per query
    ratings: list[dict[str, Any]] = doc["judgmentRatings"]
    assert len(ratings) == QUERIES and all(len(e["ratings"]) == DOCS for e in ratings)
    return ratings


def workers_ready(henv: dict[str, str], count: int) -> list[Worker]:
    """``count`` workers of the queue, each one's consumer ready (``Worker`` waits for a ping
    answered by any worker of the queue, which may be another one's)."""
    workers = [Worker(henv) for _ in range(count)]
    deadline = time.monotonic() + 60
    while not all(" ready." in w.log() for w in workers):
        assert time.monotonic() < deadline, [w.log()[-2000:] for w in workers]
        time.sleep(0.1)
    return workers


def owner(workers: list[Worker], lease_value: str) -> Worker:
    pid = int(lease_value.split(":")[-2])
    for wrk in workers:
        tree = {wrk.pid} | {c.pid for c in psutil.Process(wrk.pid).children(recursive=True)}
        if pid in tree:
            return wrk
    raise AssertionError(f"no worker runs pid {pid}")


def wait_calls(llm: LLMServer, count: int, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while llm.calls < count:
        assert time.monotonic() < deadline, f"only {llm.calls} LLM calls in {timeout}s"
        time.sleep(0.05)


def terminate(worker: Worker) -> float:
    """SIGTERM to ``workbench worker`` (what ``docker stop`` and Kubernetes send to the
    container's first process); the seconds until it exited, which it must within the bound."""
    sent = time.monotonic()
    os.kill(worker.pid, signal.SIGTERM)
    worker.proc.wait(BOUND + 10)
    took = time.monotonic() - sent
    assert worker.proc.returncode == 0, worker.log()[-3000:]
    assert took < BOUND, f"exited {took:.1f}s after SIGTERM"
    return took


def prompts_paid(llm: LLMServer, since: int) -> Counter[str]:
    """How often each prompt (user message) was sent, from request ``since`` on."""
    return Counter(request.user for request in llm.requests[since:])


def assert_completed_as_reference(doc: dict[str, Any], reference: list[dict[str, Any]]) -> None:
    assert doc["status"] == "COMPLETED", doc["metadata"]
    assert doc["judgmentRatings"] == reference
    assert doc["metadata"]["successfulQueries"] == QUERIES


def test_sigterm_hands_the_running_job_to_the_other_worker(
    henv: dict[str, str], hapi: Api, direct: OpenSearch, indices: list[str], llm: LLMServer,
    reference: list[dict[str, Any]], redis_url: str,
) -> None:
    r = redis.Redis.from_url(redis_url)
    world = catalogue(direct, hapi, indices)
    workers = workers_ready(henv, 2)
    try:
        llm.latency = 1.0
        judgment_id = start(hapi, world)
        victim = owner(workers, wait_lease(r, judgment_id))
        other = next(w for w in workers if w is not victim)
        wait_calls(llm, 4)
        signalled = time.monotonic()
        took = terminate(victim)
        doc = done(direct, judgment_id)
        completed = time.monotonic() - signalled
        gone = leases_gone(r, judgment_id)  # released just after the final write
    finally:
        llm.latency = 0.0
        for wrk in workers:
            wrk.stop()
    usage = doc["metadata"]["usage"]
    print(f"\nSIGTERM -> worker exited in {took:.1f}s; -> COMPLETED on the other worker in "
          f"{completed:.1f}s ({QUERIES - usage['llmCalls']} of {QUERIES} prompts paid by the "
          "first worker)")
    assert_completed_as_reference(doc, reference)
    paid = prompts_paid(llm, 0)
    assert sum(paid.values()) == QUERIES and set(paid.values()) == {1}, paid
    # the other worker asked only what the first had not paid for; the rest came from the cache
    assert 4 <= QUERIES - usage["llmCalls"] < QUERIES
    assert usage["cachedRatings"] == DOCS * (QUERIES - usage["llmCalls"])
    assert gone
    log = victim.log()
    assert f"{GENERATE} for {judgment_id}: handed over to another worker" in log
    assert "Traceback" not in log and "ended ERROR" not in log
    assert f"{GENERATE}[{GENERATE}:{judgment_id}] succeeded" in other.log()


def test_with_no_other_worker_the_job_waits_queued_for_the_next(
    henv: dict[str, str], hapi: Api, direct: OpenSearch, indices: list[str], llm: LLMServer,
    reference: list[dict[str, Any]], redis_url: str,
) -> None:
    r = redis.Redis.from_url(redis_url)
    world = catalogue(direct, hapi, indices)
    first = Worker(henv)
    llm.latency = 1.0
    try:
        judgment_id = start(hapi, world)
        wait_lease(r, judgment_id)
        wait_calls(llm, 3)
    finally:
        terminate(first)
    llm.latency = 0.0
    paid_before = llm.calls
    time.sleep(3)  # nobody takes it meanwhile
    waiting = direct.get(index=INDEX, id=judgment_id)["_source"]
    marker, lease = leases.state(r, GENERATE, judgment_id)
    assert waiting["status"] == "PROCESSING"
    assert (marker, lease) == (b"handover", None)
    second = Worker(henv)
    try:
        doc = done(direct, judgment_id)
    finally:
        second.stop()
    assert_completed_as_reference(doc, reference)
    paid = prompts_paid(llm, 0)
    assert sum(paid.values()) == QUERIES and set(paid.values()) == {1}, paid
    assert doc["metadata"]["usage"]["llmCalls"] == QUERIES - paid_before


def test_a_split_judgment_is_handed_over_by_its_parents_worker(
    henv: dict[str, str], hapi: Api, direct: OpenSearch, indices: list[str], llm: LLMServer,
    reference: list[dict[str, Any]], redis_url: str,
) -> None:
    # split one unit a query; a parent or helper per slot, each one call at a time
    senv = dict(henv, WORKBENCH_SPLIT_QUERIES="4", WORKBENCH_WORKER_CONCURRENCY="2",
                WORKBENCH_LLM_CONCURRENCY="1")
    r = redis.Redis.from_url(redis_url)
    world = catalogue(direct, hapi, indices)
    workers = workers_ready(senv, 2)
    try:
        llm.latency = 2.0
        judgment_id = start(hapi, world)
        victim = owner(workers, wait_lease(r, judgment_id))
        other = next(w for w in workers if w is not victim)
        wait_calls(llm, 4)
        assert "Task workbench.jobs.help[" in other.log()  # a helper of the run works there
        took = terminate(victim)
        doc = done(direct, judgment_id)
        left = list(r.scan_iter(f"wb:fan:*{judgment_id}*"))
    finally:
        llm.latency = 0.0
        for wrk in workers:
            wrk.stop()
    print(f"\nsplit: SIGTERM -> the parent's worker exited in {took:.1f}s")
    assert_completed_as_reference(doc, reference)
    paid = prompts_paid(llm, 0)
    assert sum(paid.values()) == QUERIES and set(paid.values()) == {1}, paid
    assert left == []
    log = victim.log()
    assert f"{GENERATE} for {judgment_id}: handed over to another worker" in log
    assert "Traceback" not in log and "ended ERROR" not in log


def test_a_job_that_does_not_stop_in_time_is_handed_over_by_force(
    henv: dict[str, str], hapi: Api, direct: OpenSearch, indices: list[str], llm: LLMServer,
    reference: list[dict[str, Any]], redis_url: str,
) -> None:
    # every call blocks 40 s: the job reaches no checkpoint within WORKBENCH_WORKER_STOP_SECONDS
    fenv = dict(henv, WORKBENCH_WORKER_STOP_SECONDS="3")
    r = redis.Redis.from_url(redis_url)
    world = catalogue(direct, hapi, indices)
    workers = workers_ready(fenv, 2)
    try:
        llm.latency = 40.0
        judgment_id = start(hapi, world)
        victim = owner(workers, wait_lease(r, judgment_id))
        wait_calls(llm, 2)
        llm.latency = 0.0  # for the calls the other worker makes
        sent = time.monotonic()
        os.kill(victim.pid, signal.SIGTERM)
        victim.proc.wait(30)
        took = time.monotonic() - sent
        doc = done(direct, judgment_id)
    finally:
        llm.latency = 0.0
        for wrk in workers:
            wrk.stop()
    print(f"\nforced: SIGTERM -> worker exited in {took:.1f}s")
    assert took < 3 + 5 + 1  # the supervisor's kill at 8 s included
    assert_completed_as_reference(doc, reference)
    # the two calls in flight were lost with the process: paid again by the other worker
    paid = prompts_paid(llm, 0)
    assert sum(paid.values()) == QUERIES + 2 and max(paid.values()) == 2, paid
    assert f"{GENERATE} for {judgment_id} did not stop within 3 s of the stop signal " \
           "(WORKBENCH_WORKER_STOP_SECONDS); handed over by force, its process exits" \
           in victim.log()


def test_finish_keeps_the_warm_shutdown_that_waits_for_the_job(
    henv: dict[str, str], hapi: Api, direct: OpenSearch, indices: list[str], llm: LLMServer,
    reference: list[dict[str, Any]], redis_url: str,
) -> None:
    r = redis.Redis.from_url(redis_url)
    world = catalogue(direct, hapi, indices)
    worker = Worker(dict(henv, WORKBENCH_WORKER_STOP="finish"))
    llm.latency = 0.5
    try:
        judgment_id = start(hapi, world)
        wait_lease(r, judgment_id)
        wait_calls(llm, 2)
        os.kill(worker.pid, signal.SIGTERM)
        worker.proc.wait(120)
        at_exit = direct.get(index=INDEX, id=judgment_id)["_source"]
    finally:
        llm.latency = 0.0
        worker.stop()
    assert_completed_as_reference(at_exit, reference)
    assert at_exit["metadata"]["usage"]["llmCalls"] == QUERIES
    assert "handed over" not in worker.log()
