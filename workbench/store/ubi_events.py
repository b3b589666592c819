"""Click and impression counts from a UBI events index, computed by the cluster with aggregations.

No event is ever pulled into Python: the rank click-through rates come from one terms
aggregation, the per (query, document, rank) counts from a composite aggregation read page by
page, so memory grows with the number of distinct query-document-rank cells, never with events.
"""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any, NamedTuple

from opensearchpy import OpenSearch

from workbench.store.identity import carry
from workbench.store.indices import index_exists
from workbench.store.search import check_shards

ORDINAL = "event_attributes.position.ordinal"
OBJECT_ID = "event_attributes.object.object_id"
REQUIRED_FIELDS = ("query_id", "action_name", OBJECT_ID)
PAGE = 10_000


def missing_fields(client: OpenSearch, index: str) -> list[str] | None:
    """None when the index does not exist; else the required UBI fields its mapping lacks.
    Whether it exists (``index_exists``, which answers a caller who may not search it with the
    cluster's 403) and its mapping are asked at once: one round trip, not two, and the answer
    is the one the two calls made in turn would give."""
    with ThreadPoolExecutor(1, thread_name_prefix="ubi-mapping") as pool:
        mapping = pool.submit(carry(client.indices.get_mapping), index=index)
        if not index_exists(client, index):
            return None
        mappings = mapping.result()
    found: set[str] = set()
    for mapping in mappings.values():
        found |= set(_paths(mapping.get("mappings", {}).get("properties") or {}))
    return [field for field in REQUIRED_FIELDS if field not in found]


def unusable_index_message(index: str, given: bool) -> str:
    """The plugin's refusal of an events index that does not exist or lacks the UBI fields:
    ``given`` when the request named it in ``ubiEventsIndex``."""
    fields = ", ".join(REQUIRED_FIELDS)
    if given:
        return (f"The UBI events index [{index}] set by the 'ubiEventsIndex' parameter does not "
                f"exist or is missing required UBI event fields ({fields}). Ingest UBI events "
                "data into it, or set the 'ubiEventsIndex' parameter to an existing UBI events "
                "index.")
    return (f"No 'ubiEventsIndex' parameter was provided and the default UBI events index "
            f"[{index}] does not exist or is missing required UBI event fields ({fields}). "
            f"Ingest UBI events data into [{index}], or set the 'ubiEventsIndex' parameter to "
            "an existing UBI events index.")


def _paths(properties: dict[str, Any], prefix: str = "") -> Iterator[str]:
    for name, spec in properties.items():
        yield prefix + name
        yield from _paths(spec.get("properties") or {}, f"{prefix}{name}.")


def event_filter(max_rank: int, start_date: str | None, end_date: str | None) -> dict[str, Any]:
    """The contract's filter F: ordinal <= maxRank, and the date window when one is given
    (``lte`` on a bare date includes that whole day, as OpenSearch rounds it up)."""
    must: list[dict[str, Any]] = [{"range": {ORDINAL: {"lte": max_rank}}}]
    if start_date or end_date:
        window: dict[str, Any] = {"format": "yyyy-MM-dd"}
        if start_date:
            window["gte"] = start_date
        if end_date:
            window["lte"] = end_date
        must.append({"range": {"timestamp": window}})
    return {"bool": {"must": must}}


def rank_counts(client: OpenSearch, index: str, query: dict[str, Any],
                max_rank: int) -> tuple[dict[int, int], dict[int, int]]:
    """Clicks and impressions per rank (COEC step 1), action names compared case-insensitively.

    Like the plugin, the position terms aggregation keeps only the ``max_rank`` most frequent
    ranks, so a rarely seen rank can be missing (and then has no click-through rate).
    """
    body = {
        "size": 0,
        "query": query,
        "aggs": {"actions": {
            "terms": {"field": "action_name", "size": 100},
            "aggs": {"positions": {"terms": {"field": ORDINAL, "size": max_rank}}},
        }},
    }
    answer = check_shards(client.search(index=index, body=body, request_timeout=300), index)
    clicks: dict[int, int] = {}
    impressions: dict[int, int] = {}
    for action in answer["aggregations"]["actions"]["buckets"]:
        name = str(action["key"]).lower()
        target = clicks if name == "click" else impressions if name == "impression" else None
        if target is None:
            continue
        for position in action["positions"]["buckets"]:
            rank = int(position["key"])
            target[rank] = target.get(rank, 0) + int(position["doc_count"])
    return clicks, impressions


class Cell(NamedTuple):
    """Counts of one (query, document, rank) cell (a tuple: a judgment reads thousands)."""

    query: str
    doc: str
    rank: int
    clicks: int
    impressions: int


def cells(client: OpenSearch, index: str, query: dict[str, Any]) -> Iterator[Cell]:
    """Every (query, document, rank) cell with its click and impression counts, paged.

    Events lacking ``user_query``, the object id or the rank are left out (composite sources
    skip documents without a value); a cell seen only through other actions has 0/0 counts.

    The action is the composite's last source (events without one fall in its ``missing``
    bucket, so they still make their cell) rather than a terms sub-aggregation per cell: the
    cluster then needs no second pass over the cell's events, which halves its time. A cell's
    action buckets are consecutive, possibly across two pages, and are summed here. A page with
    fewer than ``PAGE`` buckets is the last one, so no request is spent on an empty page.
    """
    after: dict[str, Any] | None = None
    current: tuple[Any, Any, Any] | None = None
    clicks = impressions = 0
    while True:
        composite: dict[str, Any] = {
            "size": PAGE,
            "sources": [
                {"q": {"terms": {"field": "user_query"}}},
                {"d": {"terms": {"field": OBJECT_ID}}},
                {"r": {"terms": {"field": ORDINAL}}},
                {"a": {"terms": {"field": "action_name", "missing_bucket": True}}},
            ],
        }
        if after:
            composite["after"] = after
        body = {"size": 0, "query": query, "aggs": {"cells": {"composite": composite}}}
        answer = check_shards(client.search(index=index, body=body, request_timeout=300), index)
        page = answer["aggregations"]["cells"]
        buckets = page["buckets"]
        for bucket in buckets:
            key = bucket["key"]
            cell = (key["q"], key["d"], key["r"])
            if cell != current:
                if current is not None:
                    yield _cell(current, clicks, impressions)
                current, clicks, impressions = cell, 0, 0
            name = str(key["a"]).lower() if key["a"] is not None else None
            if name == "click":
                clicks += int(bucket["doc_count"])
            elif name == "impression":
                impressions += int(bucket["doc_count"])
        after = page.get("after_key")
        if len(buckets) < PAGE or after is None:
            break
    if current is not None:
        yield _cell(current, clicks, impressions)


def _cell(key: tuple[Any, Any, Any], clicks: int, impressions: int) -> Cell:
    return Cell(str(key[0]), str(key[1]), int(key[2]), clicks, impressions)
