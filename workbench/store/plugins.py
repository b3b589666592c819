"""Which plugins the cluster runs (checked at most once a minute per process)."""

from __future__ import annotations

import threading
import time

from opensearchpy import OpenSearch

from workbench.store.identity import as_service

_TTL = 60.0
_lock = threading.Lock()
_cache: dict[int, tuple[float, frozenset[str]]] = {}


def installed(client: OpenSearch) -> frozenset[str]:
    """Component names from ``_cat/plugins`` (e.g. ``opensearch-ml``, ``opensearch-ubi``)."""
    with _lock:
        checked_at, names = _cache.get(id(client), (0.0, frozenset()))
        if time.monotonic() - checked_at < _TTL:
            return names
    with as_service(client):  # cluster metadata the workbench needs, not the caller's data
        rows = client.cat.plugins(params={"format": "json"})
    names = frozenset(str(row.get("component")) for row in rows)
    with _lock:
        _cache[id(client)] = (time.monotonic(), names)
    return names


def has(client: OpenSearch, *components: str) -> bool:
    return bool(installed(client) & set(components))
