"""Remote search configurations (issue 47) against real engines: the local OpenSearch as
a remote cluster, the secured demo node (9250, basic auth, its demo CA through
WORKBENCH_REMOTE_CA), a small HTTP server of the test's own that goes down.

Every route with its exact answer and status; every 400 of a definition (unknown field and
preset, a missing placeholder, a path the probe answer does not have, a bad URL, the operator's
policy: not allowed, private, not set; a password without WORKBENCH_SECRET_KEY); execute giving
the hits a direct ``_search`` gives; the cache and ``refreshCache``; a 502 for a remote that is
down; the password in no answer, no stored document (only its ciphertext) and no log line.
"""

from __future__ import annotations

import base64
import json
import threading
import uuid
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
import redis
from cryptography.fernet import Fernet
from opensearchpy import OpenSearch

from tests.support.api import Api, Reply
from tests.support.processes import Server, base_env, free_port
from tests.support.secure_cluster import SecureCluster
from workbench.config import Config
from workbench.llm.secrets import SecretBox
from workbench.redis_keys import remote_cache_pattern
from workbench.remote.configs import RemoteConfig
from workbench.remote.mapping import PRESETS
from workbench.remote.search import RemoteFailure, search_remote
from workbench.remote.templates import MISSING_PLACEHOLDER
from workbench.services import Services
from workbench.store.indices import REMOTE_CONFIG_INDEX

LOOPBACK = json.dumps([r"^https?://(127\.0\.0\.1|localhost):[0-9]+(/.*)?$"])
#: a public address the tests never reach (the policy passes it; a later field fails first)
PUBLIC = "http://1.1.1.1/products/_search"
LOOPBACK_AND_PUBLIC = json.dumps([r"^https?://(127\.0\.0\.1|localhost):[0-9]+(/.*)?$",
                                  r"^http://1\.1\.1\.1/.*$"])
LOCAL_PASSWORD = "Local-Remote-pw-5Tq8"
MATCH_TITLE = {"query": {"match": {"title": "%SearchText%"}}}
#: every document matches (the probe's "sample query" too), the text only adds to the score
ALWAYS = {"query": {"bool": {"should": [{"match": {"title": "%SearchText%"}},
                                        {"match_all": {}}]}}}
DOCS = {"d1": "red running shoes", "d2": "blue running shoes", "d3": "red wool hat",
        "d4": "leather wallet", "d5": "red shoes for kids"}
SECRET_KEY = Fernet.generate_key().decode()


@pytest.fixture(scope="module")
def remote_index(direct: OpenSearch, opensearch_url: str) -> Iterator[str]:
    """An index on the local cluster, the remote cluster of these tests: its search URL."""
    index = f"test-remote-{uuid.uuid4().hex[:8]}"
    direct.indices.create(index=index, body={"mappings": {"properties": {
        "title": {"type": "text"}}}})
    for doc_id, title in DOCS.items():
        direct.index(index=index, id=doc_id, body={"title": title})
    direct.indices.refresh(index=index)
    yield index
    direct.indices.delete(index=index, ignore=[404])


@pytest.fixture(scope="module")
def node(opensearch_url: str) -> str:
    """The local cluster's first node, as a remote's connectionUrl starts."""
    return opensearch_url.split(",")[0].rstrip("/").replace("//localhost:", "//127.0.0.1:")


def open_env(opensearch_url: str, redis_url: str, **extra: str) -> dict[str, str]:
    """Remotes on loopback allowed, a secret key."""
    return base_env(opensearch_url, redis_url, WORKBENCH_SECRET_KEY=SECRET_KEY,
                    WORKBENCH_REMOTE_ENDPOINTS=LOOPBACK,
                    WORKBENCH_REMOTE_PRIVATE_ENDPOINTS="true", WORKBENCH_REMOTE_TIMEOUT="10",
                    **extra)


