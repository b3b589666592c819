"""Redis without a single point of failure: the primary dies under running jobs, the sentinels
promote the replica, and every job carries on.

A stack of its own: a primary, one replica and three Redis Sentinels (``tests/support/sentinel``,
real ``redis-server`` processes as ``scripts/sentinel.sh`` runs them), an API server and two
supervised workers given ``REDIS_URL=sentinel://...;...`` and ``WORKBENCH_REDIS_MASTER_NAME``
(broker, leases, fan-out, rate limits, generation numbers: every Redis client follows the
sentinels), a one-node OpenSearch of its own (``tests/support/os_cluster``: the lease sweepers of
workers on another Redis would take these jobs, whose leases they cannot see, for lost), and
the stand-in LLM made slow. While a split LLM judgment, a
UBI judgment and a split pointwise experiment run, the primary is SIGKILLed:

* every job ends COMPLETED, and what it wrote is what the same job writes on the undisturbed
  stack afterwards;
* each LLM prompt was sent once (a call in flight at the kill may be made again: at most every
  LLM call slot of every worker), and the judgment's ``usage.llmCalls`` is the calls the stand-in
  saw;
* every worker's consumer is the same process afterwards (none died or was restarted).

The failover time is printed: from the kill until the sentinels name the replica the primary,
and until the jobs move again (the stand-in LLM receives a new call).
"""

from __future__ import annotations

import collections
import signal
import socket
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest
import redis
from opensearchpy import OpenSearch
from opensearchpy.helpers import bulk

from tests.conftest import JUDGE_MODEL, load_ubi
from tests.integration.test_split_experiments import written
from tests.support import waiting
from tests.support.api import Api
from tests.support.os_cluster import Cluster
from tests.support.processes import Server, Worker, free_port
from tests.support.sentinel import SentinelGroup
from workbench.bench.llm_server import LLMServer

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]

ITEMS = 60  # items of the catalogue, three documents each
DOCS = 3
JUDGED = 160  # queries of the LLM judgment: split (over WORKBENCH_SPLIT_QUERIES), a call each
SHOP = 200  # queries of the pointwise experiment: split too
WORKERS = 2
POOL = 2  # WORKBENCH_WORKER_CONCURRENCY: jobs (pool processes) of one worker at once
LLM_CONCURRENCY = 2
#: LLM calls that may be in flight at once, so repeated if the kill loses their results
IN_FLIGHT = WORKERS * POOL * LLM_CONCURRENCY
#: a call received this soon after the kill was taken before it: not a sign of recovery
GRACE = 0.05


def http_port_pair() -> int:
    """A free port whose transport port (100 above it, ``Cluster``) is free too."""
    while True:
        port = free_port()
        if port + 100 < 65536:
            with socket.socket() as probe:
                try:
                    probe.bind(("127.0.0.1", port + 100))
                except OSError:
                    continue
            return port


class Stack:
    """The sentinel group, an OpenSearch node, the API and two workers, all given the
    sentinels."""

    def __init__(self, env: dict[str, str], data_dir: Path) -> None:
        self.cluster = Cluster(1, first_port=http_port_pair()).start()
        self.group = SentinelGroup(data_dir)
        self.env = {k: v for k, v in env.items() if k != "CELERY_BROKER_URL"}
        self.env.update(OPENSEARCH_URL=self.cluster.opensearch_url, REDIS_URL=self.group.url,
                        WORKBENCH_REDIS_MASTER_NAME=self.group.name,
                        WORKBENCH_QUEUE=f"sen-{uuid.uuid4().hex[:8]}",
                        WORKBENCH_SPLIT_QUERIES="100", WORKBENCH_WORKER_CONCURRENCY=str(POOL),
                        WORKBENCH_LLM_CONCURRENCY=str(LLM_CONCURRENCY))
        self.server = Server(self.env)
        self.api = Api(self.server.url)
        self.workers = [Worker(self.env) for _ in range(WORKERS)]

    def consumers(self) -> list[int]:
        """The pid of each worker's consumer (the supervisor's one child)."""
        return [child.pid for w in self.workers for child in psutil.Process(w.pid).children()]

    def stop(self) -> None:
        for worker in self.workers:
            worker.stop()
        self.server.stop()
        self.group.stop()
        self.cluster.stop()


