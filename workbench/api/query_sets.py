"""Query sets: ``PUT`` (manual), ``POST`` (sampled from UBI), list, get, ``_search``, delete."""

from __future__ import annotations

from typing import Any

from flask import Blueprint, Response

from workbench.api import json_body, services
from workbench.api.creates import QUERY_SET, Create
from workbench.api.entities import (
    delete_entity,
    get_entity,
    list_entities,
    plugin_settings,
    refuse_if_used,
    repository,
    search_entities,
    text_field,
)
from workbench.errors import BadRequest, Conflict
from workbench.querysets import sampling
from workbench.querysets.entries import QuerySetLimitExceeded, parse_manual
from workbench.schemas.text import DESCRIPTION_LIMIT, LEGACY_LIMIT, NAME_LIMIT, text_error
from workbench.store.indices import QUERY_SET_INDEX
from workbench.store.repository import now_iso

INDEX = QUERY_SET_INDEX

bp = Blueprint("query_sets", __name__, url_prefix="/query_sets")


def _name_and_description(body: dict[str, Any], name_limit: int,
                          description_limit: int) -> tuple[str, str]:
    name = text_field(body, "name")
    error = text_error(name, name_limit)
    if error:
        raise BadRequest(f"Invalid name: {error}")
    description = text_field(body, "description")
    if description is not None:
        error = text_error(description, description_limit)
        if error:
            raise BadRequest(f"Invalid description: {error}")
    return name.strip(), (description or "").strip()


def _store(create: Create, body: dict[str, Any], name: str, description: str,
           sampling_name: str, entries: list[dict[str, Any]]) -> Response:
    doc = {
        "id": create.id,
        "name": name,
        "description": description,
        "sampling": sampling_name,
        "timestamp": now_iso(),
        "querySetQueries": entries,
    }
    result = create.store(repository(INDEX), doc, body)
    return create.answer({"query_set_id": doc["id"],
                          "query_set_result": str(result["result"]).upper()})


@bp.put("")
def put_query_set() -> Response:
    body = json_body()
    assert body is not None
    create = Create(QUERY_SET)
    name, description = _name_and_description(body, NAME_LIMIT, DESCRIPTION_LIMIT)
    sampling_name = body.get("sampling", "manual")
    if sampling_name != "manual":
        raise BadRequest(f"Support sampling as manual only. sampling: {sampling_name}")
    maximum = plugin_settings().value("query_set.maximum")
    entries = parse_manual(body.get("querySetQueries"), maximum)
    return _store(create, body, name, description, "manual", entries)


@bp.post("")
def post_query_set() -> Response:
    body = json_body()
    assert body is not None
    create = Create(QUERY_SET)
    name, description = _name_and_description(body, LEGACY_LIMIT, LEGACY_LIMIT)
    sampler = body.get("sampling", "pptss")
    size = _query_set_size(body.get("querySetSize", 10))
    if size > plugin_settings().value("query_set.maximum"):
        raise QuerySetLimitExceeded()
    index = body.get("ubiQueriesIndex") or "ubi_queries"
    if not isinstance(index, str):
        raise BadRequest("Field 'ubiQueriesIndex' must be a string")
    if sampler not in sampling.SAMPLERS:
        raise BadRequest(f"Unknown sampler type: {sampler}")
    client = services().client
    if not sampling.index_is_usable(client, index):
        raise Conflict("UBI queries index does not exist")
    if sampler == "topn":
        queries = sampling.topn(client, index, size)
    elif sampler == "random":
        queries = sampling.random_sample(client, index, size)
    else:
        queries = sampling.pptss(client, index, size)
    entries = [{"queryText": q, "customFields": {}} for q in queries]
    return _store(create, body, name, description, sampler, entries)


def _query_set_size(raw: Any) -> int:
    """A JSON number, truncated to an integer as the plugin does; it must be positive."""
    if isinstance(raw, bool) or not isinstance(raw, (int, float)):
        raise BadRequest("querySetSize must be a number")
    size = int(raw)
    if size <= 0:
        raise BadRequest(f"querySetSize must be a positive integer, got: {raw}")
    return size


@bp.get("")
def list_query_sets() -> Response:
    return list_entities(repository(INDEX))


@bp.route("/_search", methods=["GET", "POST"])
def search_query_sets() -> Response:
    return search_entities(repository(INDEX))


@bp.get("/<entity_id>")
def get_query_set(entity_id: str) -> Response:
    return get_entity(repository(INDEX), entity_id)


@bp.delete("/<entity_id>")
def delete_query_set(entity_id: str) -> Response:
    refuse_if_used("querySetId", entity_id, "query set")
    return delete_entity(repository(INDEX), entity_id)
