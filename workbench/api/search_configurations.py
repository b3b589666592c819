"""Search configurations: ``PUT``, list, get, ``_search``, delete.

A new configuration's index must exist and, beyond the plugin, the cluster must
parse its query as a search on it (``store/search_render.cluster_parse_error``); the plugin
stores any JSON object and lets the first experiment fail (docs/differences.md).
"""

from __future__ import annotations

from flask import Blueprint, Response

from workbench.abtests.definitions import changed as ab_definitions_changed
from workbench.api import json_body, services
from workbench.api.creates import SEARCH_CONFIGURATION, Create
from workbench.api.entities import (
    delete_entity,
    get_entity,
    list_entities,
    refuse_if_used,
    repository,
    search_entities,
)
from workbench.errors import BadRequest
from workbench.schemas.body import load
from workbench.schemas.search_configurations import SearchConfigurationSchema
from workbench.store.indices import SEARCH_CONFIG_INDEX, index_exists
from workbench.store.repository import now_iso
from workbench.store.search_render import cluster_parse_error, query_error

INDEX = SEARCH_CONFIG_INDEX

bp = Blueprint("search_configurations", __name__, url_prefix="/search_configurations")


@bp.put("")
def put_search_configuration() -> Response:
    body = json_body()
    assert body is not None
    create = Create(SEARCH_CONFIGURATION)
    fields = load(SearchConfigurationSchema(query_check=query_error), body)
    if not index_exists(services().client, fields["index"]):
        raise BadRequest(f"Index [{body['index']}] does not exist in the cluster")
    unparsable = cluster_parse_error(services().client, fields["index"], fields["query"])
    if unparsable:
        raise BadRequest(unparsable)
    doc = {
        "id": create.id,
        "name": fields["name"],
        "timestamp": now_iso(),
        "index": fields["index"],
        "query": fields["query"],
        "searchPipeline": fields["searchPipeline"],
        "description": fields["description"],
    }
    result = create.store(repository(INDEX), doc, body)
    return create.answer({"search_configuration_id": doc["id"],
                          "search_configuration_result": str(result["result"]).upper()})


@bp.get("")
def list_search_configurations() -> Response:
    return list_entities(repository(INDEX))


@bp.route("/_search", methods=["GET", "POST"])
def search_search_configurations() -> Response:
    return search_entities(repository(INDEX))


@bp.get("/<entity_id>")
def get_search_configuration(entity_id: str) -> Response:
    return get_entity(repository(INDEX), entity_id)


@bp.delete("/<entity_id>")
def delete_search_configuration(entity_id: str) -> Response:
    refuse_if_used("searchConfigurationList", entity_id, "search configuration")
    answer = delete_entity(repository(INDEX), entity_id)
    ab_definitions_changed(services().cache_redis)  # A/B tests keep their configurations cached
    return answer
