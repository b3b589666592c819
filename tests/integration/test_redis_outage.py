"""Redis (broker and counters) goes down under a running workbench: every route that queues a
job answers 503 ``queue_unavailable_exception`` within a few seconds and leaves nothing behind
(no entity PROCESSING, a retried judgment back as it was); the stats answer 503; and everything
works again once Redis is back. The Redis is the test's own; OpenSearch is the shared one."""

from __future__ import annotations

import time
import uuid
from typing import Any

import redis
from opensearchpy import OpenSearch

from tests.support.api import Api, Reply
from tests.support.processes import RedisServer, Server, free_port
from workbench.store.indices import EXPERIMENT_INDEX, JOBS_INDEX, JUDGMENT_INDEX


def judgment_doc(name: str) -> dict[str, Any]:
    """A finished LLM judgment with one failed document, written straight to the index."""
    return {"id": str(uuid.uuid4()), "name": name, "type": "LLM_JUDGMENT", "status": "COMPLETED",
            "timestamp": "2024-01-02T03:04:05.678Z",
            "metadata": {"searchConfigurationList": [], "llmJudgmentRatingType": "SCORE0_1"},
            "judgmentRatings": [{"query": "q", "ratings": [{"docId": "d1", "rating": "1.0"}],
                                 "failures": [{"docId": "d2"}]}]}


def count(direct: OpenSearch, index: str, query: dict[str, Any]) -> int:
    direct.indices.refresh(index=index)
    return int(direct.count(index=index, body={"query": query})["count"])


def timed(call: Any) -> tuple[Reply, float]:
    started = time.monotonic()
    reply = call()
    return reply, time.monotonic() - started


