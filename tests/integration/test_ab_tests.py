"""A/B tests against the real cluster and Redis (docs/ab-tests.md): the plugin's routes with its
messages and shapes, the extensions, versions and snapshots, the impressions written to UBI
queries, and the verdict read back from UBI click events."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest
from opensearchpy import OpenSearch
from scipy.stats import binomtest

from tests.support.api import Api, search_configuration
from tests.support.processes import Server
from workbench.abtests import definitions, results

AB_INDEX = ".plugins-search-relevance-ab-test"
MATCH = '{"query":{"match":{"title":"%SearchText%"}}}'
# B ranks the same matches the other way round, so the two lists share documents.
BY_NUMBER = '{"query":{"match":{"title":"%SearchText%"}},"sort":[{"n":"desc"}]}'


@pytest.fixture(scope="module")
def ubi(direct: OpenSearch) -> Iterator[dict[str, str]]:
    """Index names of this module's own UBI queries and events (other tests read the real ones)."""
    names = {"queries": f"test-abq-{uuid.uuid4().hex[:8]}",
             "events": f"test-abe-{uuid.uuid4().hex[:8]}"}
    yield names
    direct.indices.delete(index=list(names.values()), ignore=[404])


@pytest.fixture(scope="module", params=["none", "haproxy"], ids=["gunicorn", "live"])
def front(request: pytest.FixtureRequest) -> str:
    """Every test runs against gunicorn alone (the Flask route) and against the HAProxy front,
    where the interleaved search is the live search server's (workbench/livesearch)."""
    return str(request.param)


@pytest.fixture(scope="module")
def ab_server(env: dict[str, str], ubi: dict[str, str], front: str) -> Iterator[Server]:
    server = Server(dict(env, WORKBENCH_AB_QUERIES_INDEX=ubi["queries"],
                         WORKBENCH_AB_EVENTS_INDEX=ubi["events"],
                         WORKBENCH_AB_FLUSH_SECONDS="0.2"), workers=1, front=front)
    yield server
    server.stop()


@pytest.fixture(scope="module")
def ab(ab_server: Server) -> Api:
    return Api(ab_server.url)


@pytest.fixture(scope="module")
def products(direct: OpenSearch) -> Iterator[str]:
    name = f"test-ab-products-{uuid.uuid4().hex[:8]}"
    direct.indices.create(index=name, body={"mappings": {"properties": {
        "title": {"type": "text"}, "n": {"type": "integer"}}}})
    for i in range(20):
        direct.index(index=name, id=f"d{i}", body={"title": f"red shoe number {i}", "n": i})
    direct.indices.refresh(index=name)
    yield name
    direct.indices.delete(index=name)


@pytest.fixture(scope="module")
def configs(ab: Api, products: str) -> tuple[str, str]:
    return (search_configuration(ab, f"a-{uuid.uuid4().hex[:6]}", products, MATCH),
            search_configuration(ab, f"b-{uuid.uuid4().hex[:6]}", products, BY_NUMBER))


def new_test(ab: Api, configs: tuple[str, str], **extra: Any) -> str:
    test_id = f"t-{uuid.uuid4().hex[:10]}"
    reply = ab.srw("PUT", f"/ab_tests/{test_id}", {"search_configuration_a": configs[0],
                                                    "search_configuration_b": configs[1], **extra})
    assert reply.status == 200, reply.data
    assert reply.json == {}
    return test_id


def text(reply: Any) -> tuple[int, str, str]:
    return reply.status, reply.headers["Content-Type"], reply.data.decode()


PLAIN = "text/plain; charset=UTF-8"


def reason(reply: Any) -> tuple[int, str, str]:
    error = reply.json["error"]
    return reply.status, error["type"], error["reason"]


# -- create ---------------------------------------------------------------------------------


