"""A/B results at scale: the API's memory while it reads the verdict of 30,000 and then 300,000
impressions, as a ratio (what the larger read adds over the smaller).

``GET /ab_tests/{id}/_results`` reads a version's impressions a page at a time and counts each
as it comes (``workbench/abtests/results.py``), so its memory should not grow with the number of
impressions. The run: a workbench (``workbench serve``, one worker, no front) whose UBI indices
are the benchmark's own; one A/B test; synthetic impressions as the interleaved search records
them (ten shown ids, alternate teams, 500 distinct query texts, over 20 days) with a click on one
shown id of every third. The API's resident memory (process tree, psutil) is sampled every 0.2 s
during each ``_results`` call. The baseline is the memory before the first call; the ratio is
``(peak at 300,000 - baseline) / (peak at 30,000 - baseline)``: about 1 when memory does not
grow with the impressions, about 10 when it grows in proportion (as it did before the pages were
counted one by one: 143 MiB traced at 100,000 impressions, 400 MiB at 300,000). ``--quick``
uses 10,000 and 100,000.
"""

from __future__ import annotations

import json
import random
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from opensearchpy.helpers import bulk

from workbench.bench.client import Api
from workbench.bench.common import Bench, Result
from workbench.bench.memory import MIB, Sampler, settled_rss
from workbench.config import Config

NAME = "ab_results"
SIZES, QUICK_SIZES = (30_000, 300_000), (10_000, 100_000)
QUERIES_INDEX, EVENTS_INDEX = "bench-ab-results-queries", "bench-ab-results-events"
TARGET = 1.5
SRW = "/_plugins/_search_relevance"


def _impressions(test: dict[str, Any], start: int, stop: int, rng: random.Random
                 ) -> Iterator[dict[str, Any]]:
    """Bulk actions: impressions ``start`` to ``stop`` of the test, and a click on every third."""
    for i in range(start, stop):
        query_id = f"bench-{i:09d}"
        hits = [f"doc{rng.randrange(5_000)}-{k}" for k in range(10)]
        yield {"_index": QUERIES_INDEX, "_source": {
            "query_id": query_id, "client_id": f"user-{i % 1_000}",
            "timestamp": f"2026-11-{1 + i % 20:02d}T{i % 24:02d}:{i % 60:02d}:00Z",
            "user_query": f"query {rng.randrange(500)}", "query_response_hit_ids": hits,
            "query_attributes": {"ab_test_id": test["id"], "ab_test_version": "0",
                                 "ab_test_config_a_uuid": test["config_a_uuid"],
                                 "ab_test_config_b_uuid": test["config_b_uuid"],
                                 "ab_test_teams": ["A", "B"] * 5}}}
        if i % 3 == 0:
            yield {"_index": EVENTS_INDEX, "_source": {
                "query_id": query_id, "action_name": "click",
                "timestamp": "2026-11-27T00:00:00Z",
                "event_attributes": {"object": {"object_id": hits[rng.randrange(10)]}}}}


def _create_test(api: Api) -> dict[str, Any]:
    configs = []
    for side in ("a", "b"):
        reply = api.srw("PUT", "/search_configurations", {
            "name": f"bench ab results {side}", "index": QUERIES_INDEX,
            "query": json.dumps({"query": {"match": {"user_query": "%SearchText%"}}})})
        assert reply.status == 200, reply.data
        configs.append(reply.json["search_configuration_id"])
    test_id = "bench-ab-results"
    api.srw("DELETE", f"/ab_tests/{test_id}")
    reply = api.srw("PUT", f"/ab_tests/{test_id}", {"search_configuration_a": configs[0],
                                                   "search_configuration_b": configs[1]})
    assert reply.status == 200, reply.data
    source = api.srw("GET", f"/ab_tests/{test_id}").json["hits"]["hits"][0]["_source"]
    return dict(source, id=test_id)


def run(bench: Bench) -> list[Result]:
    small, large = QUICK_SIZES if bench.quick else SIZES
    client = bench.client
    mapping = json.loads((Path(Config().index_mappings_dir) / "ubi" / "ubi_queries.json")
                         .read_text())
    client.indices.delete(index=f"{QUERIES_INDEX},{EVENTS_INDEX}", ignore=[404])
    client.indices.create(index=QUERIES_INDEX, body={k: mapping[k] for k in ("settings",
                                                                             "mappings")})
    client.indices.create(index=EVENTS_INDEX, body={"mappings": {"properties": {
        "query_id": {"type": "keyword"}, "action_name": {"type": "keyword"},
        "timestamp": {"type": "date"},
        "event_attributes": {"properties": {"object": {"properties": {
            "object_id": {"type": "keyword"}}}}}}}})
    bench.on_close(lambda: client.indices.delete(index=f"{QUERIES_INDEX},{EVENTS_INDEX}",
                                                 ignore=[404]))
    server = bench.server(1, "none", WORKBENCH_AB_QUERIES_INDEX=QUERIES_INDEX,
                          WORKBENCH_AB_EVENTS_INDEX=EVENTS_INDEX)
    api = Api(server.url)
    test = _create_test(api)
    rng = random.Random(5)
    written = 0
    baseline = 0
    peaks: dict[int, float] = {}
    details: dict[str, Any] = {}
    for size in (small, large):
        bulk(client, _impressions(test, written, size, rng), chunk_size=5_000,
             request_timeout=300)
        written = size
        client.indices.refresh(index=f"{QUERIES_INDEX},{EVENTS_INDEX}")
        if not baseline:
            baseline = settled_rss(server.pid)
        sampler = Sampler(server.pid)
        sampler.start()
        started = time.perf_counter()
        reply = api.srw("GET", f"/ab_tests/{test['id']}/_results")
        seconds = time.perf_counter() - started
        peaks[size] = sampler.stop()
        assert reply.status == 200, reply.data[:500]
        assert reply.json["impressions"] == size, reply.json["impressions"]
        details[f"{size:,} impressions"] = {
            "seconds": round(seconds, 1), "peak MiB": round(peaks[size] / MIB, 1),
            "wins": [reply.json["wins_a"], reply.json["wins_b"], reply.json["ties"]]}
        print(f"   {size:,} impressions: _results in {seconds:.1f} s, API peak "
              f"{peaks[size] / MIB:.1f} MiB (before: {baseline / MIB:.1f} MiB)", flush=True)
    details["baseline MiB"] = round(baseline / MIB, 1)
    grown_small = max(peaks[small] - baseline, 1) / MIB
    grown_large = max(peaks[large] - baseline, 1) / MIB
    return [Result(NAME, f"API memory added while reading the results: {large:,} impressions "
                         f"vs {small:,}", grown_large, grown_small, unit="MiB", target=TARGET,
                   details=details)]
