"""Remote pointwise runs (workbench/remote): the 150 ESCI queries searched through a remote search
configuration on another engine, against the same requests sent straight to that engine by a
plain client with the same concurrency.

Engines: the suite's OpenSearch as the "remote cluster" (the title match as a ``_search`` body)
and Solr (``scripts/solr.sh``: edismax over ``title``). The remote configuration has no cache
(``cacheDurationMinutes: 0``) and a rate limit far above what is reached, so both sides send
every request; the workbench's side also pays the shared rate limiter and concurrency slots in
Redis, the mapping of each answer, the metrics and the writes of the run. A second figure
measures a cached re-run (``cacheDurationMinutes: 60``): what a repeated experiment costs when
the remote is not asked again.
"""

from __future__ import annotations

import json
import statistics
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import urllib3

from workbench.bench.client import Api
from workbench.bench.common import (
    Bench,
    Result,
    ensure_demo_index,
    ms,
    service_url,
    timed,
    wait_status,
)
from workbench.bench.processes import TRUST_LOOPBACK
from workbench.demo.load import read_json
from workbench.remote.templates import RenderedRequest, render

INDEX = "bench-esci-products"
POLL = 0.005
CONCURRENCY = 5  # the configuration's maxConcurrentRequests, and the direct client's threads
ENGINES = {
    "opensearch": ('{"query":{"match":{"title":"%SearchText%"}}}', "opensearch"),
    "solr": ("q=%SearchText%&defType=edismax&qf=title&fl=id,score,title", "solr"),
}
#: what the remote configurations may reach: the loopback services of this machine
REMOTE_ENV = TRUST_LOOPBACK


def _direct(requests: list[RenderedRequest]) -> Callable[[], None]:
    """Every request sent from ``CONCURRENCY`` threads, each answer read and decoded."""
    http = urllib3.PoolManager(maxsize=CONCURRENCY)

    def one(request: RenderedRequest) -> None:
        headers = {"Accept": "application/json"}
        if request.body is not None:
            headers["Content-Type"] = "application/json"
        answer = http.request(request.method, request.url, body=request.body, headers=headers)
        assert answer.status == 200, answer.data[:200]
        json.loads(answer.data)

    def run() -> None:
        with ThreadPoolExecutor(CONCURRENCY) as pool:
            list(pool.map(one, requests))
    return run


def _experiment(api: Api, body: dict[str, Any]) -> Callable[[], None]:
    def run() -> None:
        reply = api.srw("PUT", "/experiments", body)
        done = wait_status(api, f"/experiments/{reply.json['experiment_id']}", poll=POLL)
        assert done["status"] == "COMPLETED", done
    return run


def _medians(runs: int, *fns: Callable[[], None]) -> list[list[float]]:
    """Each function timed ``runs`` times, alternating, after one warm-up run of each."""
    for fn in fns:
        fn()
    times: list[list[float]] = [[] for _ in fns]
    for _ in range(runs):
        for i, fn in enumerate(fns):
            times[i].append(timed(fn)[0])
    return times


def run(bench: Bench) -> list[Result]:
    ensure_demo_index(bench, INDEX)
    solr = service_url(None, "SOLR_URL", "solr_url", option=False)
    server = bench.server(2, "none", None, **REMOTE_ENV)
    bench.worker(**REMOTE_ENV)
    api = bench.api(server)
    queries = read_json(bench.data_file("queryset"))["querySetQueries"]
    judgment = api.srw("PUT", "/judgments", read_json(
        bench.data_file("judgments"))).json["judgment_id"]
    wait_status(api, f"/judgments/{judgment}")
    query_set = api.srw("PUT", "/query_sets", {
        "name": "esci remote bench", "querySetQueries": queries}).json["query_set_id"]
    texts = [str(q["queryText"]) for q in queries]
    urls = {"opensearch": f"{bench.opensearch_url}/{INDEX}/_search",
            "solr": f"{solr}/products/select"}
    runs = 3 if bench.quick else 7
    results = []
    for engine, (template, preset) in ENGINES.items():
        timings: dict[str, list[float]] = {}
        for cache in (0, 60):
            config = api.srw("PUT", "/remote_search_configurations", {
                "name": f"bench {engine} cache {cache}", "connectionUrl": urls[engine],
                "queryTemplate": template, "responseTemplate": preset,
                "maxRequestsPerSecond": 1000, "maxConcurrentRequests": CONCURRENCY,
                "cacheDurationMinutes": cache}).json["remote_search_configuration_id"]
            body = {"type": "POINTWISE_EVALUATION", "querySetId": query_set,
                    "searchConfigurationList": [config], "judgmentList": [judgment],
                    "size": 10}
            requests = [render(template, urls[engine], text, 10, None, preset)
                        for text in texts]
            experiment, direct = _medians(runs, _experiment(api, body), _direct(requests))
            timings[f"experiment, cache {cache}"] = experiment
            timings[f"direct, cache {cache}"] = direct
        common = {"queries": len(texts), "runs": runs, "concurrency": CONCURRENCY,
                  "baseline": f"the same {len(texts)} requests from {CONCURRENCY} threads "
                              "(urllib3), answers decoded"}
        results.append(Result(
            "remote", f"pointwise, {len(texts)} ESCI queries on {engine} through a remote "
            "configuration (no cache)", statistics.median(timings["experiment, cache 0"]),
            statistics.median(timings["direct, cache 0"]), target=1.3, details={
                **common, "experiment runs ms": ms(timings["experiment, cache 0"]),
                "direct runs ms": ms(timings["direct, cache 0"])}))
        results.append(Result(
            "remote", f"the same on {engine}, answers cached (a repeated run)",
            statistics.median(timings["experiment, cache 60"]),
            statistics.median(timings["direct, cache 60"]), details={
                **common, "experiment runs ms": ms(timings["experiment, cache 60"]),
                "direct runs ms": ms(timings["direct, cache 60"])}))
    return results
