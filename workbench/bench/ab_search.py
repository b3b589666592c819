"""A/B tests: the interleaved ``_search`` against one ``_msearch`` of both configurations' queries
sent straight to the cluster (what the interleaved search must do at least), and the cost of
recording impressions.

wrk (``workbench/bench/wrk.py``) runs closed-loop loads, alternately for several rounds in one run:

* **direct**: ``POST /_msearch`` to the cluster with A's and B's search for the same text;
* **interleaved**: ``POST /ab_tests/{id}/_search`` through the workbench as shipped: the HAProxy
  front and its live search server (``workbench/livesearch``), gunicorn with the production
  worker count behind them, impressions recorded every ``WORKBENCH_AB_FLUSH_SECONDS`` (0.5 s);
* **_msearch through the workbench**: the direct request sent to the workbench, which passes it
  through (HAProxy; what the application pays for any search through the workbench);
* **interleaved, no writes**: the same on a second workbench whose impressions are only queued
  during the run (a flush interval longer than the run), so the difference between the two is
  what writing the impressions costs the searches.

Targets (issue 49): interleaved p50 latency with one connection <= 2.0 x direct, and throughput
with 16 connections >= 0.6 x direct; the impression write adds nothing measurable to p50 (issue
31). Every side shares the machine's two cores with the cluster and wrk; hence ratios.
"""

from __future__ import annotations

import contextlib
import json
import random
import statistics
import urllib.error
import urllib.request
from typing import Any

from workbench.bench import wrk
from workbench.bench.common import Bench, Result, temp_index
from workbench.bench.passthrough import WORDS
from workbench.bench.wrk import Load
from workbench.config import Config

NAME = "ab_search"
INDEX = "bench-ab-products"
DOCS = 5_000
TEXTS = 64  # distinct search texts cycled through
CLIENTS = 50  # distinct users: each (text, user) has its own draft
THREADS = 2
CONNECTIONS = 16
TARGET_P50 = 2.0
TARGET_RPS = 0.6
TEST_ID = "bench-ab"
QUERY_A = {"query": {"match": {"title": "%SearchText%"}}}
QUERY_B = {"query": {"multi_match": {"query": "%SearchText%", "fields": ["title^2",
                                                                        "description"]}}}


