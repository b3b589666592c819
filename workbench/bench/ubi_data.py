"""Scaled-up UBI events for the COEC benchmark, generated from the real ESCI UBI events.

The generator resamples whole real *searches* (all events sharing one ``query_id``) uniformly
with replacement and gives each copy a new ``query_id``. A search of k events is drawn with
probability 1/searches, so every real event has the same expected share of the output as of the
input: the action mix, the ordinals, the (user_query, object_id, ordinal, action) tuples and so
the per-rank and per-query click-through rates are those of the real data, and the events of one
search (impressions at ranks 0..k, the click at rank r) stay together. The vocabulary of queries
and documents is the real one: more traffic on the same site, not a bigger site, so the number
of (query, document, rank) cells does not grow with the events.

Documents keep only what COEC reads plus the timestamp (the real one, string or epoch millis);
the events are streamed into the cluster (``parallel_bulk``), never held as a list.
"""

from __future__ import annotations

import gzip
import json
import random
from collections import Counter, defaultdict, deque
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from opensearchpy import OpenSearch
from opensearchpy.helpers import parallel_bulk

from workbench.bench.common import timed
from workbench.config import Config
from workbench.demo.load import UBI

#: the generated events are drawn from the ESCI UBI events the package ships (always those: a
#: generated index is reused by its name, which holds the generator's version, not the source)
SOURCE = UBI
PREFIX = "bench-ubi-events-"
# Bump when the generated documents change, so cached indices are rebuilt rather than reused.
VERSION = 1
SEED = 20240521
MAX_RANK = 20


def real_events(path: Path = SOURCE) -> list[dict[str, Any]]:
    """The real ``ubi_events`` documents of the bulk file (the ``ubi_queries`` are skipped)."""
    events: list[dict[str, Any]] = []
    with gzip.open(path, "rt", encoding="utf-8") as lines:
        for action_line in lines:
            source = json.loads(next(lines))
            if json.loads(action_line)["index"]["_index"] == "ubi_events":
                events.append(source)
    return events


def _compact(event: dict[str, Any]) -> dict[str, Any]:
    """The fields COEC reads (and the timestamp); absent ones stay absent, as in the source."""
    out: dict[str, Any] = {"action_name": event["action_name"], "timestamp": event["timestamp"]}
    if event.get("user_query") is not None:
        out["user_query"] = event["user_query"]
    attributes = event.get("event_attributes") or {}
    kept: dict[str, Any] = {}
    object_id = (attributes.get("object") or {}).get("object_id")
    if object_id is not None:
        kept["object"] = {"object_id": object_id}
    ordinal = (attributes.get("position") or {}).get("ordinal")
    if ordinal is not None:
        kept["position"] = {"ordinal": ordinal}
    if kept:
        out["event_attributes"] = kept
    return out


def searches(events: list[dict[str, Any]]) -> list[list[str]]:
    """Real events grouped by ``query_id`` (first-seen order), each as JSON without its
    ``query_id`` (the leading brace dropped, so a new id is prepended by concatenation)."""
    groups: dict[str, list[str]] = {}
    for number, event in enumerate(events):
        key = event.get("query_id") or f"<none {number}>"  # an event without one is alone
        body = json.dumps(_compact(event), separators=(",", ":"), ensure_ascii=False)
        groups.setdefault(key, []).append(body[1:])
    return list(groups.values())


def generate(n: int, seed: int = SEED, events: list[dict[str, Any]] | None = None
             ) -> Iterator[str]:
    """``n`` event documents (JSON strings), resampled search by search; deterministic."""
    groups = searches(events if events is not None else real_events())
    rng = random.Random(seed)
    emitted = copy = 0
    while emitted < n:
        query_id = f'{{"query_id":"b{seed:x}-{copy:x}",'
        copy += 1
        for rest in groups[rng.randrange(len(groups))]:
            if emitted == n:
                return
            emitted += 1
            yield query_id + rest


