"""``expandCoverage`` on an ``LLM_JUDGMENT`` of a ``hybrid`` configuration: the documents to rate
are a pool, not the configuration's own top ``size`` (docs/contract.md, "LLM judgments:
expandCoverage").

The plugin's proposal (opensearch-project/search-relevance#401, its pull request #400) runs the
hybrid search several times with different sub-query weights (for two sub-queries 0.0, 0.5 and
1.0 on the first: lexical only, balanced, neural only) and pools the union of the ids. The
workbench pools the union, in order, of each sub-query's own top ``size`` hits, each clause run
as an ordinary search (as experiments/hybrid.py runs clauses on a cluster without neural-search),
and nothing else. That is the same pool: with one-hot weights a hybrid search ranks exactly one
clause's hits first, and the balanced fused list is drawn from the sub-queries' top lists
(hybrid's depth per sub-query is ``from + size``), so its top ``size`` is inside the union. For N
sub-queries the pool is the N clauses' top ``size`` (the N one-hot searches; an equal-weight one
adds nothing). One approximation: on an index of several shards neural-search collects each
shard's top hits per sub-query, so its balanced list can, rarely, hold a document outside the
union of the sub-queries' global top ``size``. It needs no neural-search plugin.

The configuration's search pipeline is not used: a hybrid configuration's pipeline is its
normalisation, which the plugin's pooling replaces with its own weights, and a single clause
has nothing to normalise. A ``filter`` of the ``hybrid`` query applies to every clause, as it
does in neural-search.
"""

from __future__ import annotations

from typing import Any

from workbench.store.search_render import RenderedSearch

#: the metadata flag (and request field) that asks for the pool
FLAG = "expandCoverage"
#: the finished metadata's count of distinct (query, document) pairs pooled
POOLED = "pooledDocuments"


class NotHybrid(ValueError):
    """A rendered search body that cannot be pooled; the message says what it has instead."""


def sub_queries(body: dict[str, Any]) -> list[dict[str, Any]]:
    """The clauses of a body whose ``query`` is a top-level ``hybrid`` of at least two
    sub-queries, each with the hybrid's ``filter`` (when it has one); else ``NotHybrid``."""
    query = body.get("query")
    if not isinstance(query, dict) or not query:
        raise NotHybrid("has no query, not [hybrid]")
    if list(query) != ["hybrid"]:
        raise NotHybrid(f"has a [{', '.join(query)}] query, not [hybrid]")
    hybrid = query["hybrid"]
    clauses = hybrid.get("queries") if isinstance(hybrid, dict) else None
    if not isinstance(clauses, list) or not all(isinstance(c, dict) for c in clauses):
        raise NotHybrid("has a [hybrid] query without a list of sub-queries")
    if len(clauses) < 2:
        raise NotHybrid(f"has a [hybrid] query with [{len(clauses)}] sub-queries; pooling "
                        "needs at least two")
    shared = hybrid.get("filter")
    if shared is None:
        return list(clauses)
    return [{"bool": {"must": [clause], "filter": [shared]}} for clause in clauses]


def clause_searches(rendered: RenderedSearch, size: int) -> list[RenderedSearch]:
    """One ordinary search per sub-query of a rendered hybrid search, in clause order: the
    body's other keys kept, ``size`` hits each, no search pipeline."""
    clauses = sub_queries(rendered.body)
    rest = {k: v for k, v in rendered.body.items()
            if k not in ("query", "size", "search_pipeline")}
    return [RenderedSearch(rendered.index, {**rest, "query": clause, "size": size}, None)
            for clause in clauses]


def refusal(config_id: str, body: dict[str, Any]) -> str | None:
    """The 400 of ``expandCoverage`` for a configuration whose rendered ``body`` cannot be
    pooled, naming the configuration and what its query is; None when it can."""
    try:
        sub_queries(body)
    except NotHybrid as exc:
        return (f"{FLAG} requires a hybrid search configuration: search configuration "
                f"[{config_id}] {exc}")
    return None
