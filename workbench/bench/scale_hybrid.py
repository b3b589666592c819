"""Scale-out of one large experiment: a HYBRID_OPTIMIZER run (82 variants a query) spread over
worker processes by ``jobs.fanout``.

The same experiment (1,500 queries, one hybrid configuration, imported judgments) runs with one
worker process and then with two (one job at a time each); the 1-worker time, measured in the
same run, is the baseline, and the 2-worker time over it is the ratio (the inverse of the
speed-up). OpenSearch runs on the same machine, so the speed-up is bounded by the cores it
shares with the workers.
"""

from __future__ import annotations

import time
from typing import Any

from opensearchpy.helpers import bulk

from workbench.bench.client import Api
from workbench.bench.common import Bench, Result, temp_index, wait_status

DOCS_PER_QUERY = 5
MAXIMUM = "plugins.search_relevance.query_set.maximum"  # 1,000 queries by default


def _setup(api: Api, index: str, queries: int) -> dict[str, Any]:
    texts = [f"item{q:04d} red shoe" for q in range(queries)]
    query_set = api.srw("PUT", "/query_sets", {"name": "bench scale hybrid", "querySetQueries": [
        {"queryText": text} for text in texts]}).json["query_set_id"]
    config = api.srw("PUT", "/search_configurations", {
        "name": "bench scale hybrid", "index": index,
        "query": '{"query":{"hybrid":{"queries":[{"match":{"title":"%SearchText%"}},'
                 '{"match":{"description":"%SearchText%"}}]}}}'}).json["search_configuration_id"]
    judgment = api.srw("PUT", "/judgments", {
        "name": "bench scale hybrid", "type": "IMPORT_JUDGMENT", "judgmentRatings": [
            {"query": text, "ratings": [{"docId": f"q{q:04d}-{d}", "rating": str(d % 4)}
                                        for d in range(DOCS_PER_QUERY)]}
            for q, text in enumerate(texts)]}).json["judgment_id"]
    done = wait_status(api, f"/judgments/{judgment}", poll=0.2)
    assert done["status"] == "COMPLETED", done
    return {"type": "HYBRID_OPTIMIZER", "querySetId": query_set,
            "searchConfigurationList": [config], "judgmentList": [judgment], "size": 10}


def _timed_run(api: Api, body: dict[str, Any]) -> float:
    """Seconds from the create to COMPLETED; the experiment and its documents are deleted
    after, so the next run writes into indices of the same size."""
    started = time.perf_counter()
    reply = api.srw("PUT", "/experiments", body)
    assert reply.status == 200, reply.data
    experiment_id = reply.json["experiment_id"]
    done = wait_status(api, f"/experiments/{experiment_id}", timeout=3600, poll=0.1)
    elapsed = time.perf_counter() - started
    assert done["status"] == "COMPLETED", done
    api.srw("DELETE", f"/experiments/{experiment_id}")
    return elapsed


def run(bench: Bench) -> list[Result]:
    queries = 150 if bench.quick else 1500
    results: list[Result] = []
    with temp_index(bench.client, "bench-scale-hybrid-products") as index:
        bulk(bench.client, ({"_index": index, "_id": f"q{q:04d}-{d}",
                             "title": f"item{q:04d} {'red shoe' if d % 2 else 'blue hat'} {d}",
                             "description": f"item{q:04d} {'red' if d < 3 else 'green'} thing"}
                            for q in range(queries) for d in range(DOCS_PER_QUERY)),
             refresh=True)
        queue = f"{bench.queue}-hybrid"  # workers of other benchmarks may still be running
        api = bench.api(bench.server(2, "none", WORKBENCH_QUEUE=queue))
        api.call("PUT", "/_cluster/settings", {"transient": {MAXIMUM: max(queries, 1000)}})
        try:
            # the first worker also imports the judgment
            bench.worker(WORKBENCH_WORKER_CONCURRENCY="1", WORKBENCH_QUEUE=queue)
            body = _setup(api, index, queries)
            one = _timed_run(api, body)
            bench.worker(WORKBENCH_WORKER_CONCURRENCY="1", WORKBENCH_QUEUE=queue)
            two = _timed_run(api, body)
        finally:
            api.call("PUT", "/_cluster/settings", {"transient": {MAXIMUM: None}})
    name = f"one hybrid experiment, {queries} queries x 82 variants"
    details = {"split threshold": f"{bench.env.get('WORKBENCH_SPLIT_QUERIES', 'auto')} queries",
               "jobs at once per worker": 1, "documents per query": DOCS_PER_QUERY}
    results.append(Result("scale", f"{name}, 1 worker (baseline)", one, one, details=details))
    results.append(Result(
        "scale", f"{name}, 2 workers vs 1", two, one,
        details={**details, "1 worker": f"{one:.2f} s", "2 workers": f"{two:.2f} s",
                 "speed-up (1-worker / 2-worker time)": round(one / two, 3)}))
    return results
