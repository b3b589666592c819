"""Pass-through: ``_search`` and ``_bulk`` through the workbench vs directly to the cluster.

Two searches: a ``multi_match`` over 10,000 documents, where the cluster's work dominates, and
the 5-document ``match`` issue 22 measured with, where the front's own cost shows most.

wrk (``workbench/bench/wrk.py``; Debian's package, installed when absent) runs bounded closed-loop
loads against the cluster (the baseline) and against the workbench served each way this tree
supports (``workbench/bench/passthrough_ways.py``: HAProxy, gunicorn alone, and door + nginx, the
front HAProxy replaced), alternately, for several rounds, all in one run; and against a bare
HAProxy in front of the cluster, the reference of what any HTTP proxy costs on these cores. Every
round is kept in the report; the medians give each way's throughput ratio to direct (target for
``_search`` via HAProxy: >= 0.85), HAProxy's to door + nginx (target for ``_search``: >= 1.3,
issue 22) and to the bare HAProxy (no target: the front's own cost), and the latency each adds
at p50 and p99, under load and with a single connection (where no queueing hides or inflates
the per-request cost). wrk expresses every request here, so no other generator is used.

Everything shares one machine: the cluster, the workbench's processes and wrk compete for the
same cores, so "direct" also gets the CPU that the workbench would use. That is the honest
comparison for a co-located proxy and is why the figures are ratios.
"""

from __future__ import annotations

import http.client
import json
import random
import re
import statistics
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from workbench.bench import wrk
from workbench.bench.common import Bench, Result, temp_index
from workbench.bench.passthrough_ways import BARE, serve
from workbench.bench.wrk import Load
from workbench.config import Config

NAME = "passthrough"
SEARCH_INDEX = "bench-passthrough-search"
SMALL_INDEX = "bench-passthrough-small"  # the 5-document index of issue 22's own measurement
SMALL = "_search (5-document match)"
DOCS = 10_000
BULK_ACTIONS = 100  # index actions per _bulk request
BULK_BODIES = 100  # distinct bodies cycled through: ids stay within BULK_ACTIONS x BULK_BODIES
SEARCH_BODIES = 64  # distinct match queries cycled through

# Closed loop: each connection sends its next request when the previous answer is in. Two wrk
# threads (one per core) and 16 connections keep the cluster and the workbench busy while wrk
# itself stays a small share of the CPU (its share is reported with every row).
THREADS = 2
CONNECTIONS = 16
# Targets of issue 22, for _search: HAProxy against direct, and against door + nginx. Two
# searches carry them: a multi_match over 10,000 documents, where the cluster's work dominates,
# and the 5-document match the issue measured, where the front's own cost shows most.
TARGET_DIRECT = {("_search", "haproxy"): 0.85, (SMALL, "haproxy"): 0.85}
# Pairs of sides compared with each other in the same run, with their targets by operation:
# HAProxy against door + nginx (issue 22), and against the bare HAProxy reference (the front's
# rules, log and checks; no target).
OVER: tuple[tuple[str, str, dict[str, float]], ...] = (
    ("haproxy", "door + nginx", {"_search": 1.3, SMALL: 1.3}),
    ("haproxy", BARE, {}),
)
WORDS = [
    "red", "blue", "green", "black", "white", "small", "large", "light", "heavy", "soft", "hard",
    "warm", "cold", "fast", "slow", "new", "old", "shoe", "boot", "sock", "shirt", "jacket",
    "coat", "hat", "glove", "scarf", "bag", "belt", "watch", "ring", "lamp", "chair", "table",
    "desk", "sofa", "bed", "pillow", "blanket", "towel", "cup", "mug", "plate", "bowl", "knife",
    "fork", "spoon", "pan", "pot", "kettle", "phone", "cable", "charger", "speaker", "laptop",
    "screen", "mouse", "keyboard", "camera", "lens", "tripod", "bike", "helmet", "tent", "stove",
    "bottle", "rope", "map", "compass", "book", "pen", "pencil", "paper", "cotton", "wool",
    "leather", "steel", "wood", "glass", "plastic", "organic", "classic", "modern", "vintage",
    "sport", "outdoor", "kitchen", "office", "travel", "kids", "women", "men"
]