def test_create_refuses_bad_bodies_in_the_plugins_order_as_plain_text(
        ab: Api, configs: tuple[str, str]) -> None:
    a, b = configs
    cases = [
        ({}, "Request body must not be empty"),
        ({"search_configuration_a": 1, "search_configuration_b": 2, "enabled": "x"},
         "search_configuration_a must be a string"),
        ({"search_configuration_a": a, "search_configuration_b": [b]},
         "search_configuration_b must be a string"),
        ({"search_configuration_a": a, "search_configuration_b": b, "enabled": "yes"},
         "enabled must be a boolean"),
        ({"search_configuration_a": a, "name": "ignored"},
         "Both search_configuration_a and search_configuration_b are required"),
        ({"search_configuration_a": a, "search_configuration_b": a},
         "search_configuration_a and search_configuration_b must be different"),
    ]
    for body, message in cases:
        assert text(ab.srw("PUT", "/ab_tests/t-bad", body)) == (400, PLAIN, message), body
    missing = ab.srw("PUT", "/ab_tests/t-bad", {"search_configuration_a": a,
                                                 "search_configuration_b": "no-such-config"})
    assert reason(missing) == (400, "search_relevance_exception",
                               "One or more search configurations not found")
    assert ab.srw("PUT", "/ab_tests/t-bad").json["error"]["type"] == "parse_exception"
    assert ab.srw("GET", "/ab_tests/t-bad").status == 404  # nothing was stored


def test_create_stores_the_plugins_document_and_refuses_an_existing_id(
        ab: Api, configs: tuple[str, str], direct: OpenSearch) -> None:
    test_id = new_test(ab, configs, name="the UI sends a name", size=5)
    source = direct.get(index=AB_INDEX, id=test_id)["_source"]
    assert set(source) == {"doc_type", "test_id", "search_configuration_a",
                           "search_configuration_b", "config_a_uuid", "config_b_uuid",
                           "enabled", "version", "created_at", "updated_at"}
    assert (source["doc_type"], source["test_id"], source["enabled"], source["version"]) == (
        "ab_test", test_id, True, 0)
    assert (source["search_configuration_a"], source["search_configuration_b"]) == configs
    assert source["config_a_uuid"] != source["config_b_uuid"]
    again = ab.srw("PUT", f"/ab_tests/{test_id}", {"search_configuration_a": configs[0],
                                                    "search_configuration_b": configs[1]})
    assert again.status == 409
    assert again.json["error"]["type"] == "version_conflict_engine_exception"


# -- update, versions and snapshots ----------------------------------------------------------


def test_update_messages(ab: Api, configs: tuple[str, str]) -> None:
    test_id = new_test(ab, configs)
    assert text(ab.srw("PUT", f"/ab_tests/{test_id}/_update", {})) == (
        400, PLAIN, "Request body must not be empty")
    assert text(ab.srw("PUT", f"/ab_tests/{test_id}/_update", {"enabled": 1})) == (
        400, PLAIN, "enabled must be a boolean")
    assert text(ab.srw("PUT", f"/ab_tests/{test_id}/_update", {"name": "x"})) == (
        400, PLAIN, "At least one field must be provided for update")
    assert reason(ab.srw("PUT", "/ab_tests/no-such-test/_update", {"enabled": False})) == (
        404, "search_relevance_exception", "AB test not found")
    assert reason(ab.srw("PUT", f"/ab_tests/{test_id}/_update",
                         {"search_configuration_b": configs[0]})) == (
        400, "search_relevance_exception",
        "search_configuration_a and search_configuration_b must be different")
    assert reason(ab.srw("PUT", f"/ab_tests/{test_id}/_update",
                         {"search_configuration_b": "no-such-config"})) == (
        400, "search_relevance_exception", "One or more search configurations not found")


def test_versions_snapshots_and_new_ids_when_a_configuration_changes(
        ab: Api, configs: tuple[str, str], products: str, direct: OpenSearch) -> None:
    test_id = new_test(ab, configs)
    first = direct.get(index=AB_INDEX, id=test_id)["_source"]
    # no change: nothing written
    assert ab.srw("PUT", f"/ab_tests/{test_id}/_update", {"enabled": True}).json == {}
    assert direct.get(index=AB_INDEX, id=test_id)["_source"] == first
    # switched off: version 1, same ids, a snapshot of version 0
    assert ab.srw("PUT", f"/ab_tests/{test_id}/_update", {"enabled": False}).json == {}
    off = direct.get(index=AB_INDEX, id=test_id)["_source"]
    assert (off["version"], off["enabled"]) == (1, False)
    assert (off["config_a_uuid"], off["config_b_uuid"]) == (first["config_a_uuid"],
                                                            first["config_b_uuid"])
    assert off["created_at"] == first["created_at"] and off["updated_at"] > first["updated_at"]
    snapshot = direct.get(index=AB_INDEX, id=f"{test_id}_0")["_source"]
    assert snapshot == {"doc_type": "snapshot", "doc_id": f"{test_id}_0", "test_id": test_id,
                        "version": 0, "created": off["updated_at"],
                        "record": {k: first[k] for k in (
                            "search_configuration_a", "search_configuration_b",
                            "config_a_uuid", "config_b_uuid", "enabled")}}
    # a new configuration B: version 2 with new ids for both sides
    other = search_configuration(ab, f"c-{uuid.uuid4().hex[:6]}", products, MATCH)
    ab.srw("PUT", f"/ab_tests/{test_id}/_update",
           {"search_configuration_b": other, "enabled": True})
    now = direct.get(index=AB_INDEX, id=test_id)["_source"]
    assert (now["version"], now["search_configuration_b"]) == (2, other)
    assert {now["config_a_uuid"], now["config_b_uuid"]}.isdisjoint(
        {first["config_a_uuid"], first["config_b_uuid"]})
    got = ab.srw("GET", f"/ab_tests/{test_id}").json
    assert [h["_id"] for h in got["hits"]["hits"]] == [test_id]
    versions = got["versions"]
    assert [(v["version"], v["enabled"]) for v in versions] == [(0, True), (1, False), (2, True)]
    assert versions[0]["started"] == first["created_at"]
    assert versions[0]["ended"] == versions[1]["started"] == off["updated_at"]
    assert versions[1]["ended"] == versions[2]["started"] == now["updated_at"]
    assert versions[2]["ended"] is None
    assert versions[2]["config_b_uuid"] == now["config_b_uuid"]


