"""Everything that is not an SRW route reaches the real cluster unchanged and comes back unchanged.

Each test asks the same thing through the workbench and directly, and compares the answers
(timing fields such as ``took`` removed).
"""

from __future__ import annotations

import gzip
import json
from collections.abc import Iterator
from typing import Any

import pytest
import urllib3
from opensearchpy import OpenSearch
from opensearchpy.exceptions import ConflictError, NotFoundError
from opensearchpy.helpers import bulk

from tests.support.processes import FRONTS, Server

TIMING = {"took"}

http = urllib3.PoolManager(retries=False, timeout=60)


@pytest.fixture(scope="module", params=FRONTS, ids=[f"front={f}" for f in FRONTS])
def server(request: pytest.FixtureRequest, env: dict[str, str]) -> Iterator[Server]:
    """The workbench with gunicorn alone and with the HAProxy front: both must pass everything."""
    srv = Server(env, front=request.param)
    yield srv
    srv.stop()


@pytest.fixture(scope="module")
def client(server: Server) -> OpenSearch:
    return OpenSearch(hosts=[server.url], timeout=120)


def strip_timing(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: strip_timing(v) for k, v in value.items() if k not in TIMING}
    if isinstance(value, list):
        return [strip_timing(v) for v in value]
    return value


def raw(base: str, method: str, target: str, body: bytes | None = None,
        headers: dict[str, str] | None = None) -> urllib3.BaseHTTPResponse:
    return http.request(method, base + target, body=body, headers=headers or {},
                        redirect=False, decode_content=False)


def docs(n: int) -> list[dict[str, Any]]:
    return [{"n": i, "title": f"product {i} {'red' if i % 3 == 0 else 'blue'} shoe",
             "price": i % 97} for i in range(n)]


def test_root_info_is_the_clusters(client: OpenSearch, direct: OpenSearch) -> None:
    assert client.info() == direct.info()


def test_nodes_filter_path_as_dashboards_polls_it(server, opensearch_url) -> None:
    target = "/_nodes?filter_path=nodes.*.version,nodes.*.http.publish_address,nodes.*.ip"
    via, ref = raw(server.url, "GET", target), raw(opensearch_url, "GET", target)
    assert via.status == ref.status == 200
    assert json.loads(via.data) == json.loads(ref.data)
    assert next(iter(json.loads(via.data)["nodes"].values()))["version"]


def test_create_index_bulk_10000_and_search(client: OpenSearch, direct: OpenSearch,
                                             index_name: str) -> None:
    ours, theirs = index_name + "-via", index_name + "-direct"
    created = client.indices.create(index=ours, body={"settings": {"number_of_shards": 1}})
    reference = direct.indices.create(index=theirs, body={"settings": {"number_of_shards": 1}})
    assert created == {**reference, "index": ours}

    documents = docs(10_000)
    ok, errors = bulk(client, ({"_index": ours, "_id": str(d["n"]), **d} for d in documents),
                      chunk_size=2_500, refresh=True)
    assert (ok, errors) == (10_000, [])
    bulk(direct, ({"_index": theirs, "_id": str(d["n"]), **d} for d in documents),
         chunk_size=2_500, refresh=True)
    assert direct.count(index=ours)["count"] == 10_000

    query = {"query": {"match": {"title": "red shoe"}}, "size": 20, "sort": ["_score", "n"],
             "aggs": {"prices": {"avg": {"field": "price"}}}}
    via = strip_timing(client.search(index=ours, body=query))
    ref = strip_timing(direct.search(index=ours, body=query))
    assert via == ref
    assert via["hits"]["total"]["value"] > 3000


def test_bulk_response_equals_direct(client: OpenSearch, direct: OpenSearch,
                                     index_name: str) -> None:
    lines = []
    for d in docs(200):
        lines.append(json.dumps({"index": {"_index": index_name, "_id": str(d["n"])}}))
        lines.append(json.dumps(d))
    body = "\n".join(lines) + "\n"
    via = client.bulk(body=body)
    ref = direct.bulk(body=body)  # same ids again: versions 2 instead of 1
    for a, b in zip(via["items"], ref["items"], strict=True):
        a, b = a["index"], b["index"]
        assert a["_id"] == b["_id"]
        assert (a["status"], a["result"]) == (201, "created")
        assert (b["status"], b["result"]) == (200, "updated")
        assert b["_version"] == a["_version"] + 1
    assert via["errors"] is ref["errors"] is False


