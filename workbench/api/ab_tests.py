"""A/B tests by team-draft interleaving (docs/ab-tests.md).

The plugin's four routes, with its bodies, checks, messages and status codes: ``PUT
/ab_tests/{id}``, ``PUT /ab_tests/{id}/_update``, ``DELETE /ab_tests/{id}``, ``POST
/ab_tests/{id}/_search``. Then what the plugin lacks: ``GET /ab_tests`` (the tests, paged),
``GET|POST /ab_tests/_search`` (any DSL on the tests' index), ``GET /ab_tests/{id}`` (with its
versions), ``GET /ab_tests/{id}/_results`` (the verdict) and ``GET /ab_tests/{id}/_report``
(the same as an HTML page).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from flask import Blueprint, Response, current_app, g, request

from workbench.abtests import definitions, report, results, serving
from workbench.abtests.impressions import ImpressionWriter, impression
from workbench.api import json_body, json_response, services
from workbench.api.entities import client_dsl, repository
from workbench.errors import NotFound, TextError
from workbench.schemas.ab_tests import (
    ABTestSearchSchema,
    CreateABTestSchema,
    UpdateABTestSchema,
)
from workbench.schemas.body import load
from workbench.schemas.lists import ListBodySchema
from workbench.services import Services
from workbench.store.indices import AB_TEST_INDEX

bp = Blueprint("ab_tests", __name__, url_prefix="/ab_tests")

#: the request header an application may name its user or session by, instead of ``client_id``
CLIENT_ID_HEADER = "X-Client-Id"
TESTS_ONLY = {"term": {"doc_type": definitions.TEST}}


_Kept = TypeVar("_Kept")


def _kept(key: str, kind: type[_Kept], build: Callable[[Services], _Kept]) -> _Kept:
    """The app's one ``kind`` (built from its services at its first use): kept in
    ``app.extensions`` under ``key``, so every request of the process shares it."""
    found = current_app.extensions.get(key)
    if found is None:
        found = current_app.extensions[key] = build(services())
    assert isinstance(found, kind)
    return found


def _cache() -> definitions.DefinitionCache:
    """The tests and configurations this process keeps (``abtests.definitions``)."""
    return _kept("workbench.ab_definitions", definitions.DefinitionCache,
                 lambda svc: definitions.DefinitionCache(svc.client))


def _writer() -> ImpressionWriter:
    """The thread that writes this process's impressions in batches."""
    return _kept("workbench.ab_impressions", ImpressionWriter,
                 lambda svc: ImpressionWriter(svc.client, svc.config.index_mappings_dir,
                                              svc.config.ab_flush_seconds,
                                              svc.config.ab_queries_index))


def _require_id(test_id: str) -> None:
    if not test_id.strip():
        raise TextError(400, "test id is required in URL path")


@bp.put("/<test_id>")
def put_ab_test(test_id: str) -> Response:
    _require_id(test_id)
    fields = load(CreateABTestSchema(), json_body() or {})
    enabled = True if fields.get("enabled") is None else fields["enabled"]
    definitions.create(services().client, test_id, fields["a"], fields["b"], enabled)
    definitions.changed(services().cache_redis)
    return json_response({})


@bp.put("/<test_id>/_update")
def update_ab_test(test_id: str) -> Response:
    _require_id(test_id)
    fields = load(UpdateABTestSchema(), json_body() or {})
    if definitions.update(services().client, test_id, fields.get("a"), fields.get("b"),
                          fields.get("enabled")):
        definitions.changed(services().cache_redis)
    return json_response({})


@bp.delete("/<test_id>")
def delete_ab_test(test_id: str) -> Response:
    definitions.delete(services().client, test_id)
    definitions.changed(services().cache_redis)
    return json_response({})


@bp.post("/<test_id>/_search")
def interleaved_search(test_id: str) -> Response:
    body = json_body() or {}
    header = request.headers.get(CLIENT_ID_HEADER)
    fields = load(ABTestSearchSchema(), body)
    client_id = fields.get("client_id")
    if client_id is None and header is not None:  # the header is checked as the field is
        client_id = load(ABTestSearchSchema(), {**body, "client_id": header})["client_id"]
    definition = _cache().get(test_id, g.cache_generation)
    served = serving.search(services().client, definition, fields["query_params"],
                            client_id, fields["from_"], fields.get("size"))
    query_id = served.response["query_id"]
    if query_id is not None:
        assert definition is not None
        _writer().add(impression(definition.test, query_id, served.query_text,
                                 served.client_id, served.index, fields["from_"], served.shown))
    return json_response(served.response)


@bp.get("")
def list_ab_tests() -> Response:
    fields = load(ListBodySchema(), json_body(required=False) or {})
    field, order = fields["sort"]
    field = "created_at" if field == "timestamp" else field
    return json_response(repository(AB_TEST_INDEX).list_response(
        fields["size"], field, order, TESTS_ONLY))


@bp.route("/_search", methods=["GET", "POST"])
def search_ab_tests() -> Response:
    body = json_body(required=False) or {"query": {"match_all": {}}, "size": 10}
    with client_dsl():
        return json_response(repository(AB_TEST_INDEX).search(body))


def _test(test_id: str) -> definitions.ABTest:
    found = definitions.read(services().client, test_id)
    if found is None:
        raise NotFound(f"AB test '{test_id}' not found", error_type="search_relevance_exception")
    return found[0]


@bp.get("/<test_id>")
def get_ab_test(test_id: str) -> Response:
    test = _test(test_id)
    answer: dict[str, Any] = repository(AB_TEST_INDEX).get_response(test_id)
    answer["versions"] = [v.as_json() for v in definitions.versions(services().client, test)]
    return json_response(answer)


def _results(test_id: str) -> dict[str, Any]:
    args, config = request.args, services().config
    indices = results.Indices(config.ab_queries_index, config.ab_events_index)
    return results.results(services().client, indices, _test(test_id), args.get("version"),
                           args.get("from"), args.get("to"), args.get("interval"))


@bp.get("/<test_id>/_results")
def get_results(test_id: str) -> Response:
    return json_response(_results(test_id))


@bp.get("/<test_id>/_report")
def get_report(test_id: str) -> Response:
    return Response(report.page(_results(test_id)), content_type="text/html; charset=UTF-8")
