"""Creates are never ambiguous (docs/reliability.md): a create the cluster did not answer names
the entity and says whether it may exist; a retry with the same Idempotency-Key gets that entity,
never a second one. Against the real cluster and Redis; the frozen and refused cluster are a TCP
relay in front of the real node (tests/support/relay.py)."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any
from urllib.parse import urlsplit

import pytest
import redis
from opensearchpy import OpenSearch

from tests.support.api import Api, Reply
from tests.support.processes import Server, Worker, free_port
from tests.support.relay import TcpRelay
from tests.support.waiting import settled
from workbench.jobs import leases
from workbench.store.indices import (
    EVALUATE_BATCH_INDEX,
    EXPERIMENT_INDEX,
    JUDGMENT_INDEX,
    QUERY_SET_INDEX,
    SEARCH_CONFIG_INDEX,
)

KEY = "Idempotency-Key"
REPLAYED = "Idempotent-Replayed"
GENERATE = "workbench.judgments.generate"
TIMEOUT = 2  # OPENSEARCH_TIMEOUT of the servers behind the relay
CREATE_JUDGMENT = f"PUT /{JUDGMENT_INDEX}/_doc/".encode()
READ_SETTINGS = b"GET /.plugins-search-relevance-settings/_doc/"  # the gate's last cluster call


def judgment(name: str, rating: str = "1") -> dict[str, Any]:
    """An IMPORT judgment: its job needs no LLM."""
    return {"name": name, "type": "IMPORT_JUDGMENT", "judgmentRatings": [
        {"query": "red shoes", "ratings": [{"docId": "d1", "rating": rating}]}]}


def ids_named(direct: OpenSearch, index: str, name: str) -> list[str]:
    direct.indices.refresh(index=index)
    hits = direct.search(index=index, body={"query": {"term": {"name": name}}, "size": 10,
                                            "_source": False})["hits"]["hits"]
    return [hit["_id"] for hit in hits]


def wait_status(direct: OpenSearch, index: str, entity_id: str, timeout: float = 60) -> str:
    return str(settled(direct, index, entity_id, timeout, running=("PROCESSING",))["status"])


def keyed(key: str) -> dict[str, dict[str, str]]:
    return {"headers": {KEY: key}}


def timed(call: Callable[[], Reply]) -> tuple[Reply, float]:
    started = time.monotonic()
    reply = call()
    return reply, time.monotonic() - started


@pytest.fixture
def behind_relay(env: dict[str, str], opensearch_url: str,
                 worker: Worker) -> Iterator[tuple[TcpRelay, Api]]:
    """A workbench API whose cluster is a relay in front of the real node, with a short
    OPENSEARCH_TIMEOUT; it shares the session worker's queue and Redis."""
    cluster = urlsplit(opensearch_url)
    relay = TcpRelay(free_port(), (cluster.hostname or "127.0.0.1", cluster.port or 9200))
    relay.start()
    srv = Server(dict(env, OPENSEARCH_URL=f"http://127.0.0.1:{relay.port}",
                      OPENSEARCH_TIMEOUT=str(TIMEOUT)), workers=1)
    try:
        yield relay, Api(srv.url)
    finally:
        srv.stop()
        relay.stop()


@pytest.fixture
def names(direct: OpenSearch) -> Iterator[list[tuple[str, str]]]:
    """(index, name) of the entities a test creates, deleted afterwards."""
    made: list[tuple[str, str]] = []
    yield made
    for index, name in made:
        direct.delete_by_query(index=index, body={"query": {"term": {"name": name}}},
                               refresh=True, conflicts="proceed", ignore=[404])


def warm_name_and_key(api: Api, names: list[tuple[str, str]], label: str) -> tuple[str, str]:
    """A judgment name (its judgments deleted after the test) and an Idempotency-Key, both
    starting with ``label``, once the server has answered a first request (the create under
    test is not the server's first request)."""
    name = f"{label}-{uuid.uuid4().hex[:8]}"
    names.append((JUDGMENT_INDEX, name))
    assert api.srw("GET", "/judgments").status == 200  # the server is warm
    return name, f"{label}-{uuid.uuid4()}"


