"""Bulk writes and what follows them: refreshing the indices written and counting them.

Experiments write evaluation results and variants in large ``_bulk`` batches from a background
thread; ``workbench load-demo`` streams a catalogue and UBI files. Both go through here, so
``store`` stays the only package that talks to OpenSearch.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

from opensearchpy import OpenSearch
from opensearchpy.helpers import bulk, streaming_bulk


def write(client: OpenSearch, actions: list[dict[str, Any]], *, chunk_size: int,
          max_chunk_bytes: int, request_timeout: int) -> tuple[int, Any]:
    """opensearch-py's ``helpers.bulk``: raises ``BulkIndexError`` on the first failed item."""
    return bulk(client, actions, chunk_size=chunk_size, max_chunk_bytes=max_chunk_bytes,
                request_timeout=request_timeout)


def stream(client: OpenSearch, actions: Iterable[dict[str, Any]], *, chunk_size: int,
           request_timeout: int) -> Iterator[tuple[bool, dict[str, Any]]]:
    """(ok, item) for every action, ``chunk_size`` actions a request; a failed item raises."""
    yield from streaming_bulk(client, actions, chunk_size=chunk_size, raise_on_error=True,
                              request_timeout=request_timeout)


def refresh(client: OpenSearch, index: str) -> None:
    """Make what was written searchable (``index``: one name or a comma-separated list)."""
    client.indices.refresh(index=index)


def count(client: OpenSearch, index: str) -> int:
    return int(client.count(index=index)["count"])