@pytest.fixture(scope="module")
def stack(env: dict[str, str], tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    built = Stack(env, tmp_path_factory.mktemp("sentinel"))
    yield built
    built.stop()


@pytest.fixture(scope="module")
def direct(stack: Stack) -> OpenSearch:
    """The stack's own OpenSearch, not through the workbench."""
    return OpenSearch(stack.cluster.opensearch_url, timeout=60)


@pytest.fixture(scope="module")
def world(stack: Stack, direct: OpenSearch) -> dict[str, str]:
    """UBI data, products, query sets, an imported judgment and a configuration for the three
    jobs."""
    load_ubi(stack.env)
    api = stack.api
    index = f"test-sentinel-{uuid.uuid4().hex[:6]}"
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

    judged = made("/query_sets", {"name": "sentinel llm", "querySetQueries": [
        {"queryText": t} for t in texts[:JUDGED]]}, "query_set_id")
    shop = made("/query_sets", {"name": "sentinel shop", "querySetQueries": [
        {"queryText": t} for t in texts]}, "query_set_id")
    imported = made("/judgments", {
        "name": f"sentinel-{uuid.uuid4().hex[:6]}", "type": "IMPORT_JUDGMENT",
        "judgmentRatings": [{"query": t, "ratings": [
            {"docId": f"q{q % ITEMS}-d{d}", "rating": str((q + d) % 4)} for d in range(DOCS)]}
            for q, t in enumerate(texts)]}, "judgment_id")
    titles = made("/search_configurations", {
        "name": "sentinel titles", "index": index,
        "query": '{"query":{"match":{"title":"%SearchText%"}}}'}, "search_configuration_id")
    assert finished(api, f"/judgments/{imported}")["status"] == "COMPLETED"
    return {"judged": judged, "shop": shop, "imported": imported, "titles": titles}


def finished(api: Api, path: str, timeout: float = 300) -> dict[str, Any]:
    """A reply other than a 200 is asked again: the test takes the primary away."""
    return waiting.finished(api, path, timeout, interval=0.3, retry_errors=True)


def running(api: Api, path: str, moved: Callable[[], bool], timeout: float = 60) -> None:
    """Wait until the job is working (``moved`` says so) and not done."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        source = api.srw("GET", path).json["hits"]["hits"][0]["_source"]
        assert source["status"] == "PROCESSING", source
        if moved():
            return
        time.sleep(0.05)
    raise AssertionError(f"{path} did not start working in {timeout}s")


def jobs(world: dict[str, str]) -> dict[str, tuple[str, dict[str, Any], str]]:
    """name -> (route, body, id key) of the three jobs."""
    return {
        "llm": ("/judgments", {
            "name": f"sentinel-llm-{uuid.uuid4().hex[:6]}", "type": "LLM_JUDGMENT",
            "modelId": JUDGE_MODEL, "querySetId": world["judged"],
            "searchConfigurationList": [world["titles"]], "size": DOCS,
            "contextFields": ["title"], "overwriteCache": True}, "judgment_id"),
        "pointwise": ("/experiments", {
            "type": "POINTWISE_EVALUATION", "querySetId": world["shop"],
            "searchConfigurationList": [world["titles"]], "judgmentList": [world["imported"]],
            "size": DOCS}, "experiment_id"),
        "ubi": ("/judgments", {
            "name": f"sentinel-ubi-{uuid.uuid4().hex[:6]}", "type": "UBI_JUDGMENT",
            "clickModel": "coec", "maxRank": 20}, "judgment_id"),
    }


def start(api: Api, route: str, body: dict[str, Any], key: str) -> str:
    reply = api.srw("PUT", route, body)
    assert reply.status == 200, reply.data
    return f"{route}/{reply.json[key]}"


def outcome(direct: OpenSearch, name: str, doc: dict[str, Any]) -> Any:
    """What a finished job wrote, without what differs between two correct runs."""
    assert doc["status"] == "COMPLETED", (name, doc.get("metadata"), doc.get("results"))
    if name == "pointwise":
        return written(direct, doc)
    return {e["query"]: [(r["docId"], r["rating"]) for r in e["ratings"]]
            for e in doc["judgmentRatings"]}


def test_jobs_ride_out_the_primarys_death_and_the_replicas_promotion(
    stack: Stack, world: dict[str, str], llm: LLMServer, direct: OpenSearch,
) -> None:
    api, group = stack.api, stack.group
    consumers = stack.consumers()
    assert len(consumers) == WORKERS
    assert group.master_port() == group.primary.port
    llm.latency = 0.4  # the LLM judgment runs for a while (160 calls, 8 at a time)
    try:
        paths = {"llm": start(api, *jobs(world)["llm"])}
        running(api, paths["llm"], lambda: llm.calls >= 24)
        paths["pointwise"] = start(api, *jobs(world)["pointwise"])
        paths["ubi"] = start(api, *jobs(world)["ubi"])
        time.sleep(0.3)  # the pointwise and UBI jobs are taken (or queued behind the others)
        calls_before = llm.calls
        killed = time.monotonic()
        group.primary.stop(signal.SIGKILL)
        promoted = group.wait_promoted(group.replica.port) - killed
        deadline = time.monotonic() + 120
        while not any(r.received > killed + GRACE for r in llm.requests):
            assert time.monotonic() < deadline, "no LLM call in 120 s after the failover"
            time.sleep(0.02)
    finally:
        llm.latency = 0.0
    moving = min(r.received for r in llm.requests if r.received > killed + GRACE) - killed
    print(f"\nprimary SIGKILLed after {calls_before} of {JUDGED} LLM calls; the sentinels "
          f"promoted the replica {promoted:.2f} s after the kill; the jobs moved again "
          f"(a new LLM call) {moving:.2f} s after it")

    done = {name: finished(api, path) for name, path in paths.items()}
    prompts = [r.user for r in llm.requests]
    llm_doc = done["llm"]
    assert llm_doc["status"] == "COMPLETED", llm_doc["metadata"]
    assert llm_doc["metadata"]["successfulQueries"] == JUDGED

    # Nothing paid twice: each prompt once, but for calls in flight when the primary died.
    repeated = {p: n for p, n in collections.Counter(prompts).items() if n > 1}
    print(f"LLM calls {len(prompts)}, distinct {len(set(prompts))}, repeated "
          f"{sum(repeated.values()) - len(repeated)}; usage {llm_doc['metadata'].get('usage')}")
    assert len(set(prompts)) == JUDGED
    assert len(prompts) - JUDGED <= IN_FLIGHT, repeated
    assert llm_doc["metadata"]["usage"]["llmCalls"] == len(prompts)

    # The same jobs again on the undisturbed stack (now on the promoted replica): the reference.
    again = {name: finished(api, start(api, *job)) for name, job in jobs(world).items()}
    for name in done:
        assert outcome(direct, name, done[name]) == outcome(direct, name, again[name]), name
    assert stack.consumers() == consumers, "a consumer died and was started again"
    for worker in stack.workers:
        assert worker.alive()
        assert "Unrecoverable error" not in worker.log()


def test_the_primarys_and_the_sentinels_passwords_reach_every_client(tmp_path: Path) -> None:
    """A primary and sentinels that each ask for a password of their own: the shared-state
    client and the broker (kombu's Sentinel transport) both get through, and a wrong
    sentinel password is refused, not ignored."""
    from kombu import Connection

    from workbench.config import Config
    from workbench.jobs.celery_app import transport_options
    from workbench.redis_client import connect, primary_address

    group = SentinelGroup(tmp_path, password="primary-pw", sentinel_password="sentinel-pw")
    try:
        env = {"REDIS_URL": group.url, "WORKBENCH_REDIS_MASTER_NAME": group.name,
               "WORKBENCH_REDIS_SENTINEL_PASSWORD": "sentinel-pw"}
        config = Config.from_env(env)
        client = connect(config, socket_timeout=3, socket_connect_timeout=2)
        client.set("sentinel-check", "ok")
        assert group.primary.client.get("sentinel-check") == b"ok"
        assert primary_address(client) == f"127.0.0.1:{group.primary.port}"

        with Connection(config.celery_broker_url,
                        transport_options=transport_options(config)) as broker:
            queue = broker.SimpleQueue(f"sentinel-check-{uuid.uuid4().hex[:6]}")
            queue.put({"n": 1})
            message = queue.get(timeout=5)
            assert message.payload == {"n": 1}
            message.ack()
            queue.close()

        wrong = Config.from_env(dict(env, WORKBENCH_REDIS_SENTINEL_PASSWORD="wrong"))
        with pytest.raises(redis.RedisError):
            connect(wrong, socket_timeout=3, socket_connect_timeout=2).ping()
    finally:
        group.stop()
