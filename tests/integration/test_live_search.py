"""The live A/B search server behind the HAProxy front (workbench/livesearch, docs/front.md): it
answers the interleaved search itself, exactly as the Flask route does, and hands every request
it does not answer to gunicorn, whose answer comes back unchanged. Both servers here share the
cluster and Redis, so the same test, text and client id must draw the same list on both."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator
from email.utils import parsedate_to_datetime

import pytest
import redis
from opensearchpy import OpenSearch

from tests.support.api import Api, Reply, search_configuration
from tests.support.processes import Server
from workbench import redis_client
from workbench.config import Config
from workbench.redis_keys import CACHE_GENERATION_KEY
from workbench.store import generation

MATCH = '{"query":{"match":{"title":"%SearchText%"}}}'
BY_NUMBER = '{"query":{"match":{"title":"%SearchText%"}},"sort":[{"n":"desc"}]}'
LIMIT = 65_536  # WORKBENCH_MAX_REQUEST_BYTES of both servers


@pytest.fixture(scope="module")
def servers(env: dict[str, str], direct: OpenSearch) -> Iterator[tuple[Api, Api]]:
    """(gunicorn alone, the HAProxy front with the live search server), one UBI index each."""
    indices = [f"test-live-q-{uuid.uuid4().hex[:8]}" for _ in range(2)]
    started = [Server(dict(env, WORKBENCH_AB_QUERIES_INDEX=index,
                           WORKBENCH_MAX_REQUEST_BYTES=str(LIMIT)), workers=1, front=front)
               for index, front in zip(indices, ("none", "haproxy"), strict=True)]
    try:
        yield Api(started[0].url), Api(started[1].url)
    finally:
        for server in started:
            server.stop()
        direct.indices.delete(index=indices, ignore=[404])


@pytest.fixture(scope="module")
def test_id(servers: tuple[Api, Api], direct: OpenSearch) -> Iterator[str]:
    api = servers[0]
    index = f"test-live-products-{uuid.uuid4().hex[:8]}"
    for i in range(12):
        direct.index(index=index, id=f"d{i}", body={"title": f"red shoe {i}", "n": i})
    direct.indices.refresh(index=index)
    configs = [search_configuration(api, f"live-{side}-{uuid.uuid4().hex[:6]}", index, query)
               for side, query in (("a", MATCH), ("b", BY_NUMBER))]
    name = f"t-live-{uuid.uuid4().hex[:8]}"
    created = api.srw("PUT", f"/ab_tests/{name}", {"search_configuration_a": configs[0],
                                                    "search_configuration_b": configs[1]})
    assert created.status == 200
    yield name
    direct.indices.delete(index=index)


def _search(api: Api, test_id: str, body: object, **kwargs: object) -> Reply:
    return api.srw("POST", f"/ab_tests/{test_id}/_search", body, **kwargs)


def test_the_live_server_answers_the_search_as_the_route_does(
        servers: tuple[Api, Api], test_id: str) -> None:
    flask, live = servers
    for body in ({"query_params": {"SearchText": "red shoe"}, "client_id": "ann"},
                 {"query_params": {"SearchText": "red shoe"}, "client_id": "bob", "size": 3,
                  "from": 2},
                 {"query_params": {"SearchText": "nothing matches this"}, "client_id": "cy"}):
        by_flask, by_live = _search(flask, test_id, body), _search(live, test_id, body)
        assert by_flask.status == by_live.status == 200
        assert by_live.headers["Content-Type"] == "application/json; charset=UTF-8"
        # gunicorn names itself; the live server answered this one without it
        assert by_flask.headers.get("Server") == "gunicorn"
        assert "Server" not in by_live.headers
        # both carry the date of their answer, in HTTP's format
        sent = [parsedate_to_datetime(reply.headers["Date"]) for reply in (by_flask, by_live)]
        assert abs((sent[1] - sent[0]).total_seconds()) < 60
        expected, got = by_flask.json, by_live.json
        assert (expected["query_id"] is None) == (got["query_id"] is None)
        expected.pop("query_id"), got.pop("query_id")
        assert got == expected
    header = _search(live, test_id, {"query_params": {"SearchText": "red shoe"}},
                     headers={"X-Client-Id": "ann", "X-Opaque-Id": "trace-1"})
    assert header.headers["X-Opaque-Id"] == "trace-1"
    first = _search(live, test_id, {"query_params": {"SearchText": "red shoe"},
                                    "client_id": "ann"}).json
    assert [h["_id"] for h in header.json["hits"]] == [h["_id"] for h in first["hits"]]


@pytest.mark.parametrize("body, params, content_type", [
    ({"query_params": {}}, None, "application/json"),  # the plugin's plain-text 400
    ({"query_params": {"SearchText": "red"}, "size": 101}, None, "application/json"),
    ({"query_params": {"SearchText": "red"}, "client_id": ""}, None, "application/json"),
    ({"query_params": {"SearchText": "red"}, "client_id": "ann"}, {"pretty": "true"},
     "application/json"),
    ({"query_params": {"SearchText": "red"}, "client_id": "ann"}, {"filter_path": "hits._id"},
     "application/json"),
    ({"query_params": {"SearchText": "red"}}, {"pretty": "maybe"}, "application/json"),
    ({"query_params": {"SearchText": "red"}}, None, "text/plain"),
    ({"query_params": {"SearchText": "red"}}, None, "application/yaml"),
])
def test_what_the_live_server_does_not_answer_is_the_apis_answer(
        servers: tuple[Api, Api], test_id: str, body: object, params: dict[str, str] | None,
        content_type: str) -> None:
    flask, live = servers
    by_flask, by_live = (_search(api, test_id, body, params=params,
                                 headers={"Content-Type": content_type})
                         for api in (flask, live))
    assert by_live.status == by_flask.status
    assert by_live.headers["Content-Type"] == by_flask.headers["Content-Type"]
    if by_flask.status != 200:
        assert by_live.data == by_flask.data
        return
    expected, got = by_flask.json, by_live.json  # both gunicorn's, each with its own query_id
    expected.pop("query_id", None), got.pop("query_id", None)
    assert got == expected
    assert by_live.data.endswith(b"\n") == by_flask.data.endswith(b"\n")  # pretty's newline


def test_a_body_over_the_limit_is_the_apis_413(servers: tuple[Api, Api], test_id: str) -> None:
    body = {"query_params": {"SearchText": "red"}, "padding": "x" * LIMIT}
    by_flask, by_live = (_search(api, test_id, body) for api in servers)
    assert by_flask.status == by_live.status == 413
    assert by_live.json == by_flask.json
    assert by_live.reason == (f"Request body is larger than the limit of {LIMIT} bytes "
                              "(WORKBENCH_MAX_REQUEST_BYTES)")


def test_an_unknown_test_and_a_missing_body_are_the_apis_answers(
        servers: tuple[Api, Api]) -> None:
    flask, live = servers
    for api_body in ({"query_params": {"SearchText": "red"}}, None):
        replies = [_search(api, f"missing-{uuid.uuid4().hex[:6]}", api_body)
                   for api in (flask, live)]
        assert replies[1].status == replies[0].status
        assert replies[1].json["error"]["reason"] == replies[0].json["error"]["reason"]
    assert _search(live, "missing", {"query_params": {"SearchText": "red"}}).json["error"][
        "reason"] == "AB test not found"


def test_one_redis_read_serves_the_searches_that_arrived_before_it(redis_url: str) -> None:
    """``generation.Reader``: searches that arrive together share one read; a search that
    arrives after a change sees it."""
    config = Config.from_env({"REDIS_URL": redis_url})
    plain = redis.Redis.from_url(redis_url)
    sent: list[str] = []

    async def run() -> tuple[list[bytes | None], bytes | None]:
        reader = generation.Reader(redis_client.connect_async(config, socket_timeout=0.5))
        get = reader.client.get

        async def counted(key: str) -> object:
            sent.append(key)
            return await get(key)

        reader.client.get = counted  # type: ignore[method-assign]
        together = await asyncio.gather(*(reader.read() for _ in range(5)))
        plain.incr(CACHE_GENERATION_KEY)
        after = await reader.read()
        await reader.client.aclose()
        return together, after

    together, after = asyncio.run(run())
    assert sent == [CACHE_GENERATION_KEY, CACHE_GENERATION_KEY]  # one read for the five
    assert len(set(together)) == 1 and together[0] is not None
    assert after == plain.get(CACHE_GENERATION_KEY)
    assert int(after or 0) == int(together[0] or 0) + 1
