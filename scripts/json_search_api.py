"""A small real search service that is not OpenSearch: the remote engine of the remote search
configurations' tests whose answers must be mapped (``responseTemplate``) to be read.

SQLite FTS5 ranks the shipped product catalogue (workbench/demo/data/ubi_ecommerce_products.json.gz)
with its BM25 (``bm25()``, default parameters, every column weighing 1) over title, description,
bullet_points, brand and color. The query text's words (runs of letters and digits, as FTS5's
unicode61 tokenizer reads them) are OR-ed, so a product matching any word is found. Answers are
deliberately not OpenSearch-shaped:

    GET  /search?q=TEXT&limit=N      (limit 1..1000, default 10)
    POST /search {"q": TEXT, "limit": N}
    -> {"total": n, "results": [{"sku": "<product id>", "relevance": <-bm25>,
                                 "product": {"title": ..., "brand": ..., ...}}]}

``sku`` is the id the demo OpenSearch index gives the product (``_id``: workbench/demo/load.py);
``relevance`` is FTS5's bm25() negated, so higher is better; ``total`` counts every match. A bad
parameter answers 400 ``{"error": "..."}``.

Test knobs (for the tests only; nothing guards them, the service listens on loopback):

    POST   /_faults {"status": 429|503|..., "retryAfter": s, "delayMs": n, "body": "...",
                     "count": n}
           the next ``count`` (default 1) searches wait ``delayMs``, then, when ``status`` is
           given, answer it with ``body`` (default ``{"error": "injected fault"}``) and a
           ``Retry-After: s`` header when ``retryAfter`` is given; a later POST replaces it.
    GET    /_faults    the pending fault and how many searches it still applies to
    DELETE /_faults    no more faults
    GET    /_requests  {"count": n, "times": [unix seconds, ...], "queries": [text, ...]}:
                       the searches received (faulted ones too), in arrival order, each with
                       its ``q`` (null when it has none)
    DELETE /_requests  forget them

Written by hand over the standard library (``http.server``'s ThreadingHTTPServer) and SQLite:
a few lines, no framework needed, and nothing to install before the tests can start it
(``scripts/json_search_api.sh start``; ``tests/support/services.json_search_api_url()``).
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import re
import sqlite3
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

CATALOGUE = (Path(__file__).resolve().parents[1]
             / "workbench" / "demo" / "data" / "ubi_ecommerce_products.json.gz")
TEXT_FIELDS = ("title", "description", "bullet_points", "brand", "color")
WORDS = re.compile(r"[^\W_]+")
MAX_LIMIT = 1000
FAULT_KEYS = {"status", "retryAfter", "delayMs", "body", "count"}


class BadRequest(Exception):
    """A parameter the service refuses; its message is the 400's ``error``."""


class Catalogue:
    """The products in an in-memory FTS5 table; one connection behind a lock (queries take
    milliseconds)."""

    def __init__(self, path: Path) -> None:
        self._lock = threading.Lock()
        self._db = sqlite3.connect(":memory:", check_same_thread=False)
        self._db.execute(f"CREATE VIRTUAL TABLE products USING fts5({', '.join(TEXT_FIELDS)})")
        self._db.execute("CREATE TABLE docs (rowid INTEGER PRIMARY KEY, sku TEXT, product TEXT)")
        opener: Any = gzip.open if path.suffix == ".gz" else open
        with opener(path, "rt", encoding="utf-8") as lines:
            for rowid, line in enumerate((line for line in lines if line.strip()), start=1):
                doc = json.loads(line)
                sku = doc.pop("_id", None) or doc.get("asin")
                self._db.execute(f"INSERT INTO products (rowid, {', '.join(TEXT_FIELDS)}) "
                                 f"VALUES (?{', ?' * len(TEXT_FIELDS)})",
                                 (rowid, *(doc.get(field) or "" for field in TEXT_FIELDS)))
                self._db.execute("INSERT INTO docs VALUES (?, ?, ?)",
                                 (rowid, sku, json.dumps(doc)))
        self._db.commit()
        self.size = self._db.execute("SELECT count(*) FROM docs").fetchone()[0]

    def search(self, text: str, limit: int) -> dict[str, Any]:
        words = WORDS.findall(text.lower())
        if not words:
            return {"total": 0, "results": []}
        match = " OR ".join(f'"{word}"' for word in words)
        with self._lock:
            total = self._db.execute("SELECT count(*) FROM products WHERE products MATCH ?",
                                     (match,)).fetchone()[0]
            rows = self._db.execute(
                "SELECT d.sku, -bm25(products), d.product FROM products JOIN docs d "
                "ON d.rowid = products.rowid WHERE products MATCH ? "
                "ORDER BY bm25(products), products.rowid LIMIT ?", (match, limit)).fetchall()
        return {"total": total, "results": [
            {"sku": sku, "relevance": relevance, "product": json.loads(product)}
            for sku, relevance, product in rows]}


