"""Reading a UBI queries index for the query-set samplers (``querysets/sampling.py``).

The samplers build their aggregations; the searches and the mapping check are made here, so
``store`` stays the only package that talks to OpenSearch. Unlike ``Repository.search`` a
missing index is not read as empty: the samplers check the index first, and a search that
fails afterwards fails as the cluster answered.
"""

from __future__ import annotations

from typing import Any

from opensearchpy import OpenSearch

from workbench.store.indices import index_exists


def search(client: OpenSearch, index: str, body: dict[str, Any]) -> dict[str, Any]:
    """One search on the UBI queries index, answered as the cluster answers it."""
    answer: dict[str, Any] = client.search(index=index, body=body)
    return answer


def has_field(client: OpenSearch, index: str, field: str) -> bool:
    """The index exists and the mapping of one of its indices has top-level ``field``."""
    if not index_exists(client, index):
        return False
    mappings = client.indices.get_mapping(index=index)
    return any(field in (m.get("mappings", {}).get("properties") or {})
               for m in mappings.values())