@pytest.fixture(scope="module")
def open_server(opensearch_url: str, redis_url: str) -> Iterator[Server]:
    server = Server(open_env(opensearch_url, redis_url), workers=2)
    yield server
    server.stop()


@pytest.fixture
def secured_server(opensearch_url: str, redis_url: str,
                   secure_cluster: SecureCluster) -> Iterator[Server]:
    """As ``open_server``, trusting the secured node's demo CA (WORKBENCH_REMOTE_CA)."""
    server = Server(open_env(opensearch_url, redis_url,
                             WORKBENCH_REMOTE_CA=secure_cluster.ca_certs or ""), workers=1)
    yield server
    server.stop()


@pytest.fixture(scope="module")
def wb(open_server: Server) -> Api:
    return Api(open_server.url)


@pytest.fixture(scope="module")
def strict(opensearch_url: str, redis_url: str) -> Iterator[Api]:
    """Remotes allowed by pattern but private addresses refused, and no secret key."""
    env = base_env(opensearch_url, redis_url, WORKBENCH_REMOTE_ENDPOINTS=LOOPBACK_AND_PUBLIC)
    env.pop("WORKBENCH_SECRET_KEY", None)
    env.pop("WORKBENCH_REMOTE_PRIVATE_ENDPOINTS", None)
    server = Server(env, workers=1)
    yield Api(server.url)
    server.stop()


@pytest.fixture
def cache(redis_url: str) -> redis.Redis:
    return redis.Redis.from_url(redis_url)


def body(node: str, index: str, **extra: Any) -> dict[str, Any]:
    return {"name": f"remote {uuid.uuid4().hex[:6]}",
            "connectionUrl": f"{node}/{index}/_search",
            "queryTemplate": MATCH_TITLE, **extra}


def created(reply: Reply) -> str:
    assert reply.status == 200, reply.data
    assert reply.json == {"remote_search_configuration_id": reply.json[
        "remote_search_configuration_id"], "remote_search_configuration_result": "CREATED"}
    return str(reply.json["remote_search_configuration_id"])


def execute(api: Api, config_id: str, text: str, size: int = 10, **extra: Any) -> Reply:
    return api.srw("POST", "/remote_search/execute",
                   {"remoteConfigId": config_id, "queryText": text, "size": size, **extra})


def direct_hits(direct: OpenSearch, index: str, text: str, size: int) -> list[dict[str, Any]]:
    answer = direct.search(index=index, body={"query": {"match": {"title": text}},
                                              "size": size})
    return list(answer["hits"]["hits"])


# -- CRUD -----------------------------------------------------------------------------------------