def test_delete_removes_the_test_and_its_snapshots_only(
        ab: Api, configs: tuple[str, str], direct: OpenSearch) -> None:
    keep, gone = new_test(ab, configs), new_test(ab, configs)
    for test_id in (keep, gone):
        ab.srw("PUT", f"/ab_tests/{test_id}/_update", {"enabled": False})
    assert ab.srw("DELETE", f"/ab_tests/{gone}").json == {}
    left = direct.search(index=AB_INDEX, body={"query": {"terms": {"test_id": [keep, gone]}}})
    assert sorted(h["_id"] for h in left["hits"]["hits"]) == [keep, f"{keep}_0"]
    assert reason(ab.srw("DELETE", f"/ab_tests/{gone}")) == (
        404, "search_relevance_exception", f"AB test '{gone}' not found")


def test_list_and_dsl_search(ab: Api, configs: tuple[str, str]) -> None:
    older, newer = new_test(ab, configs), new_test(ab, configs)
    ab.srw("PUT", f"/ab_tests/{older}/_update", {"enabled": False})  # a snapshot: not listed
    listed = [h["_id"] for h in ab.srw("GET", "/ab_tests").json["hits"]["hits"]]
    assert listed.index(newer) < listed.index(older)
    assert f"{older}_0" not in listed
    found = ab.srw("POST", "/ab_tests/_search",
                   {"query": {"term": {"test_id": older}}}).json["hits"]["hits"]
    assert sorted(h["_source"]["doc_type"] for h in found) == ["ab_test", "snapshot"]


# -- the interleaved search -----------------------------------------------------------------


def search(ab: Api, test_id: str, query: str = "red shoe", **extra: Any) -> Any:
    return ab.srw("POST", f"/ab_tests/{test_id}/_search",
                  {"query_params": {"SearchText": query}, **extra})


def test_search_refusals_in_the_plugins_order(ab: Api, configs: tuple[str, str],
                                              products: str, direct: OpenSearch) -> None:
    test_id = new_test(ab, configs)
    path = f"/ab_tests/{test_id}/_search"
    assert text(ab.srw("POST", path, {"query_params": {}})) == (
        400, PLAIN, "query_params map is required")
    assert text(ab.srw("POST", path, {"query_params": {"SearchText": "x" * 1025}})) == (
        400, PLAIN, "query_params value exceeds maximum length of 1024 characters")
    assert text(ab.srw("POST", path, {"query_params": {"SearchText": "a\u0001b"}})) == (
        400, PLAIN, "query_params value contains invalid control characters")
    # a missing test is a 404 before a missing SearchText is a 400
    assert reason(ab.srw("POST", "/ab_tests/no-such-test/_search",
                         {"query_params": {"q": "x"}})) == (
        404, "search_relevance_exception", "AB test not found")
    assert reason(ab.srw("POST", path, {"query_params": {"q": "x"}})) == (
        400, "search_relevance_exception", "SearchText is required in query_params")
    assert reason(search(ab, test_id, size=101)) == (
        400, "illegal_argument_exception", "size must be at most 100, got: 101")
    too_long = ab.srw("POST", path, {"query_params": {"SearchText": "x"}},
                      headers={"X-Client-Id": "u" * 101})
    assert reason(too_long) == (
        400, "illegal_argument_exception",
        "client_id (or the X-Client-Id header) must be at most 100 characters, got 101")
    # configurations on different indices
    elsewhere = f"{products}-other"
    direct.indices.create(index=elsewhere)
    try:
        other = search_configuration(ab, f"o-{uuid.uuid4().hex[:6]}", elsewhere, MATCH)
        mixed = new_test(ab, (configs[0], other))
        assert reason(search(ab, mixed)) == (
            400, "search_relevance_exception",
            "Both search configurations must target the same index. "
            f"Config A targets [{products}], Config B targets [{elsewhere}]")
        # the configuration is deleted after the test was served once (and cached)
        temp_a = search_configuration(ab, f"x-{uuid.uuid4().hex[:6]}", products, MATCH)
        temp_test = new_test(ab, (temp_a, configs[1]))
        assert search(ab, temp_test).status == 200
        assert ab.srw("DELETE", f"/search_configurations/{temp_a}").status == 200
        assert reason(search(ab, temp_test)) == (
            404, "search_relevance_exception", "Search configuration A not found")
    finally:
        direct.indices.delete(index=elsewhere)