def test_head_index(client: OpenSearch, direct: OpenSearch, server, opensearch_url,
                    index_name: str) -> None:
    direct.indices.create(index=index_name)
    assert client.indices.exists(index=index_name) is True
    assert client.indices.exists(index=index_name + "-missing") is False
    for target, status in ((f"/{index_name}", 200), (f"/{index_name}-missing", 404)):
        via, ref = raw(server.url, "HEAD", target), raw(opensearch_url, "HEAD", target)
        assert via.status == ref.status == status
        assert via.data == b""
        assert via.headers["content-length"] == ref.headers["content-length"]
        assert via.headers["content-type"] == ref.headers["content-type"]


def test_404_and_409_carry_the_clusters_bodies(client: OpenSearch, direct: OpenSearch,
                                               server, opensearch_url, index_name: str) -> None:
    direct.indices.create(index=index_name)
    with pytest.raises(NotFoundError) as via404:
        client.get(index=index_name, id="nope")
    with pytest.raises(NotFoundError) as ref404:
        direct.get(index=index_name, id="nope")
    assert via404.value.info == ref404.value.info
    assert via404.value.info == {"_index": index_name, "_id": "nope", "found": False}

    with pytest.raises(NotFoundError) as missing_index:
        client.search(index=index_name + "-missing")
    assert missing_index.value.error == "index_not_found_exception"

    client.index(index=index_name, id="1", body={"a": 1}, op_type="create", refresh=True)
    with pytest.raises(ConflictError) as via409:
        client.index(index=index_name, id="1", body={"a": 2}, op_type="create")
    with pytest.raises(ConflictError) as ref409:
        direct.index(index=index_name, id="1", body={"a": 2}, op_type="create")
    assert via409.value.info == ref409.value.info
    assert via409.value.error == "version_conflict_engine_exception"

    target = f"/{index_name}/_create/1"
    body = b'{"a": 3}'
    hdrs = {"Content-Type": "application/json"}
    via = raw(server.url, "PUT", target, body, hdrs)
    ref = raw(opensearch_url, "PUT", target, body, hdrs)
    assert via.status == ref.status == 409
    assert via.data == ref.data


def test_cat_indices_json(client: OpenSearch, direct: OpenSearch, index_name: str) -> None:
    direct.indices.create(index=index_name)
    params = {"format": "json", "h": "health,status,index,uuid,pri,rep,docs.count"}
    assert client.cat.indices(index=index_name, params=params) == direct.cat.indices(
        index=index_name, params=params
    )
    everything = client.cat.indices(params={"format": "json"})
    assert index_name in {row["index"] for row in everything}


def test_cat_text_answer_is_passed_as_text(server, opensearch_url) -> None:
    via = raw(server.url, "GET", "/_cat/health?h=cluster,status")
    ref = raw(opensearch_url, "GET", "/_cat/health?h=cluster,status")
    assert via.status == 200
    assert via.headers["content-type"].startswith("text/plain")
    assert via.data == ref.data


def test_raw_path_and_query_string_are_kept(direct: OpenSearch, server,
                                            index_name: str) -> None:
    # Saved-object style ids: a colon, sent percent-encoded, must not be decoded on the way.
    direct.index(index=index_name, id="config:3.8.0", body={"v": 1}, refresh=True)
    got = raw(server.url, "GET", f"/{index_name}/_doc/config%3A3.8.0")
    assert got.status == 200
    assert json.loads(got.data)["_id"] == "config:3.8.0"
    # An id that contains a slash only exists encoded; decoding would change the route.
    direct.index(index=index_name, id="a/b", body={"v": 2}, refresh=True)
    slash = raw(server.url, "GET", f"/{index_name}/_doc/a%2Fb")
    assert slash.status == 200 and json.loads(slash.data)["_id"] == "a/b"
    # Wildcards, commas and _all in the path, repeated and encoded query parameters.
    pattern = raw(server.url, "GET", f"/{index_name[:-3]}%2A,{index_name}/_count?q=v:1")
    assert json.loads(pattern.data)["count"] == 1
    assert raw(server.url, "GET", "/_all/_count?ignore_unavailable=true").status == 200
    params = raw(server.url, "GET", f"/{index_name}/_search?q=v%3A2&filter_path=hits.hits._id")
    assert json.loads(params.data) == {"hits": {"hits": [{"_id": "a/b"}]}}