def test_create_get_list_update_delete(wb: Api, open_server: Server, node: str,
                                       remote_index: str, direct: OpenSearch) -> None:
    given = body(node, remote_index, description="the local cluster", username="reader",
                 password=LOCAL_PASSWORD, responseTemplate="OpenSearch",
                 maxRequestsPerSecond=2.5, maxConcurrentRequests=3, cacheDurationMinutes=0,
                 metadata={"team": "search"})
    reply = wb.srw("PUT", "/remote_search_configurations", given)
    config_id = created(reply)

    got = wb.srw("GET", f"/remote_search_configurations/{config_id}")
    assert got.status == 200
    hits = got.json["hits"]["hits"]
    assert len(hits) == 1 and hits[0]["_id"] == config_id
    source = hits[0]["_source"]
    assert set(source) == {"id", "name", "description", "connectionUrl", "username",
                           "queryTemplate", "responseTemplate", "maxRequestsPerSecond",
                           "maxConcurrentRequests", "cacheDurationMinutes", "refreshCache",
                           "metadata", "timestamp", "lastUpdated", "passwordSet"}
    assert {k: v for k, v in source.items() if k not in ("timestamp", "lastUpdated")} == {
        "id": config_id, "name": given["name"], "description": "the local cluster",
        "connectionUrl": f"{node}/{remote_index}/_search",
        "username": "reader", "queryTemplate": json.dumps(MATCH_TITLE),
        "responseTemplate": "opensearch", "maxRequestsPerSecond": 2.5,
        "maxConcurrentRequests": 3, "cacheDurationMinutes": 0, "refreshCache": False,
        "metadata": {"team": "search"}, "passwordSet": True}

    # stored: only the ciphertext, which decrypts to the password
    stored = direct.get(index=REMOTE_CONFIG_INDEX, id=config_id)["_source"]
    assert LOCAL_PASSWORD not in json.dumps(stored) and "password" not in stored
    token = stored["passwordEncrypted"]
    assert SecretBox(SECRET_KEY).decrypt(token) == LOCAL_PASSWORD

    # listed newest first, without the ciphertext
    second = created(wb.srw("POST", "/remote_search_configurations",
                            body(node, remote_index, cacheDurationMinutes=0)))
    listed = wb.srw("GET", "/remote_search_configurations")
    assert listed.status == 200
    ids = [h["_id"] for h in listed.json["hits"]["hits"]]
    assert ids.index(second) < ids.index(config_id)
    assert all("passwordEncrypted" not in h["_source"] for h in listed.json["hits"]["hits"])

    # an update without the password keeps it; fields left out take their defaults
    update = {k: v for k, v in given.items() if k not in ("password", "metadata",
                                                           "maxRequestsPerSecond")}
    reply = wb.srw("PUT", f"/remote_search_configurations/{config_id}",
                   {**update, "name": "renamed"})
    assert reply.status == 200, reply.data
    assert reply.json == {"remote_search_configuration_id": config_id,
                          "remote_search_configuration_result": "UPDATED"}
    stored = direct.get(index=REMOTE_CONFIG_INDEX, id=config_id)["_source"]
    assert stored["passwordEncrypted"] == token and stored["passwordSet"] is True
    assert (stored["name"], stored["metadata"], stored["maxRequestsPerSecond"]) == \
        ("renamed", {}, 10.0)
    assert stored["timestamp"] == source["timestamp"]

    # "" (or null) removes it
    reply = wb.srw("PUT", f"/remote_search_configurations/{config_id}", {**update, "password": ""})
    assert reply.status == 200, reply.data
    stored = direct.get(index=REMOTE_CONFIG_INDEX, id=config_id)["_source"]
    assert "passwordEncrypted" not in stored and stored["passwordSet"] is False

    wb.srw("PUT", "/remote_search_configurations/nope", update).error(
        404, "Document not found: nope")

    deleted = wb.srw("DELETE", f"/remote_search_configurations/{config_id}")
    assert deleted.status == 200
    assert (deleted.json["_id"], deleted.json["result"]) == (config_id, "deleted")
    again = wb.srw("DELETE", f"/remote_search_configurations/{config_id}")
    assert again.status == 404 and again.json["result"] == "not_found"
    wb.srw("GET", f"/remote_search_configurations/{config_id}").error(
        404, f"Document not found: {config_id}")
    assert wb.srw("DELETE", f"/remote_search_configurations/{second}").status == 200
    for reply in (got, listed):
        assert LOCAL_PASSWORD.encode() not in reply.data
        assert token.encode() not in reply.data
    assert LOCAL_PASSWORD not in open_server.log() and token not in open_server.log()


# -- every 400 of a definition ------------------------------------------------------------------

