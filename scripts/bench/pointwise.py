"""Pointwise experiment: 150 ESCI queries x 2 configurations (and 1,500 queries by repetition),
against the same searches sent straight to the cluster as ``_msearch``."""

from __future__ import annotations

import json
import statistics
from typing import Any

from scripts.bench.common import Bench, Result, timed, wait_status
from tests.support.api import Api
from tests.support.data import ESCI, UBI_SAMPLE
from workbench.config import Config
from workbench.demo.load import load_demo
from workbench.querysets.entries import read_entries
from workbench.store.search import msearch
from workbench.store.search_render import RenderedSearch, render

INDEX = "bench-esci-products"
CONFIGS = (
    ("title", '{"query":{"match":{"title":"%SearchText%"}}}'),
    ("title+description", '{"query":{"multi_match":{"query":"%SearchText%",'
                          '"fields":["title^2","description","bullet_points"]}}}'),
)


def _measure(bench: Bench, api: Api, body: dict[str, Any], searches: list[RenderedSearch],
             runs: int) -> tuple[float, float]:
    """Median wall time of the experiment (PUT until COMPLETED) and of the bare searches."""
    def experiment() -> None:
        reply = api.srw("PUT", "/experiments", body)
        done = wait_status(api, f"/experiments/{reply.json['experiment_id']}")
        assert done["status"] == "COMPLETED", done

    def direct() -> None:
        msearch(bench.client, searches)

    direct()  # warm the caches both sides see
    experiment()
    experiments, baselines = [], []
    for _ in range(runs):  # alternate, so that noise hits both alike
        experiments.append(timed(experiment)[0])
        baselines.append(timed(direct)[0])
    return statistics.median(experiments), statistics.median(baselines)


def run(bench: Bench) -> list[Result]:
    if not bench.client.indices.exists(index=INDEX):
        load_demo(Config.from_env(bench.env), str(UBI_SAMPLE / "ubi_ecommerce_products.json.gz"),
                  INDEX, None)
    server = bench.server()
    bench.worker()
    api = bench.api(server)
    api.call("PUT", "/_cluster/settings", {"persistent": {
        "plugins.search_relevance.query_set.maximum": 2000}})
    queries = json.loads((ESCI / "esci_us_queryset.json").read_text())["querySetQueries"]
    judgment = api.srw("PUT", "/judgments", json.loads(
        (ESCI / "esci_us_judgments.json").read_text())).json["judgment_id"]
    wait_status(api, f"/judgments/{judgment}")
    configs = []
    for name, query in CONFIGS:
        configs.append(api.srw("PUT", "/search_configurations", {
            "name": name, "index": INDEX, "query": query}).json["search_configuration_id"])
    results = []
    try:
        for repeat in (1,) if bench.quick else (1, 10):
            entries = queries * repeat
            query_set = api.srw("PUT", "/query_sets", {
                "name": f"esci x{repeat}", "querySetQueries": entries}).json["query_set_id"]
            body = {"type": "POINTWISE_EVALUATION", "querySetId": query_set,
                    "searchConfigurationList": configs, "judgmentList": [judgment], "size": 10}

            stored = bench.client.get(index="search-relevance-queryset", id=query_set)["_source"]
            config_docs = [bench.client.get(index="search-relevance-search-config",
                                            id=c)["_source"] for c in configs]
            searches = [render(config, entry.query_text, 10)
                        for entry in read_entries(stored) for config in config_docs]

            runs = 3
            measured, baseline = _measure(bench, api, body, searches, runs)
            results.append(Result(
                "pointwise", f"{len(entries)} queries x 2 configurations", measured, baseline,
                target=1.3, details={"searches": len(searches), "runs": runs,
                                     "baseline": "the same searches as _msearch, batches of 200",
                                     "documents written": 2 * len(searches)}))
    finally:
        api.call("PUT", "/_cluster/settings", {"persistent": {
            "plugins.search_relevance.query_set.maximum": None}})
    return results