def test_a_create_the_frozen_cluster_stored_is_a_504_naming_it_and_its_retry_gets_it(
        behind_relay: tuple[TcpRelay, Api], direct: OpenSearch, redis_url: str,
        names: list[tuple[str, str]]) -> None:
    relay, api = behind_relay
    name, key = warm_name_and_key(api, names, "frozen")

    relay.hold(CREATE_JUDGMENT)  # the create reaches the cluster; its answer never comes back
    reply, took = timed(lambda: api.srw("PUT", "/judgments", judgment(name), **keyed(key)))
    print(f"\nPUT judgments, cluster frozen after the write: {reply.status} in {took:.2f}s")
    assert relay.held.is_set()
    stored = ids_named(direct, JUDGMENT_INDEX, name)
    assert len(stored) == 1, stored  # the judgment really was stored
    judgment_id = stored[0]
    reason = (f"OpenSearch cluster at http://127.0.0.1:{relay.port} did not answer within "
              f"{TIMEOUT}s while judgment {judgment_id} was being created; it may have been "
              "stored. Send the same request again with the same Idempotency-Key header to get "
              "that judgment instead of a second one.")
    cause = {"type": "timeout_exception", "reason": reason, "entity_id": judgment_id,
             "entity_may_exist": True}
    assert reply.status == 504, reply.data[:500]
    assert reply.json == {"error": {"root_cause": [cause], **cause}, "status": 504}
    assert TIMEOUT <= took < TIMEOUT + 3
    # Not queued by the request that could not tell whether it was stored.
    r = redis.Redis.from_url(redis_url)
    assert direct.get(index=JUDGMENT_INDEX, id=judgment_id)["_source"]["status"] == "PROCESSING"
    assert leases.state(r, GENERATE, judgment_id) == (None, None)

    relay.release()
    again = api.srw("PUT", "/judgments", judgment(name), **keyed(key))
    assert again.status == 200, again.data[:500]
    assert again.json == {"judgment_id": judgment_id}
    assert again.headers.get(REPLAYED) == "true"
    assert ids_named(direct, JUDGMENT_INDEX, name) == [judgment_id]
    assert wait_status(direct, JUDGMENT_INDEX, judgment_id) == "COMPLETED"  # its job ran


def test_a_refused_create_is_a_503_saying_it_was_not_stored(
        behind_relay: tuple[TcpRelay, Api], direct: OpenSearch,
        names: list[tuple[str, str]]) -> None:
    relay, api = behind_relay
    name, key = warm_name_and_key(api, names, "refused")

    # A settings change (a reset to the default, in effect none) makes every process read the
    # settings again at its next request (store/generation.py): that read is the gate's last
    # call to the cluster.
    changed = api.call("PUT", "/_cluster/settings",
                       {"persistent": {"plugins.search_relevance.workbench_enabled": None}})
    assert changed.status == 200, changed.data
    relay.stop_after(READ_SETTINGS)  # the relay is gone by the time the create connects
    reply = api.srw("PUT", "/judgments", judgment(name), **keyed(key))
    assert relay.stopped.is_set()
    assert reply.status == 503, reply.data[:500]
    judgment_id = reply.json["error"]["entity_id"]
    reason = (f"OpenSearch cluster at http://127.0.0.1:{relay.port} is unreachable; judgment "
              f"{judgment_id} was not created (the request never reached the cluster). Send the "
              "request again with the same Idempotency-Key header once the cluster can be "
              "reached.")
    cause = {"type": "cluster_unavailable_exception", "reason": reason,
             "entity_id": judgment_id, "entity_may_exist": False}
    assert reply.json == {"error": {"root_cause": [cause], **cause}, "status": 503}
    assert ids_named(direct, JUDGMENT_INDEX, name) == []

    relay.start()  # back: the retry is the first create, not a replay
    again = api.srw("PUT", "/judgments", judgment(name), **keyed(key))
    assert again.status == 200, again.data[:500]
    assert again.json == {"judgment_id": judgment_id}
    assert REPLAYED not in again.headers
    assert ids_named(direct, JUDGMENT_INDEX, name) == [judgment_id]


