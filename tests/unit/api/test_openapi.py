"""The OpenAPI document (workbench/api/openapi.yaml): valid, equal to the app's routes, served."""

from __future__ import annotations

import re
from typing import Any

import pytest
import yaml
from flask import Flask
from openapi_spec_validator import validate

from workbench.api import openapi
from workbench.app import create_app
from workbench.config import Config

AUTOMATIC = {"HEAD", "OPTIONS"}  # added by Flask to every GET route / every route
HTTP_METHODS = {"get", "put", "post", "delete", "patch", "head", "options", "trace"}


@pytest.fixture(scope="module")
def app() -> Flask:
    # Nothing connects at creation; the cluster and Redis are never reached by these tests.
    return create_app(Config.from_env({"OPENSEARCH_URL": "http://127.0.0.1:9",
                                       "REDIS_URL": "redis://127.0.0.1:9/0"}))


def app_routes(app: Flask) -> set[tuple[str, str]]:
    """(METHOD, /path/{param}) of every route the workbench answers itself."""
    routes = set()
    for rule in app.url_map.iter_rules():
        if rule.endpoint == "proxy.pass_through":
            continue
        path = re.sub(r"<(?:[a-z_]+:)?([a-z_]+)>", r"{\1}", rule.rule)
        for method in (rule.methods or set()) - AUTOMATIC:
            routes.add((method, path))
    return routes


def document_routes(doc: dict[str, Any]) -> set[tuple[str, str]]:
    return {(method.upper(), path) for path, item in doc["paths"].items()
            for method in item if method in HTTP_METHODS}


def test_the_document_is_valid_openapi() -> None:
    doc = openapi.document()
    assert doc["openapi"].startswith("3.1")
    validate(doc)
    raw = yaml.safe_load(openapi.document_text())
    validate(raw)  # the file as kept, with its x-shared anchors, is valid too


def test_schemathesis_loads_every_operation() -> None:
    import schemathesis

    schema = schemathesis.openapi.from_dict(openapi.document())
    operations = [result.ok() for result in schema.get_all_operations()]
    assert len(operations) == len(document_routes(openapi.document()))


def test_the_document_describes_exactly_the_apps_routes(app: Flask) -> None:
    ours, documented = app_routes(app), document_routes(openapi.document())
    assert ours - documented == set(), "routes missing from workbench/api/openapi.yaml"
    assert documented - ours == set(), "documented routes the app does not serve"


def test_path_parameters_are_named_as_in_the_routes(app: Flask) -> None:
    """A documented path parameter is declared (path level or operation level) once."""
    for path, item in openapi.document()["paths"].items():
        names = set(re.findall(r"{([a-z_]+)}", path))
        for method, operation in item.items():
            if method not in HTTP_METHODS:
                continue
            params = (item.get("parameters") or []) + (operation.get("parameters") or [])
            declared = {p["name"] for p in _resolved(params) if p["in"] == "path"}
            assert declared == names, f"{method.upper()} {path}"


def _resolved(params: list[dict[str, Any]]) -> list[dict[str, Any]]:
    components = openapi.document()["components"]["parameters"]
    return [components[p["$ref"].rsplit("/", 1)[1]] if "$ref" in p else p for p in params]


def test_every_error_response_is_the_error_envelope() -> None:
    """Every 4xx/5xx answer documented as JSON uses the OpenSearch error envelope."""
    doc = openapi.document()
    responses = doc["components"]["responses"]
    envelope = "#/components/schemas/Error"
    for path, item in doc["paths"].items():
        for method, operation in item.items():
            if method not in HTTP_METHODS:
                continue
            for status, response in operation["responses"].items():
                if status[0] not in "45":
                    continue
                if "$ref" in response:
                    response = responses[response["$ref"].rsplit("/", 1)[1]]
                schema = response["content"]["application/json"]["schema"]
                refs = [schema.get("$ref")] + [s.get("$ref") for s in schema.get("oneOf", [])]
                assert envelope in refs, f"{method.upper()} {path} {status}"


def test_served_as_json_without_the_gate_or_the_cluster(app: Flask) -> None:
    client = app.test_client()
    reply = client.get("/_plugins/_search_relevance/_openapi")
    assert reply.status_code == 200
    assert reply.headers["Content-Type"] == "application/json; charset=UTF-8"
    assert reply.get_json() == openapi.document()
    assert "x-shared" not in reply.get_json()


def test_served_as_yaml_on_request(app: Flask) -> None:
    reply = app.test_client().get("/_plugins/_search_relevance/_openapi?format=yaml")
    assert reply.status_code == 200
    assert reply.headers["Content-Type"] == "application/yaml; charset=UTF-8"
    assert reply.get_data(as_text=True) == openapi.document_text()


def test_an_unknown_format_is_a_400(app: Flask) -> None:
    reply = app.test_client().get("/_plugins/_search_relevance/_openapi?format=xml")
    assert reply.status_code == 400
    assert reply.get_json()["error"]["reason"] == "format must be json or yaml, got: xml"


def test_other_methods_are_405(app: Flask) -> None:
    reply = app.test_client().post("/_plugins/_search_relevance/_openapi")
    assert reply.status_code == 405
    assert reply.headers["Allow"] == "GET, HEAD, OPTIONS"
