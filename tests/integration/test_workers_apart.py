"""Workers on other "hosts": two workers, each in a network namespace of its own, reach Redis,
OpenSearch and the LLM only over a virtual link, and share the work the API queues.

This is the several-hosts deployment of docs/deployment.md (same queue, same Redis and cluster,
nothing else shared) with real network separation: each worker sees its own loopback and the
link to this host, nothing more.
"""

from __future__ import annotations

import json
import re
import sys
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from celery import Celery
from opensearchpy import OpenSearch

from tests.conftest import JUDGE_MODEL, LLM_KEY
from tests.support.api import Api
from tests.support.netns import Namespace, Relay
from tests.support.processes import Proc, Server, helper_units
from tests.support.waiting import finished
from workbench.bench.llm_server import LLMServer
from workbench.config import Config

JOBS = 4


class NamespacedWorker(Proc):
    """``workbench worker`` (one job at a time) inside ``ns``, named ``hostname``."""

    def __init__(self, ns: Namespace, env: dict[str, str], hostname: str) -> None:
        self.hostname = hostname
        args = [sys.executable, "-m", "workbench.cli", "worker", "--concurrency", "1"]
        super().__init__(ns.command(args, hostname), env, f"worker-{hostname}")

    def wait(self, broker: str, queue: str, timeout: float = 60) -> None:
        app = Celery("ping", broker=broker)
        deadline = time.monotonic() + timeout
        name = f"workbench@{self.hostname}-{queue}"
        while time.monotonic() < deadline:
            if not self.alive():
                raise RuntimeError(f"worker {self.hostname} exited:\n{self.log()[-4000:]}")
            if any(name in reply for reply in app.control.ping(timeout=1.0)):
                return
        raise RuntimeError(f"worker {self.hostname} did not answer:\n{self.log()[-4000:]}")


def relayed_env(env: dict[str, str], ns: Namespace, llm: LLMServer) -> dict[str, str]:
    """The session's environment with every service reached at the namespace's host address."""
    config = Config.from_env(env)
    opensearch = re.sub(r"//[^/:]+", f"//{ns.host_ip}", config.opensearch_url, count=1)
    redis = re.sub(r"//([^@/]*@)?[^/:]+", lambda m: f"//{m.group(1) or ''}{ns.host_ip}",
                   config.redis_url, count=1)
    llm_url = re.sub(r"//[^/:]+", f"//{ns.host_ip}", llm.openai_base_url, count=1)
    models = [{"id": JUDGE_MODEL, "name": "Test judge", "provider": "openai",
               "base_url": llm_url, "model": "judge-1", "api_key_env": "TEST_LLM_KEY"}]
    out = dict(env, OPENSEARCH_URL=opensearch, REDIS_URL=redis,
               WORKBENCH_MODELS=json.dumps(models), TEST_LLM_KEY=LLM_KEY)
    out.pop("CELERY_BROKER_URL", None)
    return out


def _port(url: str, default: int) -> int:
    match = re.search(r":(\d+)(?:/|$)", url.split("//", 1)[1])
    return int(match.group(1)) if match else default


@pytest.fixture(scope="module")
def apart(env: dict[str, str], llm_server: LLMServer) -> Iterator[dict[str, Any]]:
    queue = f"apart-{uuid.uuid4().hex[:8]}"
    env = dict(env, WORKBENCH_QUEUE=queue)
    config = Config.from_env(env)
    spaces = [Namespace(201), Namespace(202)]
    relays: list[Relay] = []
    workers: list[NamespacedWorker] = []
    try:
        for ns in spaces:
            for url, default in ((config.opensearch_url, 9200), (config.redis_url, 6379),
                                 (llm_server.openai_base_url, 80)):
                port = _port(url, default)
                relays.append(Relay(ns.host_ip, port, "127.0.0.1", port))
        for number, ns in enumerate(spaces):
            inside = dict(relayed_env(env, ns, llm_server), WORKBENCH_SPLIT_QUERIES="4")
            worker = NamespacedWorker(ns, inside, f"apart{number}")
            workers.append(worker)
        for worker in workers:
            worker.wait(config.celery_broker_url, queue)
        server = Server(env)
        yield {"api": Api(server.url), "workers": workers, "spaces": spaces, "queue": queue}
        server.stop()
    finally:
        for worker in workers:
            worker.stop()
        for relay in relays:
            relay.close()
        for ns in spaces:
            ns.delete()


def titles_and_queries(api: Api, index: str, texts: list[str]) -> tuple[str, str]:
    """A search configuration matching titles of ``index``, and a query set of ``texts``."""
    config = api.srw("PUT", "/search_configurations", {
        "name": f"apart {index}", "index": index,
        "query": '{"query":{"match":{"title":"%SearchText%"}}}'}).json["search_configuration_id"]
    query_set = api.srw("PUT", "/query_sets", {"name": f"apart {index}", "querySetQueries": [
        {"queryText": text} for text in texts]}).json["query_set_id"]
    return str(config), str(query_set)