def run(bench: Bench) -> list[Result]:
    rounds = 1 if bench.quick else 3
    seconds = 4.0 if bench.quick else 6.0
    single_seconds = 3.0 if bench.quick else 6.0
    binary = wrk.ensure()
    workers = Config().web_workers
    rng = random.Random(11)
    texts = [" ".join(rng.choices(WORDS, k=2)) for _ in range(TEXTS)]
    with temp_index(bench.client, INDEX, {"settings": {"number_of_shards": 1,
                                                        "number_of_replicas": 0}}):
        _load(bench, rng)
        recording = bench.server(workers=workers, front="haproxy",
                                 WORKBENCH_AB_QUERIES_INDEX="bench-ab-queries")
        # A deployed workbench (--workbench-url) records as configured: no side without writes.
        queued = None if bench.workbench_url else bench.server(
            workers=workers, front="haproxy", WORKBENCH_AB_QUERIES_INDEX="bench-ab-queries-q",
            WORKBENCH_AB_FLUSH_SECONDS="3600")
        bench.on_close(lambda: bench.client.indices.delete(
            index="bench-ab-queries,bench-ab-queries-q", ignore=[404]))
        for server in (recording, queued):
            if server:
                _create_test(server.url)
        msearch = [_msearch_body(text) for text in texts]
        interleaved = [json.dumps({"query_params": {"SearchText": text},
                                   "client_id": f"user-{n % CLIENTS}"})
                       for n, text in enumerate(texts * 2)]
        path = f"/_plugins/_search_relevance/ab_tests/{TEST_ID}/_search"
        sides = {
            "direct _msearch": (bench.opensearch_url, "/_msearch", "application/x-ndjson",
                                msearch),
            "_msearch through the workbench": (recording.url, "/_msearch",
                                               "application/x-ndjson", msearch),
            "interleaved": (recording.url, path, "application/json", interleaved),
        }
        if queued:
            sides["interleaved, no writes"] = (queued.url, path, "application/json", interleaved)
        single: dict[str, list[Load]] = {}
        loaded: dict[str, list[Load]] = {}
        for base, target, kind, bodies in sides.values():  # warm-up
            wrk.run(binary, base, target, kind, bodies, 2.0, CONNECTIONS, THREADS)
        for round_no in range(rounds):
            order = list(sides) if round_no % 2 == 0 else list(reversed(sides))
            for side in order:
                base, target, kind, bodies = sides[side]
                single.setdefault(side, []).append(
                    wrk.run(binary, base, target, kind, bodies, single_seconds, 1, 1))
                loaded.setdefault(side, []).append(
                    wrk.run(binary, base, target, kind, bodies, seconds, CONNECTIONS, THREADS))
        written: int | str = _count(bench, "bench-ab-queries") if queued else \
            "not counted (the deployed workbench's own index)"
    details = {
        "generator": f"{wrk.version(binary)}; single: wrk -t1 -c1 -d{single_seconds:g}s; "
                     f"loaded: wrk -t{THREADS} -c{CONNECTIONS} -d{seconds:g}s",
        "rounds": rounds, "workbench": f"deployed at {bench.workbench_url}" if not queued
        else f"HAProxy front and the live search server; gunicorn with {workers} workers "
             "(production defaults)",
        "index": f"{DOCS} documents, {TEXTS} texts, {CLIENTS} client ids",
        "impressions written by the recording side": written,
        "errors (all runs)": {side: sum(load.errors for load in single[side] + loaded[side])
                              for side in sides},
    }

    def p50(side: str) -> float:
        return float(statistics.median(load.p50_ms for load in single[side]))

    def rps(side: str) -> float:
        return float(statistics.median(load.rps for load in loaded[side]))

    def per_round(runs: dict[str, list[Load]], side: str, attr: str) -> list[float]:
        return [round(getattr(load, attr), 3) for load in runs.get(side, [])]

    direct, inter, quiet = "direct _msearch", "interleaved", "interleaved, no writes"
    passed = "_msearch through the workbench"
    results = [
        Result(NAME, "interleaved _search vs one _msearch (1 connection) latency p50", p50(inter),
               p50(direct), unit="ms", target=TARGET_P50, details={
                   **details, "ms per round interleaved": per_round(single, inter, "p50_ms"),
                   "ms per round direct": per_round(single, direct, "p50_ms")}),
        Result(NAME, "interleaved _search vs the same _msearch through the workbench's "
               "pass-through (1 connection) latency p50", p50(inter), p50(passed), unit="ms",
               details={"ms per round interleaved": per_round(single, inter, "p50_ms"),
                        "ms per round pass-through": per_round(single, passed, "p50_ms")}),
        Result(NAME, f"interleaved _search vs one _msearch ({CONNECTIONS} connections) "
               "throughput", rps(inter), rps(direct), unit="req/s", higher_is_better=True,
               target=TARGET_RPS,
               details={"req/s per round interleaved": per_round(loaded, inter, "rps"),
                        "req/s per round direct": per_round(loaded, direct, "rps"),
                        "req/s per round no writes": per_round(loaded, quiet, "rps")}),
    ]
    if quiet in single:
        results.insert(2, Result(
            NAME, "impression writes: p50 with writes vs queued only (1 connection)",
            p50(inter), p50(quiet), unit="ms", details={
                "ms per round with writes": per_round(single, inter, "p50_ms"),
                "ms per round queued only": per_round(single, quiet, "p50_ms")}))
    return results


def _load(bench: Bench, rng: random.Random) -> None:
    lines = []
    for i in range(DOCS):
        lines.append(json.dumps({"index": {"_index": INDEX, "_id": str(i)}}))
        lines.append(json.dumps({"title": " ".join(rng.choices(WORDS, k=rng.randint(3, 6))),
                                 "description": " ".join(rng.choices(WORDS, k=20))}))
    if bench.client.bulk(body="\n".join(lines) + "\n", refresh=True)["errors"]:
        raise RuntimeError("loading the benchmark index failed")
    bench.client.indices.forcemerge(index=INDEX, max_num_segments=1)


def _msearch_body(text: str) -> str:
    """Both configurations' searches for ``text``, as the interleaved search sends them."""
    header = json.dumps({"index": INDEX})
    lines = []
    for query in (QUERY_A, QUERY_B):
        body = json.loads(json.dumps(query).replace("%SearchText%", text))
        lines += [header, json.dumps({**body, "size": 10})]
    return "\n".join(lines) + "\n"


def _call(base: str, method: str, path: str, body: Any) -> Any:
    request = urllib.request.Request(base + path, json.dumps(body).encode(), method=method,
                                     headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=60) as answer:
        return json.load(answer)


def _create_test(base: str) -> None:
    srw = "/_plugins/_search_relevance"
    ids = [_call(base, "PUT", f"{srw}/search_configurations", {
        "name": f"bench ab {side}", "index": INDEX, "query": json.dumps(query)}
    )["search_configuration_id"] for side, query in (("a", QUERY_A), ("b", QUERY_B))]
    with contextlib.suppress(urllib.error.HTTPError):  # not there yet
        urllib.request.urlopen(urllib.request.Request(
            base + f"{srw}/ab_tests/{TEST_ID}", method="DELETE"), timeout=60).close()
    _call(base, "PUT", f"{srw}/ab_tests/{TEST_ID}",
          {"search_configuration_a": ids[0], "search_configuration_b": ids[1]})


def _count(bench: Bench, index: str) -> int:
    bench.client.indices.refresh(index=index, ignore_unavailable=True)
    answer = bench.client.count(index=index, ignore_unavailable=True)
    return int(answer.get("count", 0))