@pytest.mark.parametrize(("change", "reason"), [
    ({"extra": 1}, "extra is not a field of a remote search configuration; allowed: [name, "
                   "description, connectionUrl, username, password, queryTemplate, "
                   "responseTemplate, maxRequestsPerSecond, maxConcurrentRequests, "
                   "cacheDurationMinutes, refreshCache, metadata]"),
    ({"responseTemplate": "lucene"}, "responseTemplate: unknown preset [lucene]; one of "
                                     "opensearch, elasticsearch, solr"),
    ({"queryTemplate": {"query": {"match_all": {}}}}, MISSING_PLACEHOLDER),
    ({"connectionUrl": "ftp://127.0.0.1/x"}, "connectionUrl must be an http or https URL with a "
                                             "host, got: ftp://127.0.0.1/x"),
    ({"connectionUrl": "http://127.0.0.2:9200/x/_search"},
     "connectionUrl is not a trusted endpoint: it matches none of the patterns of "
     "WORKBENCH_REMOTE_ENDPOINTS"),
    ({"maxConcurrentRequests": 0}, "maxConcurrentRequests must be an integer from 1 to 64, "
                                   "got: 0"),
])
def test_a_bad_definition_is_a_400_naming_the_field(wb: Api, node: str, remote_index: str,
                                                    change: dict[str, Any], reason: str) -> None:
    wb.srw("PUT", "/remote_search_configurations", {**body(node, remote_index), **change}).error(
        400, reason)


def test_paths_are_checked_against_the_probe_answer(wb: Api, node: str,
                                                    remote_index: str) -> None:
    wb.srw("PUT", "/remote_search_configurations", body(
        node, remote_index, responseTemplate={"hits": "$.results", "id": "$.sku"})).error(
        400, "responseTemplate.hits: the path [$.results] matches nothing in the probe answer")
    wb.srw("PUT", "/remote_search_configurations", body(
        node, remote_index, queryTemplate=ALWAYS,
        responseTemplate={"preset": "opensearch", "id": "$._source.sku"})).error(
        400, "responseTemplate.id: the path [$._source.sku] matches nothing in the first hit "
             "of the probe answer")
    # the same paths on a hit that has them pass
    created(wb.srw("PUT", "/remote_search_configurations", body(
        node, remote_index, queryTemplate=ALWAYS,
        responseTemplate={"hits": "hits['hits']", "id": "$._source.title",
                          "fields": {"t": "$._source.title"}})))


def test_a_remote_that_cannot_be_reached_or_errs_is_a_400_at_create(
        wb: Api, node: str, remote_index: str) -> None:
    port = free_port()
    wb.srw("PUT", "/remote_search_configurations", body(
        node, remote_index, connectionUrl=f"http://127.0.0.1:{port}/x/_search")).error(
        400, f"connectionUrl: could not reach POST http://127.0.0.1:{port}/x/_search: the "
             "connection was refused or not made")
    reply = wb.srw("PUT", "/remote_search_configurations", body(
        node, "test-remote-missing-index"))
    assert reply.status == 400
    assert reply.reason.startswith(
        "connectionUrl: the probe search (the text [sample query], size 1) failed: HTTP 404 "
        f"from POST {node}/test-remote-missing-index/_search: "
        '{"error":{"root_cause":[{"type":"index_not_found_exception"'), reply.reason


def test_the_operators_policy(strict: Api, api: Api, node: str, remote_index: str) -> None:
    strict.srw("PUT", "/remote_search_configurations", body(node, remote_index)).error(
        400, "connectionUrl is on 127.0.0.1, a loopback address; endpoints on non-public "
             "addresses are refused unless the operator allows them "
             "(WORKBENCH_REMOTE_PRIVATE_ENDPOINTS=true)")
    strict.srw("PUT", "/remote_search_configurations", body(
        node, remote_index, connectionUrl=PUBLIC, password="x")).error(
        400, "password cannot be stored: WORKBENCH_SECRET_KEY is not set (set it on every API "
             "process and worker; the password is stored encrypted with it)")
    # the session's workbench: no WORKBENCH_REMOTE_ENDPOINTS, so no remote at all
    api.srw("PUT", "/remote_search_configurations", body(node, remote_index)).error(
        400, "connectionUrl is refused: no remote endpoint is trusted until the operator lists "
             "the allowed URLs in WORKBENCH_REMOTE_ENDPOINTS")


# -- execute ---------------------------------------------------------------------------------------