Runs = dict[tuple[str, str], list[Load]]  # (operation, side) -> one Load per round


@dataclass
class Scenario:
    """A request mix: one path, a content type and bodies cycled through in order."""

    name: str
    path: str
    content_type: str
    bodies: list[str]


def run(bench: Bench) -> list[Result]:
    rounds = 1 if bench.quick else 3
    seconds = 4.0 if bench.quick else 8.0
    warmup = 1.0 if bench.quick else 2.0
    single_seconds = 2.0 if bench.quick else 3.0
    binary = wrk.ensure()
    # the settings of the workbench it starts (a deployed one, --workbench-url, has its own)
    config = None if bench.workbench_url else Config.from_env(bench.env)
    workers = Config().web_workers  # the production default, not the harness's 2
    served = serve(bench, workers)
    for note in served.notes:
        print(f"   {note}", flush=True)
    targets = {"direct": bench.opensearch_url, **served.urls}
    settings = {
        "generator": f"{wrk.version(binary)} ({binary}), a Lua script for the POST bodies",
        "loaded runs": f"wrk -t{THREADS} -c{CONNECTIONS} -d{seconds:g}s --latency",
        "single-connection runs": f"wrk -t1 -c1 -d{single_seconds:g}s --latency",
        "warm-up": f"{warmup:g} s per side and operation",
        "rounds": f"{rounds}, the order of the sides reversed every other round",
        "workbench": f"deployed at {bench.workbench_url}" if config is None else
                     f"{workers} gunicorn gthread workers x {config.web_threads} threads "
                     "(production defaults)",
        "ways not measured": "; ".join(served.notes) or "none",
    }

    def load(base: str, scenario: Scenario, secs: float, connections: int) -> Load:
        return wrk.run(binary, base, scenario.path, scenario.content_type, scenario.bodies,
                       secs, connections, THREADS)

    loaded: Runs = {}
    single: Runs = {}
    with temp_index(bench.client, SEARCH_INDEX, _index_body()), \
            temp_index(bench.client, SMALL_INDEX, _index_body()), \
            _bulk_indices(bench, [bulk_index(side) for side in targets]):
        _load_search_index(bench)
        _load_small_index(bench)
        scenarios = [_search_scenario(), _small_scenario(), _bulk_scenario()]
        for scenario in scenarios:
            for side, base in targets.items():
                _check(base, _for_side(scenario, side))
                load(base, _for_side(scenario, side), warmup, CONNECTIONS)
        for round_no in range(rounds):
            # Alternate which side goes first, so a drift in machine load hits all alike.
            order = list(targets) if round_no % 2 == 0 else list(reversed(targets))
            for scenario in scenarios:
                for side in order:
                    _reset_bulk_index(bench, scenario, side)
                    job = _for_side(scenario, side)
                    key = (scenario.name, side)
                    loaded.setdefault(key, []).append(
                        load(targets[side], job, seconds, CONNECTIONS))
                    single.setdefault(key, []).append(load(targets[side], job, single_seconds, 1))
    results: list[Result] = []
    for scenario in scenarios:
        for via in served.urls:
            results += results_of(scenario.name, via, loaded, single,
                                  dict(settings, **{"served by": served.described[via]}))
        results += over(scenario.name, loaded)
    return results


def _med(runs: Runs, op: str, side: str, attr: str) -> float:
    return float(statistics.median(getattr(load, attr) for load in runs[(op, side)]))


def _rounds(runs: Runs, op: str, side: str, attr: str) -> list[float]:
    return [round(getattr(load, attr), 3) for load in runs[(op, side)]]


