"""One search for one query, answered while the caller waits (``_evaluate`` over a search
configuration); the many searches of a job go through ``store/search.py`` instead."""

from __future__ import annotations

from typing import Any

from opensearchpy import OpenSearch

from workbench.store.search_render import render


def search_hits(client: OpenSearch, config: dict[str, Any], query_text: str,
                size: int) -> tuple[list[dict[str, Any]], str]:
    """The hits (as the cluster answers them: ``_id``, ``_source``) of ``query_text`` searched
    under ``config`` (``index``, ``query``, ``searchPipeline``) for ``size`` results, and the
    index searched. Errors of rendering and of the cluster are raised as they are."""
    search = render(config, query_text, size)
    answer = client.search(index=search.index, body=search.body, params=search.params())
    hits: list[dict[str, Any]] = answer["hits"]["hits"]
    return hits, search.index