def test_a_create_whose_check_times_out_before_the_write_names_it_as_not_created(
        behind_relay: tuple[TcpRelay, Api], direct: OpenSearch, index_name: str,
        names: list[tuple[str, str]]) -> None:
    """The cluster freezes on the search configuration's check of its index, before the
    write: the 504 names the entity, which does not exist, and the keyed retry creates it."""
    relay, api = behind_relay
    direct.index(index=index_name, id="d1", body={"title": "red shoes"}, refresh=True)
    name, key = f"check-{uuid.uuid4().hex[:8]}", str(uuid.uuid4())
    names.append((SEARCH_CONFIG_INDEX, name))
    config = {"name": name, "index": index_name,
              "query": '{"query":{"match":{"title":"%SearchText%"}}}'}
    assert api.srw("GET", "/search_configurations").status == 200  # the server is warm
    relay.hold(f"POST /{index_name}/_search".encode())  # index_exists asks with a search
    reply = api.srw("PUT", "/search_configurations", config, **keyed(key))
    assert relay.held.is_set()
    assert reply.status == 504, reply.data[:500]
    entity_id = reply.json["error"]["entity_id"]
    reason = (f"OpenSearch cluster at http://127.0.0.1:{relay.port} did not answer within "
              f"{TIMEOUT}s; search configuration {entity_id} was not created (the cluster "
              "failed before its write). Send the request again with the same Idempotency-Key "
              "header once the cluster answers.")
    cause = {"type": "timeout_exception", "reason": reason, "entity_id": entity_id,
             "entity_may_exist": False}
    assert reply.json == {"error": {"root_cause": [cause], **cause}, "status": 504}
    assert ids_named(direct, SEARCH_CONFIG_INDEX, name) == []

    relay.release()
    again = api.srw("PUT", "/search_configurations", config, **keyed(key))
    assert again.status == 200, again.data[:500]
    assert again.json["search_configuration_id"] == entity_id
    assert REPLAYED not in again.headers
    assert ids_named(direct, SEARCH_CONFIG_INDEX, name) == [entity_id]


def test_the_same_key_twice_makes_one_judgment(api: Api, direct: OpenSearch, worker: Worker,
                                               names: list[tuple[str, str]]) -> None:
    name = f"twice-{uuid.uuid4().hex[:8]}"
    names.append((JUDGMENT_INDEX, name))
    key = str(uuid.uuid4())
    first = api.srw("PUT", "/judgments", judgment(name), **keyed(key))
    second = api.srw("PUT", "/judgments", judgment(name), **keyed(key))
    assert first.status == second.status == 200, (first.data, second.data)
    assert first.data == second.data
    assert REPLAYED not in first.headers and second.headers.get(REPLAYED) == "true"
    judgment_id = first.json["judgment_id"]
    assert ids_named(direct, JUDGMENT_INDEX, name) == [judgment_id]
    assert wait_status(direct, JUDGMENT_INDEX, judgment_id) == "COMPLETED"
    third = api.srw("PUT", "/judgments", judgment(name), **keyed(key))  # after it ran
    assert (third.status, third.data, third.headers.get(REPLAYED)) == (200, first.data, "true")

    reply = api.srw("PUT", "/judgments", judgment(name, rating="0"), **keyed(key))
    reply.error(422, f"The Idempotency-Key header was already used for judgment {judgment_id} "
                     "with a different request body; send a new Idempotency-Key with a "
                     "different request", "illegal_argument_exception")
    other = api.srw("PUT", "/judgments", judgment(name), **keyed(key + "-other"))
    assert other.status == 200 and other.json["judgment_id"] != judgment_id
    assert len(ids_named(direct, JUDGMENT_INDEX, name)) == 2


@pytest.mark.parametrize(("key", "problem"), [
    ("", "it is empty"),
    ("k" * 256, "it has 256"),
    ("clé-1", "it has a character that is not printable ASCII"),
])
def test_a_bad_key_is_a_400_naming_the_header(api: Api, direct: OpenSearch, key: str,
                                             problem: str) -> None:
    name = f"badkey-{uuid.uuid4().hex[:8]}"
    reason = f"Idempotency-Key header must be 1 to 255 printable ASCII characters; {problem}"
    raw = key.encode("utf-8").decode("latin-1")  # how a client sends it on the wire
    for path, body in (("/judgments", judgment(name)),
                       ("/query_sets", {"name": name, "querySetQueries": [{"queryText": "q"}]})):
        api.srw("PUT", path, body, **keyed(raw)).error(400, reason, "illegal_argument_exception")
    assert ids_named(direct, JUDGMENT_INDEX, name) == []
    assert ids_named(direct, QUERY_SET_INDEX, name) == []