def results_of(op: str, via: str, loaded: Runs, single: Runs, settings: dict[str, Any]
               ) -> list[Result]:
    """Throughput and p50/p99 latency of one way of serving against direct, medians over the
    rounds, every round in the details."""
    errors = {side: sum(load.errors for load in loaded[(op, side)] + single[(op, side)])
              for side in ("direct", via)}
    ratios = [round(through.rps / direct.rps, 3) for through, direct in
              zip(loaded[(op, via)], loaded[(op, "direct")], strict=True)]
    generator = max(load.generator_share for side in ("direct", via)
                    for load in loaded[(op, side)])
    label = f"{op} via {via} ({CONNECTIONS} connections)"
    out = [Result(NAME, f"{label} throughput", _med(loaded, op, via, "rps"),
                  _med(loaded, op, "direct", "rps"), unit="req/s",
                  target=TARGET_DIRECT.get((op, via)), higher_is_better=True,
                  details=dict(settings, **{
                      "req/s per round via": _rounds(loaded, op, via, "rps"),
                      "req/s per round direct": _rounds(loaded, op, "direct", "rps"),
                      "ratio per round": ratios,
                      "generator CPU (max, share of all cores)": f"{generator:.0%}",
                      "errors (non-2xx, socket) via/direct":
                          f"{errors[via]}/{errors['direct']}"}))]
    for pct in ("p50_ms", "p99_ms"):
        through, direct = _med(loaded, op, via, pct), _med(loaded, op, "direct", pct)
        out.append(Result(NAME, f"{label} latency {pct[:3]}", through, direct, unit="ms",
                          details={"added ms": round(through - direct, 3),
                                   "ms per round via": _rounds(loaded, op, via, pct),
                                   "ms per round direct": _rounds(loaded, op, "direct", pct)}))
    through, direct = _med(single, op, via, "p50_ms"), _med(single, op, "direct", "p50_ms")
    out.append(Result(
        NAME, f"{op} via {via} (1 connection) latency p50", through, direct, unit="ms",
        details={"added ms": round(through - direct, 3),
                 "ms per round via": _rounds(single, op, via, "p50_ms"),
                 "ms per round direct": _rounds(single, op, "direct", "p50_ms"),
                 "p99 via/direct ms": f"{_med(single, op, via, 'p99_ms'):.3f}/"
                                      f"{_med(single, op, 'direct', 'p99_ms'):.3f}",
                 "req/s via/direct": f"{_med(single, op, via, 'rps'):.0f}/"
                                     f"{_med(single, op, 'direct', 'rps'):.0f}"}))
    return out


def over(op: str, loaded: Runs) -> list[Result]:
    """Each pair of ``OVER`` served in this run: the first side's throughput against the
    second's."""
    results = []
    for new, old, targets in OVER:
        if (op, new) not in loaded or (op, old) not in loaded:
            continue
        ratios = [round(a.rps / b.rps, 3) for a, b in
                  zip(loaded[(op, new)], loaded[(op, old)], strict=True)]
        results.append(Result(
            NAME, f"{op} via {new} vs via {old} ({CONNECTIONS} connections) throughput",
            _med(loaded, op, new, "rps"), _med(loaded, op, old, "rps"), unit="req/s",
            target=targets.get(op), higher_is_better=True,
            details={f"req/s per round via {new}": _rounds(loaded, op, new, "rps"),
                     f"req/s per round via {old}": _rounds(loaded, op, old, "rps"),
                     "ratio per round": ratios}))
    return results


# ---------------------------------------------------------------------------------------------
# Data and request bodies


def _index_body() -> dict[str, Any]:
    return {
        "settings": {"number_of_shards": 1, "number_of_replicas": 0},
        "mappings": {"properties": {
            "title": {"type": "text"}, "description": {"type": "text"},
            "category": {"type": "keyword"}, "price": {"type": "float"},
        }},
    }


def _document(rng: random.Random) -> dict[str, Any]:
    return {
        "title": " ".join(rng.choices(WORDS, k=rng.randint(3, 6))),
        "description": " ".join(rng.choices(WORDS, k=rng.randint(15, 40))),
        "category": rng.choice(WORDS[:16]),
        "price": round(rng.uniform(1, 500), 2),
    }


