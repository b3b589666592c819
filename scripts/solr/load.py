"""Index the shipped product catalogue into scripts/solr.sh's ``products`` core.

``python load.py SOLR_URL CATALOGUE``: reads the catalogue's JSON lines, gives each document the
``id`` the demo OpenSearch index uses as ``_id`` (``_id``, else ``asin``: workbench/demo/load.py),
drops the nulls Solr would refuse for typed fields, and posts them to ``/update`` in batches,
then commits. Skips the work when the core already holds as many documents as the catalogue, so
a second ``load`` is a count query. Standard library only: the script runs before any
virtualenv exists.
"""

from __future__ import annotations

import gzip
import json
import sys
import urllib.request
from typing import Any

BATCH = 1000


def documents(path: str) -> list[dict[str, Any]]:
    opener = gzip.open if path.endswith(".gz") else open
    docs = []
    with opener(path, "rt", encoding="utf-8") as lines:
        for line in lines:
            if not line.strip():
                continue
            doc = json.loads(line)
            doc_id = doc.pop("_id", None) or doc.get("asin")
            docs.append({"id": doc_id, **{k: v for k, v in doc.items() if v is not None}})
    return docs


def call(url: str, body: Any = None) -> Any:
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=120) as answer:
        return json.load(answer)


def count(core: str) -> int:
    return int(call(f"{core}/select?q=*:*&rows=0&wt=json")["response"]["numFound"])


def main(solr_url: str, path: str) -> int:
    core = f"{solr_url.rstrip('/')}/products"
    docs = documents(path)
    held = count(core)
    if held == len(docs):
        print(f"the products core already holds the {held} products", file=sys.stderr)
        return 0
    # Whatever else it holds (a partial load, another catalogue) goes first.
    call(f"{core}/update?commit=true", {"delete": {"query": "*:*"}})
    for start in range(0, len(docs), BATCH):
        call(f"{core}/update", docs[start:start + BATCH])
    call(f"{core}/update?commit=true", {"commit": {}})
    held = count(core)
    if held != len(docs):
        print(f"the products core holds {held} products, not {len(docs)}", file=sys.stderr)
        return 1
    print(f"indexed {held} products into {core}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:3]))