def test_a_namespace_reaches_only_the_host_link(apart: dict[str, Any]) -> None:
    ns = apart["spaces"][0]
    routes = ns.run(["ip", "-o", "addr"]).stdout
    assert ns.ns_ip in routes and "127.0.0.1" in routes
    assert len([line for line in routes.splitlines() if " inet " in line]) == 2
    # The host's loopback services are not there: 127.0.0.1 is the namespace's own.
    probe = ns.run([sys.executable, "-c",
                    "import socket; socket.create_connection(('127.0.0.1', 9200), 2)"])
    assert probe.returncode != 0 and "Connection refused" in probe.stderr


def test_two_workers_apart_share_the_queued_jobs(apart: dict[str, Any], llm: LLMServer,
                                                 direct: OpenSearch) -> None:
    api: Api = apart["api"]
    index = f"test-apart-{uuid.uuid4().hex[:6]}"
    for number in range(6):
        direct.index(index=index, id=f"d{number}", body={"title": f"red shoes model {number}"},
                     refresh=True)
    try:
        config, query_set = titles_and_queries(api, index, ["red shoes"])
        llm.latency = 1.0  # each job holds its worker for a while
        ids = []
        for _ in range(JOBS):
            reply = api.srw("PUT", "/judgments", {
                "name": "apart", "type": "LLM_JUDGMENT", "modelId": JUDGE_MODEL,
                "querySetId": query_set, "searchConfigurationList": [config], "size": 6,
                "contextFields": ["title"], "overwriteCache": True})
            assert reply.status == 200, reply.data
            ids.append(reply.json["judgment_id"])
        deadline = time.monotonic() + 120
        docs: dict[str, Any] = {}
        while time.monotonic() < deadline and len(docs) < JOBS:
            for judgment_id in ids:
                doc = api.srw("GET", f"/judgments/{judgment_id}").json["hits"]["hits"][0][
                    "_source"]
                if doc["status"] not in ("PROCESSING", "RETRYING"):
                    docs[judgment_id] = doc
            time.sleep(0.3)
    finally:
        llm.latency = 0.0
        direct.indices.delete(index=index)
    assert {d["status"] for d in docs.values()} == {"COMPLETED"}, docs
    assert all(len(d["judgmentRatings"][0]["ratings"]) == 6 for d in docs.values())
    ran = {worker.hostname: [i for i in ids if f"judgment {i}:" in worker.log()]
           for worker in apart["workers"]}
    assert sorted(i for jobs in ran.values() for i in jobs) == sorted(ids), ran
    assert all(ran.values()), ran  # both workers, each in its namespace, took jobs


def test_one_job_split_across_both_workers(apart: dict[str, Any], llm: LLMServer,
                                           direct: OpenSearch) -> None:
    """One judgment of 8 queries (the workers split from 4): the worker that runs it publishes
    8 units, the other, in its own namespace, takes a share through Redis over the link."""
    api: Api = apart["api"]
    index = f"test-apart-{uuid.uuid4().hex[:6]}"
    for number in range(8):
        for hit in range(3):
            direct.index(index=index, id=f"q{number}-{hit}",
                         body={"title": f"item{number} red shoes {hit}"})
    direct.indices.refresh(index=index)
    before = [worker.log() for worker in apart["workers"]]
    try:
        config, query_set = titles_and_queries(
            api, index, [f"item{number} red shoes" for number in range(8)])
        llm.latency = 1.0
        reply = api.srw("PUT", "/judgments", {
            "name": "apart split", "type": "LLM_JUDGMENT", "modelId": JUDGE_MODEL,
            "querySetId": query_set, "searchConfigurationList": [config], "size": 3,
            "contextFields": ["title"], "overwriteCache": True})
        assert reply.status == 200, reply.data
        judgment_id = reply.json["judgment_id"]
        doc = finished(api, f"/judgments/{judgment_id}", 120, interval=0.3)
    finally:
        llm.latency = 0.0
        direct.indices.delete(index=index)
    assert doc["status"] == "COMPLETED", doc
    assert len(doc["judgmentRatings"]) == 8
    assert all(len(e["ratings"]) == 3 for e in doc["judgmentRatings"])
    logs = [worker.log()[len(old):] for worker, old in zip(apart["workers"], before, strict=True)]
    parent = [f"llm_judgment {judgment_id} split into 8 units" in text for text in logs]
    assert parent.count(True) == 1, logs
    helper_log = logs[parent.index(False)]
    assert helper_units(helper_log) >= 1, helper_log