def test_interleaved_hits_are_tagged_seeded_and_paged(ab: Api, configs: tuple[str, str]
                                                      ) -> None:
    test_id = new_test(ab, configs)
    reply = search(ab, test_id, client_id="user-1", size=10)
    assert reply.status == 200
    body = reply.json
    assert set(body) == {"test_id", "version", "query_id", "hits"}
    assert (body["test_id"], body["version"]) == (test_id, 0)
    uuid.UUID(body["query_id"])
    hits = body["hits"]
    ids = [h["_id"] for h in hits]
    assert len(ids) == len(set(ids)) == 10
    assert all(set(h) == {"_index", "_id", "_score", "_source", "_search_configuration_id"}
               for h in hits)
    got = ab.srw("GET", f"/ab_tests/{test_id}").json["hits"]["hits"][0]["_source"]
    teams = {got["config_a_uuid"]: "A", got["config_b_uuid"]: "B"}
    labels = [teams[h["_search_configuration_id"]] for h in hits]
    assert all(abs(labels[:k].count("A") - labels[:k].count("B")) <= 1
               for k in range(1, 11))
    # the same user sees the same list again; the header names the user as well as the body
    again = ab.srw("POST", f"/ab_tests/{test_id}/_search",
                   {"query_params": {"SearchText": "red shoe"}, "size": 10},
                   headers={"X-Client-Id": "user-1"}).json
    assert [h["_id"] for h in again["hits"]] == ids
    assert again["query_id"] != body["query_id"]  # a new impression
    # page 2 continues the same interleaving
    first = search(ab, test_id, client_id="user-1", size=4).json["hits"]
    second = search(ab, test_id, client_id="user-1", size=4, **{"from": 4}).json["hits"]
    assert [h["_id"] for h in first + second] == ids[:8]
    # some other user gets another draft of the same documents
    orders = {tuple(h["_id"] for h in search(ab, test_id, client_id=f"u{n}").json["hits"])
              for n in range(8)}
    assert len(orders) > 1


def test_a_short_side_ends_the_draft_and_its_filler_is_shown_but_not_credited(
        ab: Api, configs: tuple[str, str], products: str, direct: OpenSearch,
        ubi: dict[str, str]) -> None:
    # B finds two documents only: the draft ends when B has nothing new; A's next hits fill
    # the page
    few = search_configuration(ab, f"few-{uuid.uuid4().hex[:6]}", products,
                               '{"query":{"ids":{"values":["d3","d7"]}}}')
    test_id = new_test(ab, (configs[0], few))
    body = search(ab, test_id, client_id="user-short", size=10).json
    test = ab.srw("GET", f"/ab_tests/{test_id}").json["hits"]["hits"][0]["_source"]
    assert len(body["hits"]) == 10
    assert {h["_search_configuration_id"] for h in body["hits"][5:]} == {test["config_a_uuid"]}
    doc = wait_for_impressions(direct, ubi["queries"], [body["query_id"]])[body["query_id"]]
    teams = doc["query_attributes"]["ab_test_teams"]
    drafted = [t for t in teams if t in ("A", "B")]
    assert drafted.count("B") == 2 and abs(drafted.count("A") - 2) <= 1  # balanced
    assert teams[len(drafted):] == ["a"] * (10 - len(drafted))
    # a click on a filler says nothing
    filler = body["hits"][-1]["_id"]
    click(direct, ubi["events"], body["query_id"], filler, 10)
    direct.indices.refresh(index=ubi["events"])
    result = ab.srw("GET", f"/ab_tests/{test_id}/_results").json
    assert (result["impressions"], result["impressions_with_clicks"]) == (1, 0)


