"""Query-set samplers over a UBI queries index (docs/algorithms.md, "Query-set samplers").

Every sampler asks the cluster for counts with aggregations; no sampler reads the query
documents one by one, so they work the same on a thousand or a hundred million UBI queries.
``since`` keeps only the queries of a recent window (a monitor's sample, workbench/monitors).
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from typing import Any

import numpy as np
from opensearchpy import OpenSearch

from workbench.schemas import query_sets
from workbench.store import ubi_queries

FIELD = "user_query"
NON_EMPTY = {
    "bool": {
        "must": [{"exists": {"field": FIELD}}],
        "must_not": [{"term": {FIELD: ""}}],
    }
}
SAMPLERS = query_sets.SAMPLERS
#: the UBI queries' time field (a monitor samples the queries of a recent window)
TIME_FIELD = "timestamp"


def _wanted(since: str | None) -> dict[str, Any]:
    """The non-blank queries, only those at or after ``since`` (an OpenSearch date or date
    math such as ``now-7d``) when given."""
    if since is None:
        return NON_EMPTY
    return {"bool": {"must": NON_EMPTY["bool"]["must"],
                     "must_not": NON_EMPTY["bool"]["must_not"],
                     "filter": [{"range": {TIME_FIELD: {"gte": since}}}]}}


def topn(client: OpenSearch, index: str, size: int, since: str | None = None) -> list[str]:
    """The ``size`` most frequent non-blank queries, most frequent first (ties by text)."""
    body = {
        "size": 0,
        "query": _wanted(since),
        "aggs": {"By_User_Query": {"terms": {"field": FIELD, "size": size}}},
    }
    answer = ubi_queries.search(client, index, body)
    buckets = answer["aggregations"]["By_User_Query"]["buckets"]
    return [b["key"] for b in buckets if str(b["key"]).strip()]


def random_sample(client: OpenSearch, index: str, size: int,
                  rng: random.Random | None = None, since: str | None = None) -> list[str]:
    """``size`` distinct non-blank queries, each distinct query equally likely.

    The plugin scores documents with ``random_score`` and collapses on the query, which favours
    frequent queries (their best document is the maximum of many draws). Seeding the score on the
    query text itself gives every document of one query the same score, so each distinct query
    is one uniform draw.
    """
    seed = (rng or random.SystemRandom()).randrange(1, 2**31 - 1)
    body = {
        "size": size,
        "_source": [FIELD],
        "query": {"function_score": {
            "query": _wanted(since),
            "functions": [{"random_score": {"seed": seed, "field": FIELD}}],
            "boost_mode": "replace",
        }},
        "collapse": {"field": FIELD},
    }
    hits = ubi_queries.search(client, index, body)["hits"]["hits"]
    out = []
    for hit in hits:
        value = (hit.get("fields") or {}).get(FIELD, [None])[0] or hit["_source"].get(FIELD)
        if value is not None and str(value).strip():
            out.append(str(value))
    return out


def query_counts(client: OpenSearch, index: str,
                 since: str | None = None) -> Iterator[tuple[str, int]]:
    """(query, number of documents) for every distinct ``user_query``, paged with a composite
    aggregation so that any number of distinct queries is counted exactly."""
    after: dict[str, Any] | None = None
    while True:
        composite: dict[str, Any] = {"size": 10_000,
                                     "sources": [{"q": {"terms": {"field": FIELD}}}]}
        if after:
            composite["after"] = after
        body: dict[str, Any] = {"size": 0, "aggs": {"q": {"composite": composite}}}
        if since is not None:
            body["query"] = {"range": {TIME_FIELD: {"gte": since}}}
        answer = ubi_queries.search(client, index, body)
        agg = answer["aggregations"]["q"]
        for bucket in agg["buckets"]:
            yield str(bucket["key"]["q"]), int(bucket["doc_count"])
        after = agg.get("after_key")
        if not agg["buckets"] or after is None:
            return


def pptss(client: OpenSearch, index: str, size: int,
          rng: np.random.Generator | None = None, since: str | None = None) -> list[str]:
    """Probability-proportional-to-size sampling without replacement.

    Each draw picks query q with probability count(q) / total; repeats are ignored; drawing
    stops when ``min(size, distinct)`` queries are held or after ``max(size * 100, 1000)`` draws.
    Blank queries count towards the total (as every UBI query does) but are never kept.
    """
    counted = list(query_counts(client, index, since))
    if not counted or size <= 0:
        return []
    queries = [q for q, _ in counted]
    weights = np.array([c for _, c in counted], dtype=float)
    probabilities = weights / weights.sum()
    keepable = sum(1 for q in queries if q.strip())
    target = min(size, keepable)
    budget = max(size * 100, 1000)
    generator = rng or np.random.default_rng()
    chosen: list[str] = []
    seen: set[int] = set()
    draws = 0
    while len(chosen) < target and draws < budget:
        batch = generator.choice(len(queries), size=min(budget - draws, 4 * size),
                                 p=probabilities)
        for pick in batch:
            draws += 1
            if pick not in seen:
                seen.add(int(pick))
                if queries[pick].strip():
                    chosen.append(queries[pick])
                if len(chosen) >= target:
                    break
    return chosen


def index_is_usable(client: OpenSearch, index: str) -> bool:
    """The index exists and its mapping has ``user_query``."""
    return ubi_queries.has_field(client, index, FIELD)
