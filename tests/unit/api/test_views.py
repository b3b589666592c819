"""The SRW views through Flask's test client, with no OpenSearch and no Redis (issue 21).

The app is the real one (``create_app``), pointed at addresses where nothing listens. Only the
SRW gate is replaced, because it is the one step that must ask the cluster (who is calling, the
plugin's settings): here it binds the plugin settings the test chooses. Everything the views do
before they need a service — parse, validate, refuse, answer in OpenSearch's envelope — is the
product's own code; a view that reaches for the cluster answers the unreachable-cluster 503.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from flask import Flask, g
from flask.testing import FlaskClient

from workbench.api import srw
from workbench.app import create_app
from workbench.config import Config
from workbench.store.plugin_settings import PREFIX, Stored

SRW = "/_plugins/_search_relevance"
DOWN = "http://127.0.0.1:1"
QUERY = '{"query": {"match": {"title": "%SearchText%"}}}'


@pytest.fixture
def settings() -> dict[str, str]:
    """Plugin settings the gate binds, as the settings document stores them (``short: value``)."""
    return {}


@pytest.fixture
def app(settings: dict[str, str]) -> Iterator[Flask]:
    app = create_app(Config(opensearch_url=DOWN, redis_url="redis://127.0.0.1:1/0",
                            opensearch_timeout=2.0))
    funcs = app.before_request_funcs["srw"]
    assert srw.workbench_gate in funcs, "the SRW gate moved: this fixture must follow it"

    def gate() -> None:
        g.plugin_settings = Stored(persistent={PREFIX + k: v for k, v in settings.items()})
        srw.refuse_if_disabled(g.plugin_settings)

    funcs[funcs.index(srw.workbench_gate)] = gate
    yield app


@pytest.fixture
def client(app: Flask) -> FlaskClient:
    return app.test_client()


def call(client: FlaskClient, method: str, path: str, body: Any = None,
         raw: str | None = None) -> tuple[int, Any]:
    data = raw if raw is not None else (None if body is None else json.dumps(body))
    reply = client.open(SRW + path, method=method, data=data,
                        content_type="application/json")
    text = reply.get_data(as_text=True)
    if reply.content_type.startswith("application/json"):
        return reply.status_code, json.loads(text)
    return reply.status_code, text


def bad_request(reason: str) -> dict[str, Any]:
    """OpenSearch's envelope for an ``illegal_argument_exception``."""
    cause = {"type": "illegal_argument_exception", "reason": reason}
    return {"error": {"root_cause": [cause], **cause}, "status": 400}


# -- query sets ---------------------------------------------------------------------------------

def test_a_query_set_without_a_name_is_refused_naming_the_field(client: FlaskClient) -> None:
    status, body = call(client, "PUT", "/query_sets",
                        {"description": "d", "querySetQueries": [{"queryText": "tv"}]})
    assert (status, body) == (400, bad_request("Invalid name: Text cannot be null"))


def test_a_manual_query_set_may_only_be_sampled_manually(client: FlaskClient) -> None:
    status, body = call(client, "PUT", "/query_sets",
                        {"name": "n", "sampling": "random",
                         "querySetQueries": [{"queryText": "tv"}]})
    assert (status, body) == (
        400, bad_request("Support sampling as manual only. sampling: random"))


def test_an_unknown_sampler_is_refused(client: FlaskClient) -> None:
    status, body = call(client, "POST", "/query_sets",
                        {"name": "n", "querySetSize": 5, "sampling": "best"})
    assert (status, body) == (400, bad_request("Unknown sampler type: best"))


@pytest.mark.parametrize("settings", [{"query_set.maximum": "2"}])
def test_more_queries_than_the_setting_allows_is_a_403(client: FlaskClient) -> None:
    status, body = call(client, "PUT", "/query_sets",
                        {"name": "n", "querySetQueries": [{"queryText": q}
                                                          for q in ("a", "b", "c")]})
    assert status == 403
    assert body["error"]["type"] == "search_relevance_exception"
    assert body["error"]["reason"] == "Query Set Limit Exceeded."


@pytest.mark.parametrize("settings", [{"workbench_enabled": "false"}])
def test_a_disabled_workbench_answers_403_in_plain_text(client: FlaskClient) -> None:
    assert call(client, "GET", "/query_sets") == (403, "Search Relevance Workbench is disabled")


def test_a_body_that_is_not_json_is_a_parse_error(client: FlaskClient) -> None:
    status, body = call(client, "PUT", "/query_sets", raw="{not json")
    reason = ("Failed to parse request body: Expecting property name enclosed in double quotes: "
              "line 1 column 2 (char 1)")
    cause = {"type": "parse_exception", "reason": reason}
    assert (status, body) == (400, {"error": {"root_cause": [cause], **cause}, "status": 400})


# -- search configurations ------------------------------------------------------------------------

def test_a_search_configuration_needs_an_index(client: FlaskClient) -> None:
    status, body = call(client, "PUT", "/search_configurations",
                        {"name": "n", "query": QUERY})
    assert (status, body) == (400, bad_request("index is required"))


def test_a_valid_search_configuration_then_needs_the_cluster(client: FlaskClient) -> None:
    """Validation passes without any service; asking whether the index exists is the first
    call to the cluster, and an unreachable cluster is a 503 naming it."""
    status, body = call(client, "PUT", "/search_configurations",
                        {"name": "n", "index": "products", "query": QUERY})
    assert status == 503
    assert body["status"] == 503
    assert DOWN.removeprefix("http://") in body["error"]["reason"]
