"""The remote engines the remote search configurations' tests search: a real Solr with the demo
catalogue (``scripts/solr.sh``) and the JSON search API (``scripts/json_search_api.py``), each
checked against the shipped catalogue read here on its own, and BM25 against a hand-worked
example. Neither service needs OpenSearch or Redis, and these tests use neither."""

from __future__ import annotations

import gzip
import json
import math
import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import urllib3

from tests.support import services
from tests.support.processes import REPO, Proc, free_port
from tests.support.waiting import poll

CATALOGUE = REPO / "workbench" / "demo" / "data" / "ubi_ecommerce_products.json.gz"
TEXT_FIELDS = ("title", "description", "bullet_points", "brand", "color")
#: words as both engines' tokenizers cut the catalogue's English (letters and digits)
WORDS = re.compile(r"[^\W_]+")

http = urllib3.PoolManager(retries=False, timeout=120)


@pytest.fixture(scope="session", autouse=True)
def _clean_plugin_state() -> None:
    """Replaces the integration suite's reset of the SRW settings: nothing here touches
    OpenSearch or Redis."""


def _catalogue() -> list[dict[str, Any]]:
    with gzip.open(CATALOGUE, "rt", encoding="utf-8") as lines:
        return [json.loads(line) for line in lines if line.strip()]


def _words(doc: dict[str, Any], *fields: str) -> set[str]:
    return {word for field in fields for word in WORDS.findall((doc.get(field) or "").lower())}


def _get(url: str, **fields: Any) -> tuple[int, Any, urllib3.BaseHTTPResponse]:
    reply = http.request("GET", url, fields=fields or None)
    return reply.status, json.loads(reply.data), reply


def _send(method: str, url: str, body: Any) -> tuple[int, Any, urllib3.BaseHTTPResponse]:
    reply = http.request(method, url, body=json.dumps(body),
                         headers={"Content-Type": "application/json"})
    return reply.status, json.loads(reply.data), reply


# --- Solr -------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def solr() -> str:
    return services.solr_url()


def test_solr_title_query_finds_the_products_whose_title_has_the_word(solr: str) -> None:
    catalogue = _catalogue()
    expected = {doc["_id"]: doc["title"] for doc in catalogue if "kindle" in _words(doc, "title")}
    # 34 titles say "Kindle"; a 35th says "Kindles", which the unstemmed analyzer keeps apart
    loose = {doc["_id"] for doc in catalogue if "kindle" in doc["title"].lower()}
    assert len(expected) == 34 and len(loose - set(expected)) == 1

    status, answer, _ = _get(f"{solr}/products/select", q="title:kindle", fl="id,score,title",
                             wt="json", rows=100)

    assert status == 200
    assert answer["response"]["numFound"] == 34
    docs = answer["response"]["docs"]
    assert {doc["id"]: doc["title"] for doc in docs} == expected
    assert all(set(doc) == {"id", "score", "title"} for doc in docs)
    scores = [doc["score"] for doc in docs]
    assert scores == sorted(scores, reverse=True) and scores[-1] > 0
    assert answer["response"]["maxScore"] == scores[0]


def test_solr_holds_the_whole_catalogue_as_the_demo_index_does(solr: str) -> None:
    catalogue = _catalogue()
    status, answer, _ = _get(f"{solr}/products/select", q="*:*", fl="*", sort="id asc",
                             rows=10000, wt="json")

    assert status == 200
    assert answer["response"]["numFound"] == len(catalogue) == 6764
    # the id is the demo index's _id; every stored field comes back as the catalogue has it
    # (Solr keeps no nulls and no empty lists)
    expected = sorted(
        ({"id": doc["_id"], **{key: value for key, value in doc.items()
                               if key != "_id" and value is not None and value != []}}
         for doc in catalogue), key=lambda doc: str(doc["id"]))
    assert answer["response"]["docs"] == expected


def test_solr_load_again_is_a_count_and_keeps_the_core(solr: str) -> None:
    if os.environ.get("SOLR_URL"):
        pytest.skip("SOLR_URL names a Solr the script does not run")
    started = time.monotonic()
    result = subprocess.run([str(REPO / "scripts" / "solr.sh"), "load"], capture_output=True,
                            text=True, timeout=300)

    assert result.returncode == 0, result.stderr
    assert result.stdout.strip().splitlines()[-1] == solr
    assert "the products core already holds the 6764 products" in result.stderr
    assert time.monotonic() - started < 30
    assert _get(f"{solr}/products/select", q="*:*", rows=0)[1]["response"]["numFound"] == 6764


# --- the JSON search API ----------------------------------------------------------------------


@pytest.fixture(scope="module")
def json_api() -> Iterator[str]:
    url = services.json_search_api_url()
    yield url
    http.request("DELETE", f"{url}/_faults")
    http.request("DELETE", f"{url}/_requests")


@pytest.fixture
def api(json_api: str) -> str:
    """The service with no pending fault and no searches logged."""
    assert http.request("DELETE", f"{json_api}/_faults").status == 200
    assert http.request("DELETE", f"{json_api}/_requests").status == 200
    return json_api


