"""``workbench load-demo``: the demo product catalogue and the ESCI UBI queries and events.

The demo data ships inside the package (``workbench/demo/data``, attribution in its
``NOTICE.md``): with no file named, ``load-demo`` loads the shipped catalogue and UBI sample.

An index that already holds the whole shipped catalogue is left as it is (as ``workbench demo``
does): writing the same documents again would leave their old versions in the index's
statistics (BM25's document counts) until a merge, and the demo would rank slightly
differently after every load.
"""

from __future__ import annotations

import gzip
import json
from collections.abc import Iterator
from functools import cache
from pathlib import Path
from typing import Any

from opensearchpy import OpenSearch

from workbench.config import Config
from workbench.store import bulk
from workbench.store.bootstrap import ensure_index, load_spec
from workbench.store.client import make_client

BATCH = 1000
DATA = Path(__file__).resolve().parent / "data"
PRODUCTS = DATA / "ubi_ecommerce_products.json.gz"
UBI = DATA / "ubi_queries_events.ndjson.gz"
QUERY_SET = DATA / "esci_us_queryset.json.gz"
JUDGMENTS = DATA / "esci_us_judgments.json.gz"


def read_json(path: Path) -> Any:
    """A shipped JSON file (gzipped or not)."""
    with _open(path) as f:
        return json.load(f)


def load_demo(
    config: Config, products: str | None, products_index: str, ubi: str | None
) -> dict[str, int]:
    """Index what was given; returns the document count of every index written."""
    client = make_client(config)
    written: list[str] = []
    if products and not _holds_shipped_catalogue(client, Path(products), products_index):
        ensure_index(client, load_spec(config.index_mappings_dir, "demo/ecommerce.json"),
                     products_index)
        _bulk(client, product_actions(Path(products), products_index))
    if products:
        written.append(products_index)
    if ubi:
        for name in ("ubi_queries", "ubi_events"):
            ensure_index(client, load_spec(config.index_mappings_dir, f"ubi/{name}.json"))
        written.extend(_bulk(client, _ndjson_actions(Path(ubi))))
    bulk.refresh(client, ",".join(sorted(set(written))))
    return {name: bulk.count(client, name) for name in sorted(set(written))}


@cache
def shipped_catalogue_size() -> int:
    """How many products the shipped catalogue holds (an index holding as many is complete)."""
    return sum(1 for _ in product_actions(PRODUCTS, ""))


def _holds_shipped_catalogue(client: OpenSearch, products: Path, index: str) -> bool:
    if products != PRODUCTS or not client.indices.exists(index=index):
        return False
    return bulk.count(client, index) == shipped_catalogue_size()


def _bulk(client: OpenSearch, actions: Iterator[dict[str, Any]]) -> list[str]:
    indices: set[str] = set()
    for ok, item in bulk.stream(client, actions, chunk_size=BATCH, request_timeout=120):
        if ok:
            indices.add(next(iter(item.values()))["_index"])
    return sorted(indices)


def _open(path: Path) -> Any:
    return gzip.open(path, "rt", encoding="utf-8") if path.suffix == ".gz" else path.open()


def product_actions(path: Path, index: str) -> Iterator[dict[str, Any]]:
    """JSON lines whose documents carry their ``_id`` (as Dashboards' sample file does)."""
    with _open(path) as lines:
        for line in lines:
            if not line.strip():
                continue
            doc = json.loads(line)
            doc_id = doc.pop("_id", None) or doc.get("asin")
            yield {"_op_type": "index", "_index": index, "_id": doc_id, "_source": doc}


def _ndjson_actions(path: Path) -> Iterator[dict[str, Any]]:
    """A bulk NDJSON file: action line, then document line."""
    with _open(path) as lines:
        for line in lines:
            if not line.strip():
                continue
            action = json.loads(line)
            (op, meta), = action.items()
            source = json.loads(next(lines))
            yield {"_op_type": op, "_index": meta["_index"], "_id": meta.get("_id"),
                   "_source": source}