def ids_configuration(ab: Api, products: str, ids: list[str]) -> str:
    """A configuration that finds these documents, in this order (``n`` ascending)."""
    return search_configuration(ab, f"ids-{uuid.uuid4().hex[:6]}", products, json.dumps(
        {"query": {"ids": {"values": ids}}, "sort": [{"n": "asc"}]}))


def test_two_lists_of_three_with_nothing_in_common_show_three(
        ab: Api, products: str, direct: OpenSearch, ubi: dict[str, str]) -> None:
    # The plugin's answer: its list is as long as the longer of the two (3), not their union.
    test_id = new_test(ab, (ids_configuration(ab, products, ["d1", "d2", "d3"]),
                            ids_configuration(ab, products, ["d4", "d5", "d6"])))
    test = ab.srw("GET", f"/ab_tests/{test_id}").json["hits"]["hits"][0]["_source"]
    teams = {test["config_a_uuid"]: "A", test["config_b_uuid"]: "B"}
    thirds = set()
    for n in range(12):
        body = search(ab, test_id, client_id=f"three-{n}", size=10).json
        hits = [(h["_id"], teams[h["_search_configuration_id"]]) for h in body["hits"]]
        assert len(hits) == 3
        # round 1: the best of each, one per team; the coin gives the third place to either
        assert {hits[0], hits[1]} == {("d1", "A"), ("d4", "B")}
        assert hits[2] in (("d2", "A"), ("d5", "B"))
        thirds.add(hits[2])
    assert len(thirds) == 2
    # the impression holds the three shown, all credited
    doc = wait_for_impressions(direct, ubi["queries"], [body["query_id"]])[body["query_id"]]
    assert doc["query_response_hit_ids"] == [doc_id for doc_id, _ in hits]
    assert doc["query_attributes"]["ab_test_teams"] == [team for _, team in hits]
    # a page past the three shows nothing
    assert search(ab, test_id, client_id="three-0", size=10, **{"from": 3}).json["hits"] == []


def test_a_search_that_shows_nothing_is_no_impression(
        ab: Api, configs: tuple[str, str], direct: OpenSearch, ubi: dict[str, str]) -> None:
    test_id = new_test(ab, configs)
    empty = [search(ab, test_id, client_id="shows-nothing", size=0),  # size 0
             search(ab, test_id, query="zebra", client_id="shows-nothing"),  # no hits
             search(ab, test_id, client_id="shows-nothing", **{"from": 40})]  # past the end
    for reply in empty:
        assert reply.status == 200
        assert reply.json == {"test_id": test_id, "version": 0, "query_id": None, "hits": []}
    shown = search(ab, test_id, client_id="shows-something", size=1).json
    assert len(shown["hits"]) == 1 and shown["query_id"] is not None
    # once the impression of the search that showed a hit is stored, it is the only one
    wait_for_impressions(direct, ubi["queries"], [shown["query_id"]])
    found = direct.search(index=ubi["queries"], body={
        "query": {"term": {"query_attributes.ab_test_id": test_id}}})
    assert [h["_source"]["query_id"] for h in found["hits"]["hits"]] == [shown["query_id"]]
    result = ab.srw("GET", f"/ab_tests/{test_id}/_results").json
    assert (result["impressions"], result["impressions_without_clicks"]) == (1, 1)