def test_query_set_and_search_configuration_replays_and_422s(
        api: Api, direct: OpenSearch, index_name: str, names: list[tuple[str, str]]) -> None:
    direct.index(index=index_name, id="d1", body={"title": "red shoes"}, refresh=True)
    name = f"keyed-{uuid.uuid4().hex[:8]}"
    query_set = {"name": name, "querySetQueries": [{"queryText": "red shoes"}]}
    config = {"name": name, "index": index_name,
              "query": '{"query":{"match":{"title":"%SearchText%"}}}'}
    for path, index, body, id_field, kind in (
            ("/query_sets", QUERY_SET_INDEX, query_set, "query_set_id", "query set"),
            ("/search_configurations", SEARCH_CONFIG_INDEX, config, "search_configuration_id",
             "search configuration")):
        names.append((index, name))
        key = str(uuid.uuid4())
        first = api.srw("PUT", path, body, **keyed(key))
        second = api.srw("PUT", path, body, **keyed(key))
        assert first.status == second.status == 200, (first.data, second.data)
        assert first.data == second.data
        result_field = id_field.replace("_id", "_result")
        assert first.json == {id_field: first.json[id_field], result_field: "CREATED"}
        assert REPLAYED not in first.headers and second.headers.get(REPLAYED) == "true"
        assert ids_named(direct, index, name) == [first.json[id_field]]
        api.srw("PUT", path, {**body, "description": "changed"}, **keyed(key)).error(
            422, f"The Idempotency-Key header was already used for {kind} "
                 f"{first.json[id_field]} with a different request body; send a new "
                 "Idempotency-Key with a different request", "illegal_argument_exception")
        assert ids_named(direct, index, name) == [first.json[id_field]]


def test_experiment_and_evaluate_batch_replays(api: Api, direct: OpenSearch, worker: Worker,
                                              index_name: str,
                                              names: list[tuple[str, str]]) -> None:
    direct.index(index=index_name, id="d1", body={"title": "red shoes"}, refresh=True)
    name = f"keyed-{uuid.uuid4().hex[:8]}"
    for index in (QUERY_SET_INDEX, SEARCH_CONFIG_INDEX, JUDGMENT_INDEX):
        names.append((index, name))
    query_set = api.srw("PUT", "/query_sets", {"name": name, "querySetQueries": [
        {"queryText": "red shoes"}]}).json["query_set_id"]
    config = api.srw("PUT", "/search_configurations", {
        "name": name, "index": index_name,
        "query": '{"query":{"match":{"title":"%SearchText%"}}}'}).json["search_configuration_id"]
    judgment_id = api.srw("PUT", "/judgments", judgment(name)).json["judgment_id"]
    experiment = {"name": name, "type": "POINTWISE_EVALUATION", "querySetId": query_set,
                  "searchConfigurationList": [config], "judgmentList": [judgment_id],
                  "size": 3}
    key = str(uuid.uuid4())
    first = api.srw("PUT", "/experiments", experiment, **keyed(key))
    second = api.srw("PUT", "/experiments", experiment, **keyed(key))
    assert first.status == second.status == 200, (first.data, second.data)
    assert first.data == second.data
    assert REPLAYED not in first.headers and second.headers.get(REPLAYED) == "true"
    experiment_id = first.json["experiment_id"]
    try:
        direct.indices.refresh(index=EXPERIMENT_INDEX)
        found = direct.search(index=EXPERIMENT_INDEX, body={
            "query": {"term": {"querySetId": query_set}}, "_source": False})["hits"]["hits"]
        assert [hit["_id"] for hit in found] == [experiment_id]
        assert wait_status(direct, EXPERIMENT_INDEX, experiment_id) == "COMPLETED"
    finally:
        api.srw("DELETE", f"/experiments/{experiment_id}")

    entries = [{"queryText": f"item {n}", "judge": "token_overlap",
                "referenceAnswer": f"item {n}", "hits": [{"id": "1", "t": f"item {n}"}]}
               for n in range(51)]  # above WORKBENCH_EVALUATE_BATCH_LIMIT: a job
    key = str(uuid.uuid4())
    first = api.srw("POST", "/_evaluate/_batch", {"queries": entries}, **keyed(key))
    second = api.srw("POST", "/_evaluate/_batch", {"queries": entries}, **keyed(key))
    assert first.status == second.status == 202, (first.data, second.data)
    assert first.data == second.data
    assert first.json == {"id": first.json["id"], "status": "PROCESSING", "queries": 51}
    assert REPLAYED not in first.headers and second.headers.get(REPLAYED) == "true"
    try:
        assert wait_status(direct, EVALUATE_BATCH_INDEX, first.json["id"]) == "COMPLETED"
        api.srw("POST", "/_evaluate/_batch", {"queries": entries[::-1]}, **keyed(key)).error(
            422, f"The Idempotency-Key header was already used for evaluation batch "
                 f"{first.json['id']} with a different request body; send a new "
                 "Idempotency-Key with a different request", "illegal_argument_exception")
    finally:
        direct.delete(index=EVALUATE_BATCH_INDEX, id=first.json["id"], refresh=True,
                      ignore=[404])
