"""Redis, the broker, restarts or freezes under running jobs, and the workers ride it out.

A stack of its own: a Redis that keeps an append-only file (as ``scripts/redis.sh`` and the
compose file run it), an API server and two supervised workers (``workbench worker``) on it,
the shared OpenSearch, and the stand-in LLM made slow so that jobs are still running when Redis
goes. While an LLM judgment and a split hybrid experiment run and a UBI judgment waits or runs,
Redis is stopped with SIGTERM or SIGKILL and started again, or frozen with SIGSTOP for 40 s:

* every worker's consumer is the same process afterwards (it was not restarted by its
  supervisor) and took new jobs;
* every job ends COMPLETED, and what it wrote is exactly what an undisturbed run writes: the
  LLM judgment has each pair rated once, the experiment's evaluation results and variants are
  the undisturbed run's, the UBI judgment's ratings are the undisturbed run's.
"""

from __future__ import annotations

import signal
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest
from opensearchpy import OpenSearch
from opensearchpy.helpers import bulk

from tests.conftest import JUDGE_MODEL
from tests.integration.test_split_experiments import written
from tests.support import waiting
from tests.support.api import Api
from tests.support.processes import RedisServer, Server, Worker, free_port
from tests.support.relay import TcpRelay
from workbench.bench.llm_server import LLMServer

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]

JUDGED = 24  # queries of the LLM judgment (not split: under WORKBENCH_SPLIT_QUERIES)
ITEMS = 60  # items of the catalogue, three documents each
SHOP = 200  # queries of the hybrid experiment (split, five a unit: a few seconds' work)
DOCS = 3
#: seconds Redis stays frozen: past kombu's check of an overdue consumer connection (26 s),
#: within the default lease (60 s)
FROZEN = 40


class Stack:
    """Redis (replaced on each restart), the API and two workers, all on that Redis."""

    def __init__(self, env: dict[str, str], data_dir: Path) -> None:
        self.redis = RedisServer(free_port(), str(data_dir))
        self.env = {k: v for k, v in env.items() if k != "CELERY_BROKER_URL"}
        self.env.update(REDIS_URL=self.redis.url, WORKBENCH_QUEUE=f"bro-{uuid.uuid4().hex[:8]}",
                        WORKBENCH_SPLIT_QUERIES="100", WORKBENCH_LLM_CONCURRENCY="2")
        self.server = Server(self.env)
        self.api = Api(self.server.url)
        self.workers = [Worker(self.env) for _ in range(2)]

    def consumers(self) -> list[int]:
        """The pid of each worker's consumer (the supervisor's one child)."""
        return [child.pid for w in self.workers for child in psutil.Process(w.pid).children()]

    def stop(self) -> None:
        for worker in self.workers:
            worker.stop()
        self.server.stop()
        self.redis.stop()