class Knobs:
    """The pending fault and the log of searches received (the test knobs)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.fault: dict[str, Any] = {}
        self.remaining = 0
        self.times: list[float] = []
        self.queries: list[str | None] = []

    def set_fault(self, body: Any) -> dict[str, Any]:
        if not isinstance(body, dict):
            raise BadRequest("the body must be a JSON object")
        unknown = sorted(set(body) - FAULT_KEYS)
        if unknown:
            raise BadRequest(f"unknown fields {unknown}; known: {sorted(FAULT_KEYS)}")
        status = body.get("status")
        if status is not None and not (_is_int(status) and 100 <= status <= 599):
            raise BadRequest("status must be an HTTP status code (100..599)")
        retry_after = body.get("retryAfter")
        if retry_after is not None and not (_is_number(retry_after) and retry_after >= 0):
            raise BadRequest("retryAfter must be a number of seconds >= 0")
        delay = body.get("delayMs", 0)
        if not (_is_int(delay) and delay >= 0):
            raise BadRequest("delayMs must be an integer >= 0")
        if "body" in body and not isinstance(body["body"], str):
            raise BadRequest("body must be a string")
        count = body.get("count", 1)
        if not (_is_int(count) and count >= 1):
            raise BadRequest("count must be an integer >= 1")
        with self._lock:
            self.fault = {key: value for key, value in body.items() if key != "count"}
            self.remaining = count
            return self.pending()

    def pending(self) -> dict[str, Any]:
        return {"fault": self.fault if self.remaining else None, "remaining": self.remaining}

    def clear_fault(self) -> None:
        with self._lock:
            self.fault, self.remaining = {}, 0

    def arrived(self, text: str | None) -> dict[str, Any] | None:
        """Log a search (and its query text); the fault it meets (then one fewer remains), if
        any."""
        with self._lock:
            self.times.append(time.time())
            self.queries.append(text)
            if not self.remaining:
                return None
            self.remaining -= 1
            return self.fault

    def requests(self) -> dict[str, Any]:
        with self._lock:
            return {"count": len(self.times), "times": list(self.times),
                    "queries": list(self.queries)}

    def forget_requests(self) -> None:
        with self._lock:
            self.times.clear()
            self.queries.clear()


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _limit(value: Any) -> int:
    if isinstance(value, str):
        if not value.isdigit():
            raise BadRequest(f"limit must be an integer from 1 to {MAX_LIMIT}, not [{value}]")
        value = int(value)
    if not (_is_int(value) and 1 <= value <= MAX_LIMIT):
        raise BadRequest(f"limit must be an integer from 1 to {MAX_LIMIT}, not [{value}]")
    return int(value)


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: Server

    def log_message(self, format: str, *args: Any) -> None:
        print(f"{self.address_string()} {format % args}", flush=True)

    def do_GET(self) -> None:
        self._route("GET")

    def do_POST(self) -> None:
        self._route("POST")

    def do_DELETE(self) -> None:
        self._route("DELETE")

    def _route(self, method: str) -> None:
        url = urlsplit(self.path)
        raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        try:
            if url.path == "/search" and method in ("GET", "POST"):
                self._search(method, url.query, raw)
            elif url.path == "/_faults" and method == "POST":
                self._answer(200, self.server.knobs.set_fault(_json(raw)))
            elif url.path == "/_faults" and method == "GET":
                self._answer(200, self.server.knobs.pending())
            elif url.path == "/_faults" and method == "DELETE":
                self.server.knobs.clear_fault()
                self._answer(200, {"acknowledged": True})
            elif url.path == "/_requests" and method == "GET":
                self._answer(200, self.server.knobs.requests())
            elif url.path == "/_requests" and method == "DELETE":
                self.server.knobs.forget_requests()
                self._answer(200, {"acknowledged": True})
            elif url.path == "/" and method == "GET":
                self._answer(200, {"name": "json-search-api",
                                   "products": self.server.catalogue.size})
            else:
                self._answer(404, {"error": f"no route for {method} {url.path}"})
        except BadRequest as error:
            self._answer(400, {"error": str(error)})

    def _search(self, method: str, query: str, raw: bytes) -> None:
        fault = self.server.knobs.arrived(_query_text(method, query, raw))
        if fault:
            time.sleep(fault.get("delayMs", 0) / 1000)
            if fault.get("status") is not None:
                headers = ({"Retry-After": _seconds(fault["retryAfter"])}
                           if fault.get("retryAfter") is not None else {})
                body = fault.get("body", json.dumps({"error": "injected fault"}))
                self._send(fault["status"], body.encode(), headers)
                return
        if method == "GET":
            params = {key: values[-1] for key, values in parse_qs(query).items()}
        else:
            params = _json(raw)
            if not isinstance(params, dict):
                raise BadRequest("the body must be a JSON object")
        text = params.get("q")
        if not isinstance(text, str):
            raise BadRequest("q (the query text, a string) is required")
        self._answer(200, self.server.catalogue.search(text, _limit(params.get("limit", 10))))

    def _answer(self, status: int, body: Any) -> None:
        self._send(status, json.dumps(body).encode())

    def _send(self, status: int, body: bytes, headers: dict[str, str] | None = None) -> None:
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(body)


def _query_text(method: str, query: str, raw: bytes) -> str | None:
    """The search's ``q`` as the log of requests records it, before any fault: None when the
    request has none that reads (the search then answers its 400)."""
    if method == "GET":
        text = parse_qs(query).get("q", [None])[-1]
    else:
        try:
            body = json.loads(raw or b"null")
        except ValueError:
            return None
        text = body.get("q") if isinstance(body, dict) else None
    return text if isinstance(text, str) else None


def _json(raw: bytes) -> Any:
    try:
        return json.loads(raw or b"null")
    except ValueError as error:
        raise BadRequest(f"the body is not JSON: {error}") from None


def _seconds(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else str(value)


class Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, port: int, catalogue: Catalogue) -> None:
        super().__init__(("127.0.0.1", port), Handler)
        self.catalogue = catalogue
        self.knobs = Knobs()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--port", type=int,
                        default=int(os.environ.get("JSON_SEARCH_API_PORT") or 9710))
    parser.add_argument("--catalogue", type=Path, default=CATALOGUE,
                        help="JSON lines of products (gzipped when named .gz)")
    args = parser.parse_args()
    server = Server(args.port, Catalogue(args.catalogue))
    print(f"json search api: {server.catalogue.size} products on http://127.0.0.1:{args.port}",
          flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