def index_name(n: int) -> str:
    return f"{PREFIX}{n}"


def _meta(n: int, seed: int) -> dict[str, Any]:
    # "generator" is the name the indices of earlier runs carry (the module's path before it
    # moved to workbench/bench): the same generator, so they stay reusable
    return {"generator": "scripts/bench/ubi_data.py", "version": VERSION, "seed": seed,
            "events": n}


def cached(client: OpenSearch, n: int, seed: int = SEED) -> bool:
    """An index from an earlier run with the same generator, seed and every event loaded."""
    name = index_name(n)
    if not client.indices.exists(index=name):
        return False
    mapping = client.indices.get_mapping(index=name)[name]["mappings"]
    if mapping.get("_meta", {}).get("workbench_bench") != _meta(n, seed):
        return False
    return int(client.count(index=name)["count"]) == n


def ensure_index(client: OpenSearch, n: int, seed: int = SEED) -> tuple[str, float | None]:
    """The index of ``n`` generated events and its load time (None: reused from the cache)."""
    name = index_name(n)
    if cached(client, n, seed):
        return name, None
    seconds, _ = timed(lambda: load(client, name, n, seed))
    return name, seconds


def load(client: OpenSearch, name: str, n: int, seed: int = SEED) -> None:
    """(Re)create ``name`` with the workbench's UBI events mapping and stream ``n`` events in.

    Loading runs without refreshes, replicas or per-request fsync; afterwards the index gets
    its defaults back, is refreshed and its pending merges are run, so measurements do not race
    background merging. The shard request cache is off for good: every benchmark run must make
    the cluster compute the aggregations, not return a cached answer.
    """
    # the workbench's own mapping file (WORKBENCH_INDEX_MAPPINGS_DIR, else the checkout's)
    mappings = Path(Config.from_env().index_mappings_dir)
    spec = json.loads((mappings / "ubi" / "ubi_events.json").read_text())
    client.indices.delete(index=name, ignore=[404])
    client.indices.create(index=name, body={
        "settings": {"index": {
            "number_of_shards": 1, "number_of_replicas": 0, "auto_expand_replicas": "false",
            "refresh_interval": "-1", "translog.durability": "async",
            "requests.cache.enable": False,
        }},
        "mappings": spec["mappings"],
    })
    failures = deque(
        (item for ok, item in parallel_bulk(
            client, generate(n, seed), index=name, chunk_size=10_000, thread_count=2,
            queue_size=2, raise_on_error=False, request_timeout=600) if not ok),
        maxlen=5)
    if failures:
        raise RuntimeError(f"bulk load of {name} failed, e.g. {list(failures)}")
    client.indices.put_settings(index=name, body={"index": {
        "refresh_interval": None, "translog.durability": "request"}})
    client.indices.refresh(index=name)
    client.indices.forcemerge(index=name, request_timeout=1800)
    count = int(client.count(index=name)["count"])
    if count != n:
        raise RuntimeError(f"{name}: {count} events loaded, {n} expected")
    # Marked complete last: an interrupted load is never mistaken for a cached index.
    client.indices.put_mapping(index=name, body={"_meta": {"workbench_bench": _meta(n, seed)}})


def index_facts(client: OpenSearch, name: str) -> dict[str, Any]:
    """Size on disk and segment count of a generated index (for the report)."""
    stats = client.indices.stats(index=name, metric="store,segments")["indices"][name]["total"]
    return {"disk MiB": round(stats["store"]["size_in_bytes"] / 2**20, 1),
            "segments": stats["segments"]["count"]}


# ------------------------------------------------------------------------------------------
# Distribution check: the generated index against the real file


Stats = dict[str, Any]