@pytest.fixture(scope="module")
def stack(env: dict[str, str], tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    built = Stack(env, tmp_path_factory.mktemp("broker-redis"))
    yield built
    built.stop()


@pytest.fixture(scope="module")
def world(stack: Stack, direct: OpenSearch, ubi_data: None) -> Iterator[dict[str, str]]:
    """Products, query sets, an imported judgment and configurations for the three jobs."""
    api = stack.api
    index = f"test-broker-{uuid.uuid4().hex[:6]}"
    direct.indices.create(index=index, body={"mappings": {"properties": {
        "title": {"type": "text"}, "description": {"type": "text"}}}})
    bulk(direct, ({"_index": index, "_id": f"q{q}-d{d}",
                   "title": f"item{q} {'red shoe' if d % 2 else 'blue hat'} {d}",
                   "description": f"item{q} {'red' if d < 2 else 'green'} thing"}
                  for q in range(ITEMS) for d in range(DOCS)), refresh=True)
    texts = [f"item{q % ITEMS} red shoe {q}" for q in range(SHOP)]

    def made(path: str, body: dict[str, Any], key: str) -> str:
        reply = api.srw("PUT", path, body)
        assert reply.status == 200, reply.data
        return str(reply.json[key])

    judged = made("/query_sets", {"name": "broker llm", "querySetQueries": [
        {"queryText": t} for t in texts[:JUDGED]]}, "query_set_id")
    shop = made("/query_sets", {"name": "broker shop", "querySetQueries": [
        {"queryText": t} for t in texts]}, "query_set_id")
    imported = made("/judgments", {
        "name": f"broker-{uuid.uuid4().hex[:6]}", "type": "IMPORT_JUDGMENT",
        "judgmentRatings": [{"query": t, "ratings": [
            {"docId": f"q{q % ITEMS}-d{d}", "rating": str((q + d) % 4)} for d in range(DOCS)]}
            for q, t in enumerate(texts)]}, "judgment_id")
    titles = made("/search_configurations", {
        "name": "broker titles", "index": index,
        "query": '{"query":{"match":{"title":"%SearchText%"}}}'}, "search_configuration_id")
    hybrid = made("/search_configurations", {
        "name": "broker hybrid", "index": index,
        "query": '{"query":{"hybrid":{"queries":[{"match":{"title":"%SearchText%"}},'
                 '{"match":{"description":"%SearchText%"}}]}}}'}, "search_configuration_id")
    assert finished(api, f"/judgments/{imported}")["status"] == "COMPLETED"
    yield {"judged": judged, "shop": shop, "imported": imported, "titles": titles,
           "hybrid": hybrid}
    direct.indices.delete(index=index)


def finished(api: Api, path: str, timeout: float = 300) -> dict[str, Any]:
    """A reply other than a 200 is asked again: these tests take services away."""
    return waiting.finished(api, path, timeout, interval=0.3, retry_errors=True)


def running(api: Api, path: str, moved: Callable[[dict[str, Any]], bool],
            timeout: float = 60) -> None:
    """Wait until the job is working (``moved`` says so of its document) and not done."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        source = api.srw("GET", path).json["hits"]["hits"][0]["_source"]
        assert source["status"] == "PROCESSING", source
        if moved(source):
            return
        time.sleep(0.05)
    raise AssertionError(f"{path} did not start working in {timeout}s")


def jobs(world: dict[str, str]) -> dict[str, tuple[str, dict[str, Any], str]]:
    """name -> (route, body, id key) of the three jobs."""
    return {
        "llm": ("/judgments", {
            "name": f"broker-llm-{uuid.uuid4().hex[:6]}", "type": "LLM_JUDGMENT",
            "modelId": JUDGE_MODEL, "querySetId": world["judged"],
            "searchConfigurationList": [world["titles"]], "size": DOCS,
            "contextFields": ["title"], "overwriteCache": True}, "judgment_id"),
        "hybrid": ("/experiments", {
            "type": "HYBRID_OPTIMIZER", "querySetId": world["shop"],
            "searchConfigurationList": [world["hybrid"]], "judgmentList": [world["imported"]],
            "size": DOCS}, "experiment_id"),
        "ubi": ("/judgments", {
            "name": f"broker-ubi-{uuid.uuid4().hex[:6]}", "type": "UBI_JUDGMENT",
            "clickModel": "coec", "maxRank": 20}, "judgment_id"),
    }


def start(api: Api, route: str, body: dict[str, Any], key: str) -> str:
    reply = api.srw("PUT", route, body)
    assert reply.status == 200, reply.data
    return f"{route}/{reply.json[key]}"


def ratings(doc: dict[str, Any]) -> dict[str, list[tuple[str, str]]]:
    """query -> its (docId, rating) pairs in stored order."""
    return {e["query"]: [(r["docId"], r["rating"]) for r in e["ratings"]]
            for e in doc["judgmentRatings"]}


def outcome(direct: OpenSearch, name: str, doc: dict[str, Any]) -> Any:
    """What a finished job wrote, without what differs between two correct runs."""
    assert doc["status"] == "COMPLETED", (name, doc.get("metadata"), doc.get("results"))
    if name == "hybrid":
        return written(direct, doc)
    return ratings(doc)


@pytest.mark.parametrize("fault", ["SIGTERM", "SIGKILL", "SIGSTOP"])
def test_workers_ride_out_a_broker_restart_under_running_jobs(
    stack: Stack, world: dict[str, str], llm: LLMServer, direct: OpenSearch, fault: str,
) -> None:
    api = stack.api
    consumers = stack.consumers()
    assert len(consumers) == 2
    llm.latency = 3.0  # the LLM judgment runs through the outage, the others go quicker
    try:
        paths = {"llm": start(api, *jobs(world)["llm"])}
        running(api, paths["llm"], lambda _: llm.calls > 0)
        paths["hybrid"] = start(api, *jobs(world)["hybrid"])
        # Started: its progress is written when it starts searching (jobs/control.start); the
        # first count of pairs done comes only after WRITE_INTERVAL (2 s), about when a run this
        # size ends, so waiting for it raced the job's end.
        running(api, paths["hybrid"], lambda doc: doc.get("progress") is not None)
        paths["ubi"] = start(api, *jobs(world)["ubi"])  # queued behind the others, or running
        time.sleep(1.5)  # the append-only file is written every second
        if fault == "SIGSTOP":
            stack.redis.proc.send_signal(signal.SIGSTOP)
            time.sleep(FROZEN)
            stack.redis.proc.send_signal(signal.SIGCONT)
        else:
            stack.redis = stack.redis.restart(getattr(signal, fault), down=3)
        print(f"\nRedis {fault}: LLM calls so far {llm.calls}")
    finally:
        llm.latency = 0.0
    done = {name: finished(api, path) for name, path in paths.items()}
    llm_doc = done["llm"]
    assert llm_doc["status"] == "COMPLETED", llm_doc["metadata"]
    assert llm_doc["metadata"]["successfulQueries"] == JUDGED
    for query, pairs in ratings(llm_doc).items():
        assert len(pairs) == DOCS and len({d for d, _ in pairs}) == DOCS, (query, pairs)

    # The same jobs again on the undisturbed stack: what each wrote is the reference.
    again = {name: finished(api, start(api, *job)) for name, job in jobs(world).items()}
    try:
        for name in done:
            assert outcome(direct, name, done[name]) == outcome(direct, name, again[name]), name
    finally:
        for doc in (done["hybrid"], again["hybrid"]):  # thousands of evaluation results each
            api.srw("DELETE", f"/experiments/{doc['id']}")
    assert stack.consumers() == consumers, "a consumer died and was started again"
    for worker in stack.workers:
        assert "Unrecoverable error" not in worker.log()


def test_an_idle_worker_consumes_again_after_a_broker_restart(stack: Stack,
                                                               world: dict[str, str]) -> None:
    consumers = stack.consumers()
    stack.redis = stack.redis.restart(signal.SIGKILL, down=2)
    time.sleep(2)  # the consumers notice the lost connection on their next poll
    reply = stack.api.srw("PUT", "/judgments", {
        "name": f"broker-after-{uuid.uuid4().hex[:6]}", "type": "IMPORT_JUDGMENT",
        "judgmentRatings": [{"query": "q", "ratings": [{"docId": "d", "rating": "1"}]}]})
    assert reply.status == 200, reply.data
    doc = finished(stack.api, f"/judgments/{reply.json['judgment_id']}", timeout=60)
    assert doc["status"] == "COMPLETED", doc["metadata"]
    assert stack.consumers() == consumers


def test_a_worker_cut_off_from_redis_finishes_its_job_once_the_network_is_back(
    stack: Stack, world: dict[str, str], llm: LLMServer,
) -> None:
    """A worker reaching Redis through a relay that is cut for 40 s (every byte held both
    ways, nothing reset, as a network cut looks to TCP) while it runs an LLM judgment."""
    relay = TcpRelay(free_port(), ("127.0.0.1", stack.redis.port))
    relay.start()
    queue = f"cut-{uuid.uuid4().hex[:8]}"
    server = Server(dict(stack.env, WORKBENCH_QUEUE=queue))
    worker = Worker(dict(stack.env, WORKBENCH_QUEUE=queue,
                         REDIS_URL=f"redis://127.0.0.1:{relay.port}/0"))
    try:
        api = Api(server.url)
        consumers = [c.pid for c in psutil.Process(worker.pid).children()]
        llm.latency = 3.0
        try:
            path = start(api, *jobs(world)["llm"])
            running(api, path, lambda _: llm.calls > 0)
            relay.cut()
            time.sleep(FROZEN)
            relay.mend()
        finally:
            llm.latency = 0.0
        doc = finished(api, path)
        assert doc["status"] == "COMPLETED", doc["metadata"]
        assert doc["metadata"]["successfulQueries"] == JUDGED
        for query, pairs in ratings(doc).items():
            assert len(pairs) == DOCS and len({d for d, _ in pairs}) == DOCS, (query, pairs)
        after = finished(api, start(api, *jobs(world)["ubi"]), timeout=60)
        assert after["status"] == "COMPLETED", after["metadata"]
        assert [c.pid for c in psutil.Process(worker.pid).children()] == consumers
        assert "Unrecoverable error" not in worker.log()
    finally:
        worker.stop()
        server.stop()
        relay.stop()


def fan_keys(stack: Stack, judgment_id: str) -> list[str]:
    """The fan-out keys of any run of the judgment's job still in Redis."""
    import redis

    client = redis.Redis.from_url(stack.redis.url)
    return [k.decode() for k in client.scan_iter(f"wb:fan:llm_judgment:{judgment_id}:*")]


@pytest.mark.parametrize("fault", ["SIGTERM", "SIGKILL"])
def test_a_split_llm_judgment_pays_each_prompt_once_across_a_broker_restart(
    stack: Stack, world: dict[str, str], llm: LLMServer, fault: str,
) -> None:
    """The LLM judgment of the 200 queries, split (one unit a query), runs on both workers
    beside a pointwise experiment and a UBI judgment when Redis is restarted: the job waits
    Redis out in place, so the stand-in model sees each prompt once (a call in flight at the
    moment may be made again: at most WORKBENCH_LLM_CONCURRENCY per worker), the usage counts
    exactly the calls made, and nothing of the run is left in Redis."""
    api = stack.api
    consumers = stack.consumers()
    tag = uuid.uuid4().hex[:6]  # texts of their own: no rating of them is cached yet
    reply = api.srw("PUT", "/query_sets", {"name": f"broker split {tag}", "querySetQueries": [
        {"queryText": f"item{q % ITEMS} red shoe {q} {tag}"} for q in range(SHOP)]})
    assert reply.status == 200, reply.data
    body = dict(jobs(world)["llm"][1], querySetId=reply.json["query_set_id"],
                overwriteCache=False)
    llm.latency = 0.3  # 200 calls, 2 at a time per process: the outage comes in the middle
    try:
        path = start(api, "/judgments", body, "judgment_id")
        running(api, path, lambda _: llm.calls >= 20)
        others = {"pointwise": start(api, "/experiments", {
            "type": "POINTWISE_EVALUATION", "querySetId": world["shop"],
            "searchConfigurationList": [world["titles"]], "judgmentList": [world["imported"]],
            "size": DOCS}, "experiment_id"), "ubi": start(api, *jobs(world)["ubi"])}
        time.sleep(1.2)  # the append-only file is written every second
        before = llm.calls
        stack.redis = stack.redis.restart(getattr(signal, fault), down=3)
        doc = finished(api, path)
    finally:
        llm.latency = 0.0
    assert 20 <= before < SHOP, "the outage did not come while the judgment ran"
    assert doc["status"] == "COMPLETED", doc["metadata"]
    assert doc["metadata"]["successfulQueries"] == SHOP
    for name, other in others.items():
        assert finished(api, other)["status"] == "COMPLETED", name
    prompts = [r.user for r in llm.requests]
    assert len(set(prompts)) == SHOP
    repeated = len(prompts) - len(set(prompts))
    assert repeated <= 2 * len(stack.workers), f"{repeated} prompts sent again"
    assert doc["metadata"]["usage"]["llmCalls"] == len(prompts)
    assert fan_keys(stack, doc["id"]) == []
    assert stack.consumers() == consumers
    api.srw("DELETE", f"/experiments/{others['pointwise'].rsplit('/', 1)[1]}")