def test_bodies_on_get_and_delete(direct: OpenSearch, server, index_name: str) -> None:
    direct.index(index=index_name, id="1", body={"colour": "red"})
    direct.index(index=index_name, id="2", body={"colour": "blue"}, refresh=True)
    hdrs = {"Content-Type": "application/json"}
    found = raw(server.url, "GET", f"/{index_name}/_search?scroll=1m&size=1",
                json.dumps({"query": {"term": {"colour": "red"}}}).encode(), hdrs)
    answer = json.loads(found.data)
    assert [h["_id"] for h in answer["hits"]["hits"]] == ["1"]
    assert answer["hits"]["total"]["value"] == 1  # the GET body was applied
    cleared = raw(server.url, "DELETE", "/_search/scroll",
                  json.dumps({"scroll_id": answer["_scroll_id"]}).encode(), hdrs)
    assert cleared.status == 200
    assert json.loads(cleared.data) == {"succeeded": True, "num_freed": 1}


def test_msearch_ndjson(client: OpenSearch, direct: OpenSearch, server, opensearch_url,
                        index_name: str) -> None:
    bulk(direct, ({"_index": index_name, "_id": str(d["n"]), **d} for d in docs(50)),
         refresh=True)
    body = (
        json.dumps({"index": index_name}) + "\n"
        + json.dumps({"query": {"match": {"title": "red"}}, "size": 3, "sort": ["n"]}) + "\n"
        + json.dumps({"index": index_name}) + "\n"
        + json.dumps({"query": {"range": {"price": {"gte": 40}}}, "size": 0}) + "\n"
    ).encode()
    hdrs = {"Content-Type": "application/x-ndjson"}
    via = json.loads(raw(server.url, "POST", "/_msearch", body, hdrs).data)
    ref = json.loads(raw(opensearch_url, "POST", "/_msearch", body, hdrs).data)
    assert strip_timing(via) == strip_timing(ref)
    assert [h["_id"] for h in via["responses"][0]["hits"]["hits"]] == ["0", "3", "6"]


def test_headers_pass_both_ways(server, opensearch_url) -> None:
    got = raw(server.url, "GET", "/", headers={
        "X-Opaque-Id": "trace-42", "x-opensearch-product-origin": "opensearch-dashboards"})
    assert got.status == 200
    assert got.headers["X-Opaque-Id"] == "trace-42"  # echoed by the cluster
    assert got.headers["X-OpenSearch-Version"].startswith("OpenSearch/")
    assert got.headers["content-type"] == "application/json; charset=UTF-8"


def test_compressed_answers_pass_unchanged(server, opensearch_url) -> None:
    via = raw(server.url, "GET", "/?pretty=false", headers={"Accept-Encoding": "gzip"})
    ref = raw(opensearch_url, "GET", "/?pretty=false", headers={"Accept-Encoding": "gzip"})
    assert via.headers.get("content-encoding") == ref.headers.get("content-encoding") == "gzip"
    assert gzip.decompress(via.data) == gzip.decompress(ref.data)


def test_status_codes_are_untouched(server, opensearch_url) -> None:
    for method, target, status in (
        ("DELETE", "/_cat/indices", 405),
        ("GET", "/_nonexistent_api/x", 400),
        ("PUT", "/_cluster/health", 405),
    ):
        via, ref = raw(server.url, method, target), raw(opensearch_url, method, target)
        assert via.status == ref.status == status, target
        assert via.data == ref.data


def test_an_index_named_static_is_the_clusters(client: OpenSearch, direct: OpenSearch) -> None:
    direct.indices.create(index="static", ignore=400)
    try:
        direct.index(index="static", id="1", body={"a": 1}, refresh=True)
        assert client.get(index="static", id="1")["_source"] == {"a": 1}
    finally:
        direct.indices.delete(index="static", ignore=[404])