def real_stats(events: list[dict[str, Any]] | None = None) -> Stats:
    """Action mix, ordinal histogram of impressions, CTR per rank and per query, of the file."""
    actions: Counter[str] = Counter()
    by_rank: dict[str, Counter[int]] = defaultdict(Counter)
    by_query: dict[str, Counter[str]] = defaultdict(Counter)
    for event in events if events is not None else real_events():
        name = event["action_name"]
        actions[name] += 1
        ordinal = ((event.get("event_attributes") or {}).get("position") or {}).get("ordinal")
        if ordinal is not None:
            by_rank[name][int(ordinal)] += 1
        if event.get("user_query") is not None:
            by_query[event["user_query"]][name] += 1
    return _stats(actions, by_rank, by_query)


def index_stats(client: OpenSearch, index: str) -> Stats:
    """The same figures for an events index, counted by the cluster."""
    body = {"size": 0, "aggs": {
        "actions": {"terms": {"field": "action_name", "size": 100}, "aggs": {
            "ranks": {"terms": {"field": "event_attributes.position.ordinal", "size": 1000}}}},
        "queries": {"terms": {"field": "user_query", "size": 100_000}, "aggs": {
            "actions": {"terms": {"field": "action_name", "size": 100}}}},
    }}
    aggs = client.search(index=index, body=body, request_timeout=600)["aggregations"]
    actions: Counter[str] = Counter()
    by_rank: dict[str, Counter[int]] = defaultdict(Counter)
    by_query: dict[str, Counter[str]] = defaultdict(Counter)
    for action in aggs["actions"]["buckets"]:
        actions[action["key"]] = action["doc_count"]
        for rank in action["ranks"]["buckets"]:
            by_rank[action["key"]][int(rank["key"])] = rank["doc_count"]
    for query in aggs["queries"]["buckets"]:
        for action in query["actions"]["buckets"]:
            by_query[query["key"]][action["key"]] = action["doc_count"]
    return _stats(actions, by_rank, by_query)


def _stats(actions: Counter[str], by_rank: dict[str, Counter[int]],
           by_query: dict[str, Counter[str]]) -> Stats:
    total = sum(actions.values())
    shown = sum(by_rank["impression"].values())
    return {
        "events": total,
        "action share": {a: c / total for a, c in actions.items()},
        "impression rank share": {r: c / shown for r, c in by_rank["impression"].items()},
        "ctr by rank": {r: by_rank["click"][r] / c for r, c in by_rank["impression"].items()
                        if r <= MAX_RANK},
        "ctr by query": {q: c["click"] / c["impression"] for q, c in by_query.items()
                         if c["impression"]},
        "impressions by query": {q: c["impression"] for q, c in by_query.items()},
    }


def _total_variation(p: dict[Any, float], q: dict[Any, float]) -> float:
    return 0.5 * sum(abs(p.get(k, 0.0) - q.get(k, 0.0)) for k in set(p) | set(q))


def compare(real: Stats, generated: Stats) -> dict[str, Any]:
    """How far the generated figures are from the real ones (0 is identical).

    Total variation distance of the action mix and of the impression ordinals; the largest
    absolute CTR difference over ranks 0..MAX_RANK; for per-query CTR, the impression-weighted
    mean absolute difference over the real queries (small queries are noisy by nature).
    """
    ranks = real["ctr by rank"]
    queries = real["ctr by query"]
    weights = real["impressions by query"]
    gen_ctr = generated["ctr by query"]
    weighted = sum(weights[q] * abs(queries[q] - gen_ctr.get(q, 0.0)) for q in queries)
    return {
        "action mix TV": round(_total_variation(real["action share"],
                                                generated["action share"]), 4),
        "impression ordinal TV": round(_total_variation(real["impression rank share"],
                                                        generated["impression rank share"]), 4),
        "max |dCTR| by rank": round(max(abs(ranks[r] - generated["ctr by rank"].get(r, 0.0))
                                        for r in ranks), 4),
        "mean |dCTR| by query": round(weighted / sum(weights[q] for q in queries), 4),
        "queries real/generated": f"{len(real['impressions by query'])}/"
                                  f"{len(generated['impressions by query'])}",
    }