def test_json_api_answers_in_its_own_shape(api: str) -> None:
    catalogue = {doc.pop("_id"): doc for doc in _catalogue()}
    matching = [sku for sku, doc in catalogue.items() if "kindle" in _words(doc, *TEXT_FIELDS)]

    status, answer, reply = _get(f"{api}/search", q="Kindle", limit=3)

    assert status == 200
    assert reply.headers["Content-Type"] == "application/json"
    assert set(answer) == {"total", "results"}
    assert answer["total"] == len(matching) == 42
    assert len(answer["results"]) == 3
    for result in answer["results"]:
        assert set(result) == {"sku", "relevance", "product"}
        assert result["sku"] in matching
        assert result["product"] == catalogue[result["sku"]]
    relevances = [result["relevance"] for result in answer["results"]]
    assert relevances == sorted(relevances, reverse=True) and relevances[-1] > 0
    # the POST form answers the same
    assert _send("POST", f"{api}/search", {"q": "Kindle", "limit": 3})[:2] == (200, answer)
    # limit defaults to 10; a query without words matches nothing
    assert len(_get(f"{api}/search", q="kindle")[1]["results"]) == 10
    assert _get(f"{api}/search", q="-- ?")[:2] == (200, {"total": 0, "results": []})


def test_json_api_ranks_the_title_match_of_a_rare_word_first(api: str) -> None:
    catalogue = {doc.pop("_id"): doc for doc in _catalogue()}
    # "unshakable" is in three products: one title (a 5-word one) and two products' other text
    holders = {sku for sku, doc in catalogue.items() if "unshakable" in _words(doc, *TEXT_FIELDS)}
    in_title = {sku for sku in holders if "unshakable" in _words(catalogue[sku], "title")}
    assert len(holders) == 3 and in_title == {"1593830394"}
    assert catalogue["1593830394"]["title"] == "Seven Declarations For An Unshakable Life"

    status, answer, _ = _get(f"{api}/search", q="unshakable")

    assert status == 200
    assert answer["total"] == 3
    assert answer["results"][0]["sku"] == "1593830394"
    assert {result["sku"] for result in answer["results"]} == holders


#: a catalogue small enough to work BM25 out by hand: its words per product (all five fields)
#: are A 3, B 8, C 6, D 2, E 2, F 1: 22 in 6 products
SMALL = [
    {"_id": "A", "title": "Kindle Paperwhite", "brand": "Amazon"},
    {"_id": "B", "title": "Leather Cover", "bullet_points": "Fits every Kindle and Kindle Oasis"},
    {"_id": "C", "title": "Reading Lamp", "description": "A clip-on lamp"},
    {"_id": "D", "title": "Desk", "color": "Black"},
    {"_id": "E", "title": "Pen", "brand": "Bic"},
    {"_id": "F", "title": "Notebook"},
]