def test_execute_answers_what_a_direct_search_answers(wb: Api, node: str, remote_index: str,
                                                      direct: OpenSearch) -> None:
    config_id = created(wb.srw("PUT", "/remote_search_configurations",
                               body(node, remote_index, cacheDurationMinutes=0)))
    for text, size in (("red shoes", 10), ("red shoes", 2), ("running", 5), ("absent", 3)):
        reply = execute(wb, config_id, text, size)
        assert reply.status == 200, reply.data
        expected = direct_hits(direct, remote_index, text, size)
        assert reply.json["hits"]["hits"] == expected
        assert reply.json["hits"]["total"] == {"value": len(expected), "relation": "eq"}
        assert reply.json["hits"]["max_score"] == (max(h["_score"] for h in expected)
                                                   if expected else None)
        assert reply.json["timed_out"] is False and isinstance(reply.json["took"], int)

    # default size 10; a query of the call's own
    assert len(wb.srw("POST", "/remote_search/execute", {
        "remoteConfigId": config_id, "queryText": "red"}).json["hits"]["hits"]) == 3
    reply = execute(wb, config_id, "ignored", 5, query={"query": {"ids": {"values": ["d4"]}}})
    assert [h["_id"] for h in reply.json["hits"]["hits"]] == ["d4"]
    reply = execute(wb, config_id, "wallet", 5,
                    query='{"query": {"match": {"title": "${queryText}"}}, "size": 1}')
    assert [h["_id"] for h in reply.json["hits"]["hits"]] == ["d4"]

    execute(wb, "nope", "x").error(404, "remote search configuration not found: nope")
    wb.srw("POST", "/remote_search/execute", {"remoteConfigId": config_id}).error(
        400, "queryText is required: a non-empty string")
    execute(wb, config_id, "x", 101).error(400, "size must be an integer from 1 to 100, got: 101")


def test_execute_on_the_secured_node(secured_server: Server, secure_cluster: SecureCluster,
                                     direct: OpenSearch) -> None:
    wb = Api(secured_server.url)
    alice = secure_cluster.alice
    url = f"{secure_cluster.url}/wb-sec-a/_search"
    definition = {"name": "secured", "connectionUrl": url, "username": alice.username,
                  "password": alice.password, "queryTemplate": MATCH_TITLE,
                  "cacheDurationMinutes": 0}
    wrong = wb.srw("PUT", "/remote_search_configurations", {**definition, "password": "no"})
    assert wrong.status == 400
    assert wrong.reason.startswith("connectionUrl: the probe search (the text [sample query], "
                                   f"size 1) failed: HTTP 401 from POST {url}: "), wrong.reason
    reply = wb.srw("PUT", "/remote_search_configurations", definition)
    config_id = created(reply)
    replies = [reply, wrong, wb.srw("GET", f"/remote_search_configurations/{config_id}"),
               wb.srw("GET", "/remote_search_configurations")]
    for text in ("apple", "cherry pie"):
        answer = execute(wb, config_id, text, 10)
        assert answer.status == 200, answer.data
        replies.append(answer)
        expected = secure_cluster.request("POST", "/wb-sec-a/_search", {
            "query": {"match": {"title": text}}, "size": 10}, user="alice")
        assert answer.json["hits"]["hits"] == json.loads(expected.data)["hits"]["hits"]
        assert answer.json["hits"]["hits"]
    # an update without the password keeps it: the searches still authenticate
    kept = wb.srw("PUT", f"/remote_search_configurations/{config_id}",
                  {k: v for k, v in definition.items() if k != "password"})
    assert kept.status == 200, kept.data
    assert execute(wb, config_id, "apple").status == 200

    stored = direct.get(index=REMOTE_CONFIG_INDEX, id=config_id)["_source"]
    basic = base64.b64encode(f"{alice.username}:{alice.password}".encode()).decode()
    assert alice.password not in json.dumps(stored) and stored["passwordEncrypted"]
    for reply in replies:
        assert alice.password.encode() not in reply.data and basic.encode() not in reply.data
    log = secured_server.log()
    assert alice.password not in log and basic not in log


