"""Pointwise experiment: 150 ESCI queries x 2 configurations (and 1,500 queries by repetition),
against the same searches sent straight to the cluster as ``_msearch``."""

from __future__ import annotations

import statistics
from typing import Any

from opensearchpy.helpers import scan

from workbench.bench.client import Api
from workbench.bench.common import Bench, Result, ensure_demo_index, ms, timed, wait_status
from workbench.demo.load import read_json
from workbench.querysets.entries import read_entries
from workbench.store import bulk
from workbench.store.indices import EVALUATION_INDEX, EXPERIMENT_INDEX, VARIANT_INDEX
from workbench.store.repository import Repository
from workbench.store.search import msearch
from workbench.store.search_render import RenderedSearch, render

INDEX = "bench-esci-products"
#: how often the experiment's status is read: finer than the common 20 ms, whose wait (10 ms
#: on average) would be an eighth of a 150-query run
POLL = 0.005
CONFIGS = (
    ("title", '{"query":{"match":{"title":"%SearchText%"}}}'),
    ("title+description", '{"query":{"multi_match":{"query":"%SearchText%",'
                          '"fields":["title^2","description","bullet_points"]}}}'),
)


def _writes(bench: Bench, experiment_id: str) -> list[dict[str, Any]]:
    """What a finished run wrote, as bulk actions: its evaluation results and variants (the same
    ids and documents), then its COMPLETED experiment document."""
    actions: list[dict[str, Any]] = []
    for index in (EVALUATION_INDEX, VARIANT_INDEX):
        actions += [{"_index": index, "_id": hit["_id"], "_source": hit["_source"]}
                    for hit in scan(bench.client, index=index, query={
                        "query": {"term": {"experimentId": experiment_id}}})]
    return actions


def _measure(bench: Bench, api: Api, body: dict[str, Any], searches: list[RenderedSearch],
             runs: int) -> dict[str, Any]:
    """Median wall times of the experiment (PUT until COMPLETED), of the bare searches, and of
    the bound: the searches, then the run's own documents written again (``_bulk``, refreshed)
    and its experiment document (refreshed), the writes a client needs to see COMPLETED."""
    finished: list[str] = []

    def experiment() -> None:
        reply = api.srw("PUT", "/experiments", body)
        done = wait_status(api, f"/experiments/{reply.json['experiment_id']}", poll=POLL)
        assert done["status"] == "COMPLETED", done
        finished.append(reply.json["experiment_id"])

    def direct() -> None:
        msearch(bench.client, searches)

    direct()  # warm the caches both sides see
    experiment()
    bench.client.indices.refresh(index=EXPERIMENT_INDEX)
    writes = _writes(bench, finished[0])
    run_doc = bench.client.get(index=EXPERIMENT_INDEX, id=finished[0])["_source"]

    def bound() -> None:
        msearch(bench.client, searches)
        bulk.write(bench.client, writes, chunk_size=1000, max_chunk_bytes=100 * 2**20,
                   request_timeout=300)
        bulk.refresh(bench.client, f"{EVALUATION_INDEX},{VARIANT_INDEX}")
        Repository(bench.client, EXPERIMENT_INDEX).put(run_doc)

    bound()
    experiments, baselines, bounds = [], [], []
    for _ in range(runs):  # alternate, so that noise hits all alike
        experiments.append(timed(experiment)[0])
        baselines.append(timed(direct)[0])
        bounds.append(timed(bound)[0])
    return {"experiment": statistics.median(experiments), "msearch": statistics.median(baselines),
            "bound": statistics.median(bounds), "experiment runs": ms(experiments),
            "msearch runs": ms(baselines), "bound runs": ms(bounds),
            "documents written": len(writes)}


def run(bench: Bench) -> list[Result]:
    ensure_demo_index(bench, INDEX)
    server = bench.server()
    bench.worker()
    api = bench.api(server)
    api.call("PUT", "/_cluster/settings", {"persistent": {
        "plugins.search_relevance.query_set.maximum": 2000}})
    queries = read_json(bench.data_file("queryset"))["querySetQueries"]
    judgment = api.srw("PUT", "/judgments", read_json(
        bench.data_file("judgments"))).json["judgment_id"]
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

            runs = 5
            m = _measure(bench, api, body, searches, runs)
            common = {"searches": len(searches), "runs": runs,
                      "documents written": m["documents written"],
                      "experiment runs ms": m["experiment runs"],
                      "poll": f"the status every {1000 * POLL:g} ms"}
            results.append(Result(
                "pointwise", f"{len(entries)} queries x 2 configurations", m["experiment"],
                m["msearch"], target=1.5 if repeat == 1 else 1.3, details={
                    **common, "baseline": "the same searches as _msearch, batches of 200",
                    "msearch runs ms": m["msearch runs"]}))
            results.append(Result(
                "pointwise", f"{len(entries)} queries x 2 configurations, vs searches and "
                "writes", m["experiment"], m["bound"], details={
                    **common, "baseline": "the same searches, then the run's documents "
                    "written again (_bulk, refresh) and its experiment document (refresh), "
                    "one after the other: the writes a COMPLETED run must have made visible",
                    "bound runs ms": m["bound runs"]}))
    finally:
        api.call("PUT", "/_cluster/settings", {"persistent": {
            "plugins.search_relevance.query_set.maximum": None}})
    return results