@pytest.fixture(scope="module")
def small_api(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A second service of the same script over ``SMALL``."""
    path = Path(tmp_path_factory.mktemp("catalogue")) / "small.json"
    path.write_text("".join(json.dumps(doc) + "\n" for doc in SMALL))
    port = free_port()
    proc = Proc([sys.executable, str(REPO / "scripts" / "json_search_api.py"), "--port",
                 str(port), "--catalogue", str(path)], dict(os.environ), "json-search-api")
    url = f"http://127.0.0.1:{port}"

    def up() -> bool | None:
        assert proc.alive(), proc.log()
        try:
            return http.request("GET", f"{url}/", timeout=2).status == 200 or None
        except urllib3.exceptions.HTTPError:
            return None

    try:
        poll(up, 30, 0.2, "the small JSON search API did not answer")
        yield url
    finally:
        proc.stop()


def _bm25(freq: int, length: int, hits: int, n: int = 6, avgdl: float = 22 / 6) -> float:
    """FTS5's bm25() (k1 1.2, b 0.75), negated, for one word: ``freq`` times in a product of
    ``length`` words, in ``hits`` of the ``n`` products."""
    idf = math.log((n - hits + 0.5) / (hits + 0.5))
    return idf * freq * 2.2 / (freq + 1.2 * (0.25 + 0.75 * length / avgdl))


def test_json_api_relevance_is_fts5_bm25(small_api: str) -> None:
    status, answer, _ = _get(f"{small_api}/search", q="kindle")

    assert status == 200
    # kindle: once in A's 3 words, twice in B's 8; in 2 of 6 products, idf ln(4.5/2.5)
    assert [result["sku"] for result in answer["results"]] == ["A", "B"]
    assert answer["results"][0]["relevance"] == pytest.approx(_bm25(1, 3, 2), rel=1e-12)
    assert answer["results"][1]["relevance"] == pytest.approx(_bm25(2, 8, 2), rel=1e-12)
    assert answer["results"][0]["relevance"] == pytest.approx(0.6350195, rel=1e-6)
    assert answer["results"][1]["relevance"] == pytest.approx(0.6065858, rel=1e-6)
    assert answer["results"][1]["product"] == {
        "title": "Leather Cover", "bullet_points": "Fits every Kindle and Kindle Oasis"}

    # words are OR-ed, their scores summed: lamp twice in C's 6 words, in 1 product
    status, answer, _ = _get(f"{small_api}/search", q="kindle LAMP", limit=2)
    assert answer["total"] == 3
    assert [result["sku"] for result in answer["results"]] == ["C", "A"]
    assert answer["results"][0]["relevance"] == pytest.approx(_bm25(2, 6, 1), rel=1e-12)


def test_json_api_faults_apply_to_the_next_searches_then_stop(api: str) -> None:
    fault = {"status": 503, "retryAfter": 2, "body": '{"error": "overloaded"}', "count": 2}
    assert _send("POST", f"{api}/_faults", fault)[:2] == (200, {
        "fault": {"status": 503, "retryAfter": 2, "body": '{"error": "overloaded"}'},
        "remaining": 2})

    first = http.request("GET", f"{api}/search", fields={"q": "kindle"})
    second = http.request("POST", f"{api}/search", body=json.dumps({"q": "kindle"}))
    third = http.request("GET", f"{api}/search", fields={"q": "kindle"})

    for reply in (first, second):
        assert (reply.status, reply.data, reply.headers["Retry-After"]) == (
            503, b'{"error": "overloaded"}', "2")
    assert third.status == 200 and json.loads(third.data)["total"] == 42
    assert "Retry-After" not in third.headers
    assert _get(f"{api}/_faults")[:2] == (200, {"fault": None, "remaining": 0})

    # a 429 without a body answers the default one
    _send("POST", f"{api}/_faults", {"status": 429})
    assert _get(f"{api}/search", q="kindle")[:2] == (429, {"error": "injected fault"})
    assert _get(f"{api}/search", q="kindle")[0] == 200


def test_json_api_delay_fault_answers_late_but_right(api: str) -> None:
    normal = _get(f"{api}/search", q="lamp")[1]
    _send("POST", f"{api}/_faults", {"delayMs": 400})

    started = time.monotonic()
    status, answer, _ = _get(f"{api}/search", q="lamp")

    assert time.monotonic() - started >= 0.4
    assert (status, answer) == (200, normal)


def test_json_api_counts_the_searches_it_receives(api: str) -> None:
    assert _get(f"{api}/_requests")[:2] == (200, {"count": 0, "times": [], "queries": []})
    _send("POST", f"{api}/_faults", {"status": 500})
    before = time.time()
    statuses = [_get(f"{api}/search", q=text)[0] for text in ("kindle", "lamp", "desk")]
    statuses.append(_send("POST", f"{api}/search", {"q": "pen", "limit": 1})[0])
    statuses.append(_get(f"{api}/search", limit=1)[0])  # no q: a 400, still a search received
    after = time.time()
    http.request("GET", f"{api}/")  # not a search

    status, requests, _ = _get(f"{api}/_requests")
    assert status == 200 and statuses == [500, 200, 200, 200, 400]
    assert requests["count"] == 5 and len(requests["times"]) == 5
    assert requests["queries"] == ["kindle", "lamp", "desk", "pen", None]
    assert before <= requests["times"][0] <= requests["times"][1] <= requests["times"][2] \
        <= requests["times"][3] <= requests["times"][4] <= after

    assert _send("DELETE", f"{api}/_requests", None)[:2] == (200, {"acknowledged": True})
    assert _get(f"{api}/_requests")[1] == {"count": 0, "times": [], "queries": []}


@pytest.mark.parametrize(("method", "path", "body", "error"), [
    ("GET", "/search?limit=0&q=kindle", None, "limit must be an integer from 1 to 1000, not [0]"),
    ("GET", "/search?q=kindle&limit=ten", None,
     "limit must be an integer from 1 to 1000, not [ten]"),
    ("GET", "/search", None, "q (the query text, a string) is required"),
    ("POST", "/search", {"q": 7}, "q (the query text, a string) is required"),
    ("POST", "/search", {"q": "kindle", "limit": True},
     "limit must be an integer from 1 to 1000, not [True]"),
    ("POST", "/_faults", {"status": 503, "count": 0}, "count must be an integer >= 1"),
    ("POST", "/_faults", {"status": 99}, "status must be an HTTP status code (100..599)"),
    ("POST", "/_faults", {"delayMs": -1}, "delayMs must be an integer >= 0"),
    ("POST", "/_faults", {"retryAfter": "soon"}, "retryAfter must be a number of seconds >= 0"),
    ("POST", "/_faults", {"status": 503, "times": 2},
     "unknown fields ['times']; known: ['body', 'count', 'delayMs', 'retryAfter', 'status']"),
])
def test_json_api_refuses_bad_parameters(api: str, method: str, path: str, body: Any,
                                         error: str) -> None:
    reply = http.request(method, f"{api}{path}",
                         body=None if body is None else json.dumps(body))

    assert (reply.status, json.loads(reply.data)) == (400, {"error": error})
    assert _get(f"{api}/_faults")[1] == {"fault": None, "remaining": 0}


def test_json_api_unknown_route_is_404(api: str) -> None:
    assert _get(f"{api}/_search", q="kindle")[:2] == (404, {"error": "no route for GET /_search"})
