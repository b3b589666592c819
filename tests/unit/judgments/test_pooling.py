"""judgments/pooling.py: which rendered bodies can be pooled, and the clause searches."""

from __future__ import annotations

from typing import Any

import pytest

from workbench.judgments import pooling
from workbench.store.search_render import RenderedSearch

TITLE = {"match": {"title": "shoes"}}
TEXT = {"match": {"text": "shoes"}}
NEURAL = {"neural": {"embedding": {"query_text": "shoes", "k": 5}}}


def test_one_search_per_clause_in_clause_order() -> None:
    rendered = RenderedSearch("products", {
        "query": {"hybrid": {"queries": [TITLE, TEXT, NEURAL]}}, "size": 10,
        "_source": ["title"], "search_pipeline": {"phase_results_processors": []}}, "norm")
    searches = pooling.clause_searches(rendered, 3)
    assert searches == [RenderedSearch("products", {"_source": ["title"], "query": clause,
                                                    "size": 3}, None)
                        for clause in (TITLE, TEXT, NEURAL)]


def test_the_hybrid_filter_applies_to_every_clause() -> None:
    shared = {"term": {"in_stock": True}}
    body = {"query": {"hybrid": {"queries": [TITLE, TEXT], "filter": shared}}}
    assert pooling.sub_queries(body) == [{"bool": {"must": [TITLE], "filter": [shared]}},
                                         {"bool": {"must": [TEXT], "filter": [shared]}}]


@pytest.mark.parametrize("body, reason", [
    ({"query": TITLE}, "has a [match] query, not [hybrid]"),
    ({"size": 5}, "has no query, not [hybrid]"),
    ({"query": {"hybrid": {"queries": [TITLE]}}},
     "has a [hybrid] query with [1] sub-queries; pooling needs at least two"),
    ({"query": {"hybrid": {"queries": []}}},
     "has a [hybrid] query with [0] sub-queries; pooling needs at least two"),
    ({"query": {"hybrid": {}}}, "has a [hybrid] query without a list of sub-queries"),
    ({"query": {"hybrid": {"queries": [TITLE, "x"]}}},
     "has a [hybrid] query without a list of sub-queries"),
    ({"query": {"bool": {"must": [{"hybrid": {"queries": [TITLE, TEXT]}}]}}},
     "has a [bool] query, not [hybrid]"),
])
def test_refusals(body: dict[str, Any], reason: str) -> None:
    assert pooling.refusal("c1", body) == (
        f"expandCoverage requires a hybrid search configuration: search configuration [c1] "
        f"{reason}")


def test_a_two_clause_hybrid_is_accepted() -> None:
    assert pooling.refusal("c1", {"query": {"hybrid": {"queries": [TITLE, NEURAL]}}}) is None