def test_a_list_or_an_object_in_query_params_is_read_as_java_writes_it(
        ab: Api, configs: tuple[str, str], direct: OpenSearch, ubi: dict[str, str]) -> None:
    test_id = new_test(ab, configs)
    path = f"/ab_tests/{test_id}/_search"
    as_list = ab.srw("POST", path, {"query_params": {"SearchText": ["red", "shoe"]},
                                    "client_id": "java-list"}).json
    as_object = ab.srw("POST", path, {"query_params": {"SearchText": {
        "size": 1.0, "colour": "red", "tags": ["a", "b"], "on": True, "n": None,
        "big": 12345678901234567890, "x": 1.5e20}}, "client_id": "java-map"}).json
    docs = wait_for_impressions(direct, ubi["queries"],
                                [as_list["query_id"], as_object["query_id"]])
    assert docs[as_list["query_id"]]["user_query"] == "[red, shoe]"
    # a java.util.HashMap, in its order
    assert docs[as_object["query_id"]]["user_query"] == (
        "{big=12345678901234567890, colour=red, size=1.0, x=1.5E20, n=null, tags=[a, b], "
        "on=true}")
    assert len(as_list["hits"]) == 10 and len(as_object["hits"]) == 10  # "red" matches
    # the limit applies to Java's text: "[" + 1022 + "]" is 1024 characters, one more is 1025
    assert ab.srw("POST", path, {"query_params": {"SearchText": ["x" * 1022]}}).status == 200
    assert text(ab.srw("POST", path, {"query_params": {"SearchText": ["x" * 1023]}})) == (
        400, PLAIN, "query_params value exceeds maximum length of 1024 characters")
    assert text(ab.srw("POST", path, {"query_params": {"SearchText": "x",
                                                       "other": {"k": "a\u0001"}}})) == (
        400, PLAIN, "query_params value contains invalid control characters")


def test_query_text_with_quotes_and_backslashes_is_searched_as_typed(
        ab: Api, configs: tuple[str, str]) -> None:
    test_id = new_test(ab, configs)
    reply = search(ab, test_id, query='red "shoe\\')
    assert reply.status == 200, reply.data
    assert len(reply.json["hits"]) == 10


def test_a_disabled_test_serves_a_and_records_nothing(
        ab: Api, configs: tuple[str, str], direct: OpenSearch, ubi: dict[str, str]) -> None:
    test_id = new_test(ab, configs, enabled=False)
    body = search(ab, test_id, client_id="user-off").json
    a_uuid = ab.srw("GET", f"/ab_tests/{test_id}").json["hits"]["hits"][0]["_source"][
        "config_a_uuid"]
    assert body["query_id"] is None
    assert {h["_search_configuration_id"] for h in body["hits"]} == {a_uuid}
    # A alone: its own ranking, by score
    scores = [h["_score"] for h in body["hits"]]
    assert scores == sorted(scores, reverse=True)
    time.sleep(0.6)
    direct.indices.refresh(index=ubi["queries"], ignore_unavailable=True)
    found = direct.search(index=ubi["queries"], ignore_unavailable=True, body={
        "query": {"term": {"client_id": "user-off"}}})
    assert found["hits"]["hits"] == []


def wait_for_impressions(direct: OpenSearch, index: str, query_ids: list[str]
                         ) -> dict[str, dict[str, Any]]:
    deadline = time.monotonic() + 20
    while True:
        direct.indices.refresh(index=index, ignore_unavailable=True)
        found = direct.search(index=index, ignore_unavailable=True, body={
            "query": {"terms": {"query_id": query_ids}}, "size": len(query_ids)})
        docs = {h["_source"]["query_id"]: h["_source"] for h in found["hits"]["hits"]}
        if len(docs) == len(query_ids) or time.monotonic() > deadline:
            return docs
        time.sleep(0.2)


def test_each_interleaved_search_is_recorded_as_a_ubi_query(
        ab: Api, configs: tuple[str, str], direct: OpenSearch, ubi: dict[str, str]) -> None:
    test_id = new_test(ab, configs)
    body = search(ab, test_id, client_id="user-rec", size=5, **{"from": 2}).json
    test = ab.srw("GET", f"/ab_tests/{test_id}").json["hits"]["hits"][0]["_source"]
    teams = {test["config_a_uuid"]: "A", test["config_b_uuid"]: "B"}
    doc = wait_for_impressions(direct, ubi["queries"], [body["query_id"]])[body["query_id"]]
    stamp = doc.pop("timestamp")
    assert stamp.endswith("Z") and stamp[:4] == "20" + stamp[2:4]
    assert doc == {
        "query_id": body["query_id"], "user_query": "red shoe", "client_id": "user-rec",
        "application": "search-relevance-ab-test", "indexes": [body["hits"][0]["_index"]],
        "query_response_hit_ids": [h["_id"] for h in body["hits"]],
        "query_attributes": {
            "ab_test_id": test_id, "ab_test_version": "0",
            "ab_test_config_a_uuid": test["config_a_uuid"],
            "ab_test_config_b_uuid": test["config_b_uuid"],
            "ab_test_teams": [teams[h["_search_configuration_id"]] for h in body["hits"]],
            "ab_test_from": "2"}}
    mapping = direct.indices.get_mapping(index=ubi["queries"])
    (properties,) = [m["mappings"]["properties"] for m in mapping.values()]
    assert properties["query_attributes"]["type"] == "flat_object"  # the UBI mapping