def test_the_cache_and_refresh_cache(wb: Api, node: str, remote_index: str, direct: OpenSearch,
                                     cache: redis.Redis) -> None:
    definition = body(node, remote_index, cacheDurationMinutes=5)
    config_id = created(wb.srw("PUT", "/remote_search_configurations", definition))
    first = execute(wb, config_id, "red", 10).json["hits"]["hits"]
    assert [h["_id"] for h in first] == [h["_id"] for h in direct_hits(direct, remote_index,
                                                                        "red", 10)]
    keys = list(cache.scan_iter(match=remote_cache_pattern(config_id)))
    assert len(keys) == 1 and 0 < int(cache.ttl(keys[0])) <= 300
    gone = first[0]["_id"]
    source = direct.get(index=remote_index, id=gone)["_source"]
    direct.delete(index=remote_index, id=gone, refresh=True)
    try:
        # within cacheDurationMinutes the remote is not asked: the deleted hit is still there
        assert execute(wb, config_id, "red", 10).json["hits"]["hits"] == first
        # refreshCache: the remote is asked every time (and its answer stored)
        reply = wb.srw("PUT", f"/remote_search_configurations/{config_id}",
                       {**definition, "refreshCache": True})
        assert reply.status == 200, reply.data
        fresh = execute(wb, config_id, "red", 10).json["hits"]["hits"]
        assert gone not in [h["_id"] for h in fresh] and len(fresh) == len(first) - 1
        direct.index(index=remote_index, id=gone, body=source, refresh=True)
        back = execute(wb, config_id, "red", 10).json["hits"]["hits"]
        # (the document indexed again may now come after one it tied with)
        assert sorted(h["_id"] for h in back) == sorted(h["_id"] for h in first)
    finally:
        direct.index(index=remote_index, id=gone, body=source, refresh=True)
    assert wb.srw("DELETE", f"/remote_search_configurations/{config_id}").status == 200
    assert list(cache.scan_iter(match=remote_cache_pattern(config_id))) == []


class _StubSearch(BaseHTTPRequestHandler):
    """Answers every search with one OpenSearch-shaped hit."""

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        data = json.dumps({"hits": {"hits": [{"_id": "s1", "_score": 1.0,
                                              "_source": {"title": "stub"}}]}}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *_: Any) -> None:
        pass


def test_a_remote_that_is_down_is_a_502(wb: Api) -> None:
    stub = ThreadingHTTPServer(("127.0.0.1", 0), _StubSearch)
    thread = threading.Thread(target=stub.serve_forever, daemon=True)
    thread.start()
    url = f"http://127.0.0.1:{stub.server_address[1]}/products/_search"
    try:
        config_id = created(wb.srw("PUT", "/remote_search_configurations", {
            "name": "goes down", "connectionUrl": url, "queryTemplate": MATCH_TITLE,
            "cacheDurationMinutes": 0}))
        assert [h["_id"] for h in execute(wb, config_id, "x").json["hits"]["hits"]] == ["s1"]
    finally:
        stub.shutdown()
        stub.server_close()
    execute(wb, config_id, "x").error(
        502, f"remote search configuration [{config_id}]: could not reach POST {url}: the "
             "connection was refused or not made", "remote_search_exception")


class _SlowSearch(_StubSearch):
    """Answers after 0.2 s, counting the searches in flight at once."""

    lock = threading.Lock()
    in_flight = 0
    most = 0
    served = 0

    def do_POST(self) -> None:
        cls = type(self)
        with cls.lock:
            cls.in_flight += 1
            cls.most = max(cls.most, cls.in_flight)
        threading.Event().wait(0.2)
        with cls.lock:  # before the answer: its caller may start another search once it has it
            cls.in_flight -= 1
            cls.served += 1
        super().do_POST()