def _load_search_index(bench: Bench) -> None:
    """~10k small product documents, one segment, so every run searches the same index."""
    rng = random.Random(7)
    for start in range(0, DOCS, 2000):
        lines = []
        for i in range(start, min(start + 2000, DOCS)):
            lines.append(json.dumps({"index": {"_index": SEARCH_INDEX, "_id": str(i)}}))
            lines.append(json.dumps(_document(rng)))
        reply = bench.client.bulk(body="\n".join(lines) + "\n")
        if reply["errors"]:
            raise RuntimeError("loading the search index failed")
    bench.client.indices.refresh(index=SEARCH_INDEX)
    bench.client.indices.forcemerge(index=SEARCH_INDEX, max_num_segments=1)


def _load_small_index(bench: Bench) -> None:
    """Five short titles, as in issue 22's measurement: the cluster's work per search is
    smallest, so the front's share of each request is largest."""
    for i in range(1, 6):
        bench.client.index(index=SMALL_INDEX, id=str(i), body={"title": f"red shoe number {i}"})
    bench.client.indices.refresh(index=SMALL_INDEX)


def _small_scenario() -> Scenario:
    body = json.dumps({"query": {"match": {"title": "red shoe"}}})
    return Scenario(SMALL, f"/{SMALL_INDEX}/_search", "application/json", [body])


def _search_scenario() -> Scenario:
    rng = random.Random(11)
    bodies = [json.dumps({
        "size": 10,
        "query": {"multi_match": {"query": " ".join(rng.sample(WORDS, rng.randint(1, 3))),
                                  "fields": ["title^2", "description"]}},
    }) for _ in range(SEARCH_BODIES)]
    return Scenario("_search", f"/{SEARCH_INDEX}/_search", "application/json", bodies)


def _bulk_scenario() -> Scenario:
    """BULK_BODIES bodies of BULK_ACTIONS index actions with fixed ids: the index stays bounded
    at BULK_ACTIONS x BULK_BODIES documents however long the run (later passes overwrite)."""
    rng = random.Random(13)
    bodies = []
    for b in range(BULK_BODIES):
        lines = []
        for a in range(BULK_ACTIONS):
            lines.append(json.dumps({"index": {"_id": str(b * BULK_ACTIONS + a)}}))
            lines.append(json.dumps(_document(rng)))
        bodies.append("\n".join(lines) + "\n")
    return Scenario("_bulk", "/{index}/_bulk", "application/x-ndjson", bodies)


def bulk_index(side: str) -> str:
    """Each side's own bulk index (``door + nginx`` -> ``bench-passthrough-bulk-door-nginx``)."""
    return "bench-passthrough-bulk-" + re.sub(r"[^a-z0-9]+", "-", side.lower()).strip("-")


def _for_side(scenario: Scenario, side: str) -> Scenario:
    """The scenario for one side: bulk writes go to that side's own index."""
    path = scenario.path.replace("{index}", bulk_index(side))
    return Scenario(scenario.name, path, scenario.content_type, scenario.bodies)


@contextmanager
def _bulk_indices(bench: Bench, names: Any) -> Iterator[None]:
    try:
        for name in names:
            _recreate(bench, name)
        yield
    finally:
        for name in names:
            bench.client.indices.delete(index=name, ignore=[404])


def _recreate(bench: Bench, name: str) -> None:
    bench.client.indices.delete(index=name, ignore=[404])
    bench.client.indices.create(index=name, body=_index_body())


def _reset_bulk_index(bench: Bench, scenario: Scenario, side: str) -> None:
    """Every bulk run starts from an empty index (first pass creates, later ones overwrite)."""
    if scenario.name == "_bulk":
        _recreate(bench, bulk_index(side))


def _check(base: str, scenario: Scenario) -> None:
    """One request of the scenario must succeed (a benchmark of 4xx answers measures nothing)."""
    parts = urlsplit(base)
    conn = http.client.HTTPConnection(parts.hostname or "127.0.0.1", parts.port, timeout=60)
    try:
        conn.request("POST", scenario.path, scenario.bodies[0],
                     {"Content-Type": scenario.content_type})
        reply = conn.getresponse()
        body = json.loads(reply.read())
    finally:
        conn.close()
    if reply.status != 200 or body.get("errors") or (
            scenario.name.startswith("_search") and not body["hits"]["hits"]):
        raise RuntimeError(f"{scenario.name} via {base}: {reply.status} {str(body)[:300]}")