def test_redis_down_leaves_nothing_behind_and_recovers(env: dict[str, str], direct: OpenSearch,
                                                       index_name: str) -> None:
    port = free_port()
    store = RedisServer(port)
    test_env = {k: v for k, v in env.items() if k != "CELERY_BROKER_URL"}
    srv = Server(dict(test_env, REDIS_URL=f"redis://127.0.0.1:{port}/0"), workers=1)
    api = Api(srv.url)
    tag = uuid.uuid4().hex[:8]
    created: list[tuple[str, str]] = []
    try:
        direct.index(index=index_name, id="d1", body={"title": "q"}, refresh=True)
        query_set = api.srw("PUT", "/query_sets", {
            "name": f"outage-{tag}", "querySetQueries": [{"queryText": "q"}]}).json["query_set_id"]
        config = api.srw("PUT", "/search_configurations", {
            "name": f"outage-{tag}", "index": index_name,
            "query": '{"query":{"match":{"title":"%SearchText%"}}}'}).json[
            "search_configuration_id"]
        reference = judgment_doc(f"outage-ref-{tag}")
        retried = judgment_doc(f"outage-retry-{tag}")
        retried["metadata"]["searchConfigurationList"] = [config]  # what _retry searches with
        for doc in (reference, retried):
            direct.index(index=JUDGMENT_INDEX, id=doc["id"], body=doc, refresh=True)
            created.append((JUDGMENT_INDEX, doc["id"]))
        experiment = {"type": "POINTWISE_EVALUATION", "querySetId": query_set,
                      "searchConfigurationList": [config], "judgmentList": [reference["id"]],
                      "size": 3}
        new_judgment = {"name": f"outage-new-{tag}", "type": "IMPORT_JUDGMENT",
                        "judgmentRatings": [{"query": "q", "ratings": [
                            {"docId": "d1", "rating": "1"}]}]}
        by_query_set = {"term": {"querySetId": query_set}}
        reply = api.srw("PUT", "/experiments", experiment)  # queued; no worker runs it
        assert reply.status == 200, reply.data[:300]
        scheduled = reply.json["experiment_id"]
        created.append((EXPERIMENT_INDEX, scheduled))
        by_name = {"term": {"name": new_judgment["name"]}}

        store.stop()  # Redis goes away
        reply, took = timed(lambda: api.srw("PUT", "/judgments", new_judgment))
        print(f"\nPUT judgments with Redis down: {reply.status} in {took:.2f}s")
        assert reply.status == 503 and took < 5, (reply.status, reply.data[:300], took)
        assert reply.json["error"]["type"] == "queue_unavailable_exception"
        assert count(direct, JUDGMENT_INDEX, by_name) == 0

        reply, took = timed(lambda: api.srw("PUT", "/experiments", experiment))
        print(f"PUT experiments with Redis down: {reply.status} in {took:.2f}s")
        assert reply.status == 503 and took < 5, (reply.status, reply.data[:300], took)
        assert reply.json["error"]["type"] == "queue_unavailable_exception"
        assert count(direct, EXPERIMENT_INDEX, by_query_set) == 1  # the one made before

        reply, took = timed(lambda: api.srw("POST", f"/judgments/{retried['id']}/_retry"))
        print(f"POST _retry with Redis down: {reply.status} in {took:.2f}s")
        assert reply.status == 503 and took < 5, (reply.status, reply.data[:300], took)
        assert reply.json["error"]["type"] == "queue_unavailable_exception"
        after = direct.get(index=JUDGMENT_INDEX, id=retried["id"])["_source"]
        assert (after["status"], after["timestamp"]) == ("COMPLETED", retried["timestamp"])

        for path in ("/stats", "/stats/experiment_executions"):
            reply = api.srw("GET", path)
            assert reply.status == 503, (path, reply.data[:300])
            assert reply.json["error"]["type"] == "redis_unavailable_exception"
            assert reply.reason.startswith(f"Redis at redis://127.0.0.1:{port}/0 (REDIS_URL) "
                                           "cannot be reached")

        # Scheduling forgets the previous schedule's last fire in Redis: 503, no job written.
        reply = api.srw("POST", "/experiments/schedule", {"experimentId": scheduled,
                                                         "cronExpression": "0 0 * * *"})
        assert reply.status == 503, reply.data[:300]
        assert reply.json["error"]["type"] == "redis_unavailable_exception"
        assert count(direct, JOBS_INDEX, {"ids": {"values": [scheduled]}}) == 0
        assert direct.get(index=EXPERIMENT_INDEX, id=scheduled)["_source"]["isScheduled"] is False

        store = RedisServer(port)  # Redis is back
        reply = api.srw("PUT", "/judgments", new_judgment)
        assert reply.status == 200, reply.data[:300]
        created.append((JUDGMENT_INDEX, reply.json["judgment_id"]))
        reply = api.srw("PUT", "/experiments", experiment)
        assert reply.status == 200, reply.data[:300]
        created.append((EXPERIMENT_INDEX, reply.json["experiment_id"]))
        reply = api.srw("POST", f"/judgments/{retried['id']}/_retry")
        assert reply.status == 200, reply.data[:300]
        assert reply.json["status"] == "RETRYING"
        stats = api.srw("GET", "/stats/experiment_executions",
                        params={"flat_stat_paths": "true"})
        assert stats.status == 200, stats.data[:300]
        assert list(stats.json["all_nodes"].values()) == [1]  # counted since the restart
        queued = redis.Redis(port=port).llen(test_env["WORKBENCH_QUEUE"])
        assert queued == 3  # the three jobs, waiting for a worker this test does not run
        reply = api.srw("POST", "/experiments/schedule", {"experimentId": scheduled,
                                                         "cronExpression": "0 0 * * *"})
        assert reply.status == 200, reply.data[:300]
        created.append((JOBS_INDEX, scheduled))
    finally:
        srv.stop()
        store.stop()
        for index, doc_id in created:
            direct.delete(index=index, id=doc_id, refresh=True, ignore=[404])
        direct.delete_by_query(index=JUDGMENT_INDEX, body={"query": {"prefix": {
            "name": f"outage-new-{tag}"}}}, refresh=True, conflicts="proceed",
            ignore=[404])