def test_max_concurrent_requests_hold_across_callers(opensearch_url: str, redis_url: str) -> None:
    """Two callers (each with its own Services, as two processes have) share the slots of one
    configuration: at most maxConcurrentRequests searches reach the remote at once, though
    each caller alone would run that many."""
    stub = ThreadingHTTPServer(("127.0.0.1", 0), _SlowSearch)
    threading.Thread(target=stub.serve_forever, daemon=True).start()
    config = RemoteConfig(
        id=f"slots-{uuid.uuid4().hex[:8]}", name="slow",
        connection_url=f"http://127.0.0.1:{stub.server_address[1]}/p/_search",
        query_template='{"query": {"match": {"title": "%SearchText%"}}}',
        mapping=PRESETS["opensearch"], max_requests_per_second=1000.0,
        max_concurrent_requests=2, cache_duration_minutes=0)
    settings = Config.from_env({"OPENSEARCH_URL": opensearch_url, "REDIS_URL": redis_url,
                                "WORKBENCH_REMOTE_ENDPOINTS": LOOPBACK,
                                "WORKBENCH_REMOTE_PRIVATE_ENDPOINTS": "true"})
    results: list[list[Any]] = []

    def caller(number: int) -> None:
        queries = [(f"q{number}-{i}", None) for i in range(6)]
        results.append(search_remote(Services(settings), config, queries, 5))

    try:
        callers = [threading.Thread(target=caller, args=(n,)) for n in range(2)]
        for thread in callers:
            thread.start()
        for thread in callers:
            thread.join(60)
    finally:
        stub.shutdown()
        stub.server_close()
    assert len(results) == 2
    for answers in results:
        assert [a if isinstance(a, RemoteFailure) else [h["_id"] for h in a]
                for a in answers] == [["s1"]] * 6
    assert _SlowSearch.served == 12
    assert _SlowSearch.most == 2  # reached, never passed


class _Failing(_StubSearch):
    """Answers ``status`` (with ``body``) once set; counts the searches it saw."""

    status = 200
    body = b""
    seen = 0

    def do_POST(self) -> None:
        cls = type(self)
        cls.seen += 1
        if cls.status == 200:
            super().do_POST()
            return
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.send_response(cls.status)
        self.send_header("Content-Length", str(len(cls.body)))
        self.end_headers()
        self.wfile.write(cls.body)


def test_5xx_is_tried_three_times_and_4xx_once(wb: Api) -> None:
    stub = ThreadingHTTPServer(("127.0.0.1", 0), _Failing)
    threading.Thread(target=stub.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{stub.server_address[1]}/products/_search"
    try:
        config_id = created(wb.srw("PUT", "/remote_search_configurations", {
            "name": "fails", "connectionUrl": url, "queryTemplate": MATCH_TITLE,
            "cacheDurationMinutes": 5}))
        _Failing.status, _Failing.body, _Failing.seen = 503, b"overloaded, try later", 0
        execute(wb, config_id, "x").error(
            502, f"remote search configuration [{config_id}]: HTTP 503 from POST {url}: "
                 "overloaded, try later", "remote_search_exception")
        assert _Failing.seen == 3
        _Failing.status, _Failing.body, _Failing.seen = 400, b'{"error": "bad query"}', 0
        execute(wb, config_id, "x").error(
            502, f"remote search configuration [{config_id}]: HTTP 400 from POST {url}: "
                 '{"error": "bad query"}', "remote_search_exception")
        assert _Failing.seen == 1
        # a failure is not cached: the remote back, the same search is answered
        _Failing.status, _Failing.seen = 200, 0
        assert [h["_id"] for h in execute(wb, config_id, "x").json["hits"]["hits"]] == ["s1"]
        assert execute(wb, config_id, "x").status == 200
        assert _Failing.seen == 1  # the second from the cache
    finally:
        stub.shutdown()
        stub.server_close()
