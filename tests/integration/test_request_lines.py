"""Request lines written without a leading slash (``POST _plugins/_ml/models/_search
HTTP/1.1``, as OpenSearch Dashboards' search-relevance plugin sends some) are answered as
OpenSearch answers them, on both fronts; the bytes around them are never changed."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from opensearchpy import OpenSearch

from tests.conftest import JUDGE_MODEL
from tests.support.processes import FRONTS, Server
from tests.support.raw_http import exchange, request, send

LOOKALIKE = "GET _cat/indices HTTP/1.1\r\n\r\n"  # a value that reads like a request line
OSD_MODELS_BODY = {"query": {"match_all": {}}, "size": 1000}


@pytest.fixture(scope="module", params=FRONTS)
def served(request: pytest.FixtureRequest, env: dict[str, str]) -> Iterator[Server]:
    srv = Server(env, front=request.param, workers=1)
    yield srv
    srv.stop()


def test_pass_through_lines_answer_as_the_cluster(served: Server, opensearch_url: str,
                                                  index_name: str, direct: OpenSearch) -> None:
    direct.indices.create(index=index_name)
    for method, target in (("GET", "_cluster/health"), ("GET", f"{index_name}/_count"),
                           ("GET", "no-such-index-1f3a/_search"), ("GET", "?pretty"),
                           ("HEAD", index_name)):
        ours = send(served.url, method, target)
        theirs = send(opensearch_url, method, target)
        assert ours.status == theirs.status, (served.front, target, ours.body[:300])
        if target.startswith("_cluster"):
            assert ours.json["cluster_name"] == theirs.json["cluster_name"]
        else:
            assert ours.body == theirs.body, target


def test_workbench_routes_answer_slash_less_lines(served: Server) -> None:
    models = send(served.url, "POST", "_plugins/_ml/models/_search", OSD_MODELS_BODY)
    assert models.status == 200, models.body[:300]
    assert JUDGE_MODEL in {hit["_id"] for hit in models.json["hits"]["hits"]}
    slashless = send(served.url, "GET", "_plugins/_search_relevance/query_sets")
    usual = send(served.url, "GET", "/_plugins/_search_relevance/query_sets")
    assert slashless.status == usual.status == 200
    assert slashless.json["hits"]["total"] == usual.json["hits"]["total"]
    settings = send(served.url, "GET", "_cluster/settings?include_defaults=true&flat_settings=true")
    assert "plugins.search_relevance.workbench_enabled" in settings.json["defaults"]


def test_pipelined_requests_keep_their_bodies(served: Server, index_name: str,
                                              direct: OpenSearch) -> None:
    """Three slash-less requests back to back on one connection, two with bodies that hold a
    request-line lookalike (one of them chunked): each is answered, each body arrives whole."""
    doc = {"title": "sent", "note": LOOKALIKE}
    bulk = (f'{{"index":{{"_id":"b1"}}}}\n{{"title":"bulk","note":{json.dumps(LOOKALIKE)}}}\n'
            ).encode()
    chunked = (f"POST {index_name}/_bulk?refresh=true HTTP/1.1\r\nHost: localhost\r\n"
               "Content-Type: application/x-ndjson\r\nTransfer-Encoding: chunked\r\n\r\n"
               ).encode() + b"".join(
        b"%x\r\n%s\r\n" % (len(part), part) for part in (bulk[:20], bulk[20:])) + b"0\r\n\r\n"
    replies = exchange(served.url, [
        request("PUT", f"{index_name}/_doc/d1?refresh=true", doc),
        chunked,
        request("GET", f"{index_name}/_search", {"query": {"match_all": {}}}),
    ])
    assert [r.status for r in replies] == [201, 200, 200], [r.body[:200] for r in replies]
    assert replies[1].json["errors"] is False
    sources = {h["_id"]: h["_source"] for h in replies[2].json["hits"]["hits"]}
    assert sources == {"d1": doc, "b1": {"title": "bulk", "note": LOOKALIKE}}
    assert direct.get(index=index_name, id="d1")["_source"]["note"] == LOOKALIKE


def test_the_access_log_names_the_client(served: Server) -> None:
    """HAProxy's access log (direct requests) and gunicorn's name the client's address."""
    marker = f"client-marker-{uuid.uuid4().hex[:8]}"
    reply = send_from(served.url, "127.0.0.9", f"{marker}/_count")
    assert reply.status == 404  # the cluster's: no such index
    deadline = time.monotonic() + 10
    while marker not in served.log() and time.monotonic() < deadline:
        time.sleep(0.2)
    (line,) = [line for line in served.log().splitlines() if marker in line]
    assert line.startswith("127.0.0.9 "), line


def send_from(url: str, source: str, target: str) -> Any:
    (reply,) = exchange(url, [request("GET", target)], source=source)
    return reply