# -- the verdict ------------------------------------------------------------------------------


def now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def click(direct: OpenSearch, index: str, query_id: str, doc_id: str, ordinal: int) -> None:
    direct.index(index=index, body={
        "action_name": "click", "query_id": query_id, "timestamp": now(),
        "event_attributes": {"object": {"object_id": doc_id},
                             "position": {"ordinal": ordinal}}})


def test_results_credit_each_impression_and_test_wins_exactly(
        ab: Api, configs: tuple[str, str], direct: OpenSearch, ubi: dict[str, str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    test_id = new_test(ab, configs)
    test = ab.srw("GET", f"/ab_tests/{test_id}").json["hits"]["hits"][0]["_source"]
    team_of = {test["config_a_uuid"]: "A", test["config_b_uuid"]: "B"}
    served = [search(ab, test_id, query=q, client_id=f"c{n}").json
              for n, q in enumerate(["red shoe"] * 4 + ["shoe"] * 3)]
    wait_for_impressions(direct, ubi["queries"], [s["query_id"] for s in served])

    def first(body: dict[str, Any], team: str) -> tuple[str, int]:
        rank, hit = next((r, h) for r, h in enumerate(body["hits"], 1)
                         if team_of[h["_search_configuration_id"]] == team)
        return hit["_id"], rank

    events = ubi["events"]
    direct.indices.create(index=events, ignore=400, body={"mappings": {"properties": {
        "query_id": {"type": "keyword"}, "action_name": {"type": "keyword"},
        "timestamp": {"type": "date"},
        "event_attributes": {"properties": {"object": {"properties": {
            "object_id": {"type": "keyword"}}}}}}}})
    # impressions 0-2: A's document clicked (0 twice: counts once); 3: B's; 4: one of each (a
    # tie); 5 and 6: no click
    for n, team in [(0, "A"), (0, "A"), (1, "A"), (2, "A"), (3, "B"), (4, "A"), (4, "B")]:
        doc_id, rank = first(served[n], team)
        click(direct, events, served[n]["query_id"], doc_id, rank)
    direct.index(index=events, body={"action_name": "hover", "query_id": served[5]["query_id"],
                                     "event_attributes": {"object": {"object_id": "d1"}}})
    direct.indices.refresh(index=events)
    result = ab.srw("GET", f"/ab_tests/{test_id}/_results").json
    assert (result["impressions"], result["impressions_with_clicks"],
            result["impressions_without_clicks"]) == (7, 5, 2)
    assert (result["wins_a"], result["wins_b"], result["ties"]) == (3, 1, 1)
    assert result["delta_ab"] == pytest.approx((3 + 0.5) / 5 - 0.5)
    assert result["p_value"] == pytest.approx(binomtest(3, 4, 0.5).pvalue)
    assert (result["significant"], result["winner"]) == (False, None)
    # the plugin UI's computation on the same clicks: 4 of A's documents, 2 of B's
    totals = result["total_clicks"]
    assert (totals["clicks_a"], totals["clicks_b"], totals["winner"]) == (4, 2, "A")
    assert totals["z"] == pytest.approx((4 - 3) / (6 / 4) ** 0.5)
    assert "100" in result["warning"]
    per_query = {q["query"]: q for q in result["per_query"]}
    assert (per_query["red shoe"]["wins_a"], per_query["red shoe"]["wins_b"]) == (3, 1)
    assert (per_query["shoe"]["ties"], per_query["shoe"]["impressions"]) == (1, 3)
    assert result["version"]["version"] == 0
    assert sum(b["impressions"] for b in result["timeline"]["buckets"]) == 7
    # Read two impressions (and their clicks) at a time, counted page by page: the same answer.
    monkeypatch.setattr(results, "PAGE", 2)
    monkeypatch.setattr(results, "IDS_PER_REQUEST", 2)
    stored = definitions.read(direct, test_id)
    assert stored is not None
    paged = results.results(direct, results.Indices(ubi["queries"], events), stored[0], None,
                            None, None, None)
    assert json.loads(json.dumps(paged)) == result
    # a window that ends before the impressions holds none of them
    early = ab.srw("GET", f"/ab_tests/{test_id}/_results", params={"to": "2000-01-01"}).json
    assert early["impressions"] == 0 and early["delta_ab"] is None
    for version in ("7", "\u00b2", "0" * 5000):
        assert reason(ab.srw("GET", f"/ab_tests/{test_id}/_results",
                             params={"version": version}))[:2] == (
            400, "illegal_argument_exception"), version
    report = ab.srw("GET", f"/ab_tests/{test_id}/_report")
    assert report.status == 200 and report.headers["Content-Type"].startswith("text/html")
    assert b"data:image/png;base64," in report.data and b"red shoe" in report.data


def test_the_plugin_uis_clicks_are_read_as_the_ui_reads_them(
        ab: Api, configs: tuple[str, str], direct: OpenSearch, ubi: dict[str, str]) -> None:
    test_id = new_test(ab, configs)
    test = ab.srw("GET", f"/ab_tests/{test_id}").json["hits"]["hits"][0]["_source"]
    events = ubi["events"]
    for config_uuid, count in ((test["config_a_uuid"], 2), (test["config_b_uuid"], 5),
                               ("some-other-uuid", 3)):
        for _ in range(count):  # the document the Dashboards server writes
            direct.index(index=events, body={
                "timestamp": now(), "action_name": "click",
                "event_attributes": {"object": {"id": "d1",
                                                "search_configuration_uuid": config_uuid},
                                     "position": {"ordinal": 1}, "ab_test_id": test_id}})
    direct.indices.refresh(index=events)
    ui = ab.srw("GET", f"/ab_tests/{test_id}/_results").json["plugin_ui_clicks"]
    # z = (2 - 3.5) / sqrt(7 / 4); p = 2 (1 - Phi(|z|))
    assert (ui["clicks_a"], ui["clicks_b"], ui["winner"], ui["significant"]) == (2, 5, "B",
                                                                                False)
    assert ui["z"] == pytest.approx(-1.5 / (7 / 4) ** 0.5)
    assert ui["p_value"] == pytest.approx(0.2568, abs=1e-4)


def test_a_clean_shutdown_loses_no_impression(env: dict[str, str], configs: tuple[str, str],
                                              direct: OpenSearch, front: str) -> None:
    index = f"test-abq-{uuid.uuid4().hex[:8]}"
    server = Server(dict(env, WORKBENCH_AB_QUERIES_INDEX=index,
                         WORKBENCH_AB_FLUSH_SECONDS="60"), workers=1, front=front)
    try:
        api = Api(server.url)
        test_id = new_test(api, configs)
        ids = [search(api, test_id, client_id=f"s{n}").json["query_id"] for n in range(5)]
        assert not direct.indices.exists(index=index)  # nothing written for 60 s
    finally:
        server.stop()
    try:
        assert set(wait_for_impressions(direct, index, ids)) == set(ids)
    finally:
        direct.indices.delete(index=index, ignore=[404])


def test_the_definition_is_kept_until_a_change_through_the_workbench(
        ab: Api, configs: tuple[str, str], products: str, direct: OpenSearch) -> None:
    temp = search_configuration(ab, f"k-{uuid.uuid4().hex[:6]}", products, MATCH)
    test_id = new_test(ab, (temp, configs[1]))
    assert search(ab, test_id).status == 200  # the test and its configurations are kept now
    direct.delete(index="search-relevance-search-config", id=temp, refresh="true")
    assert search(ab, test_id).status == 200  # removed behind the workbench's back: still kept
    ab.srw("PUT", f"/ab_tests/{test_id}/_update", {"enabled": False})
    ab.srw("PUT", f"/ab_tests/{test_id}/_update", {"enabled": True})
    assert reason(search(ab, test_id)) == (
        404, "search_relevance_exception", "Search configuration A not found")


def test_a_test_document_without_the_fields_a_search_needs_is_the_plugins_500(
        ab: Api, configs: tuple[str, str], direct: OpenSearch) -> None:
    test_id = f"t-partial-{uuid.uuid4().hex[:8]}"
    direct.index(index=AB_INDEX, id=test_id, refresh="true", body={
        "doc_type": "ab_test", "test_id": test_id, "search_configuration_a": configs[0],
        "search_configuration_b": configs[1], "enabled": True, "version": 0})
    assert reason(search(ab, test_id)) == (
        500, "search_relevance_exception", "AB test document is missing required fields")
    assert ab.srw("DELETE", f"/ab_tests/{test_id}").json == {}  # it can still be deleted
