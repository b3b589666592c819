"""Reading a client's index for query generation (``querygen/documents.py``): its mappings, the
values of a keyword field, and its documents in a seeded random order.

``querygen`` decides what to draw; the calls are made here, so ``store`` stays the only package
that talks to OpenSearch. A missing index raises opensearch-py's ``NotFoundError`` as the cluster
answers it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from opensearchpy import OpenSearch

#: the most documents one search asks for (far below ``index.max_result_window``)
PAGE_LIMIT = 1000


def index_mappings(client: OpenSearch, index: str) -> dict[str, dict[str, Any]]:
    """``{concrete index: its mapping}`` of an index, alias or pattern (empty when a pattern
    names no index); a missing index raises ``NotFoundError``."""
    answer = client.indices.get_mapping(index=index)
    return {name: (spec.get("mappings") or {}) for name, spec in answer.items()}


def value_counts(client: OpenSearch, index: str, field: str, size: int) -> list[tuple[str, int]]:
    """The ``size`` most frequent values of a keyword ``field`` with their document counts, most
    frequent first (ties by value, the terms aggregation's own order)."""
    body = {"size": 0, "track_total_hits": False,
            "aggs": {"values": {"terms": {"field": field, "size": size}}}}
    answer = client.search(index=index, body=body)
    buckets = answer.get("aggregations", {}).get("values", {}).get("buckets") or []
    return [(str(b.get("key_as_string", b["key"])), int(b["doc_count"])) for b in buckets]


def random_page(client: OpenSearch, index: str, seed: int, offset: int, size: int,
                includes: Sequence[str] = (), excludes: Sequence[str] = (),
                term: tuple[str, str] | None = None) -> list[tuple[str, dict[str, Any]]]:
    """``(id, _source)`` of the documents at ``offset`` to ``offset + size`` of the index in a
    random order fixed by ``seed`` (``random_score`` over ``_seq_no``: the same index contents
    and seed give the same order), optionally only those whose ``term[0]`` is ``term[1]``.
    ``includes``/``excludes`` filter ``_source`` (dotted paths and wildcards)."""
    query: dict[str, Any] = {"term": {term[0]: term[1]}} if term else {"match_all": {}}
    source: dict[str, Any] = {}
    if includes:
        source["includes"] = list(includes)
    if excludes:
        source["excludes"] = list(excludes)
    body: dict[str, Any] = {
        "from": offset, "size": size, "track_total_hits": False,
        "query": {"function_score": {
            "query": query,
            "functions": [{"random_score": {"seed": seed, "field": "_seq_no"}}],
            "boost_mode": "replace"}},
    }
    if source:
        body["_source"] = source
    answer = client.search(index=index, body=body)
    return [(str(hit["_id"]), hit.get("_source") or {}) for hit in answer["hits"]["hits"]]
