"""Checking a ``PUT /experiments`` body and building the PROCESSING document (docs/contract.md,
"Creating experiments")."""

from __future__ import annotations

from typing import Any

from opensearchpy import OpenSearch

from workbench.errors import BadRequest
from workbench.querysets.entries import read_entries
from workbench.schemas.numbers import MAX_RESULT_WINDOW, bounded_int
from workbench.schemas.text import DESCRIPTION_LIMIT, NAME_LIMIT, text_error
from workbench.store.indices import JUDGMENT_INDEX, QUERY_SET_INDEX, SEARCH_CONFIG_INDEX
from workbench.store.repository import Repository, new_id, now_iso

TYPES = ("PAIRWISE_COMPARISON", "POINTWISE_EVALUATION", "HYBRID_OPTIMIZER")
NEEDS_JUDGMENTS = ("POINTWISE_EVALUATION", "HYBRID_OPTIMIZER")


def optional_text(body: dict[str, Any], field: str, limit: int) -> str | None:
    """Latest rules for optional names/descriptions: a string, trimmed, blank = absent."""
    value = body.get(field)
    if value is None:
        return None
    if not isinstance(value, str):
        raise BadRequest(f"Field '{field}' must be a string")
    value = value.strip()
    if not value:
        return None
    error = text_error(value, limit)
    if error:
        raise BadRequest(f"Invalid {field}: {error}")
    return value


def _source(client: OpenSearch, index: str, entity_id: Any, label: str,
            fields: list[str] | None = None) -> dict[str, Any]:
    if not isinstance(entity_id, str) or not entity_id.strip():
        raise BadRequest(f"{label} ID cannot be null or empty")
    source = Repository(client, index).get_source(entity_id, fields)
    if source is None:
        raise BadRequest(f"{label} [{entity_id}] does not exist")
    return source


def _id_list(body: dict[str, Any], field: str) -> list[Any]:
    value = body.get(field)
    if value is None:
        return []
    if not isinstance(value, list):
        raise BadRequest(f"{field} must be a list of ids")
    return value


def new_experiment(client: OpenSearch, body: dict[str, Any],
                   experiment_id: str | None = None) -> dict[str, Any]:
    """The PROCESSING document for a valid request; raises a 4xx for an invalid one.
    ``experiment_id`` is the id the create chose (api/creates.py), a new one when None."""
    experiment_type = body.get("type")
    if experiment_type not in TYPES:
        raise BadRequest("Invalid or missing experiment type")
    name = optional_text(body, "name", NAME_LIMIT)
    description = optional_text(body, "description", DESCRIPTION_LIMIT)
    size = body.get("size")
    if size is None:
        raise BadRequest("size is required")
    size = bounded_int(size, "size", 1, MAX_RESULT_WINDOW)

    query_set = _source(client, QUERY_SET_INDEX, body.get("querySetId"), "QuerySet")
    if not read_entries(query_set):
        raise BadRequest(f"QuerySet [{body['querySetId']}] has no queries")
    config_ids = _id_list(body, "searchConfigurationList")
    configs = [_source(client, SEARCH_CONFIG_INDEX, c, "SearchConfiguration")
               for c in config_ids]
    if experiment_type == "PAIRWISE_COMPARISON" and len(configs) != 2:
        raise BadRequest("PAIRWISE_COMPARISON requires exactly 2 search configurations, got: "
                         f"{len(configs)}")
    if not configs:
        raise BadRequest("searchConfigurationList must name at least one search configuration")
    judgment_ids = _id_list(body, "judgmentList")
    if experiment_type in NEEDS_JUDGMENTS and not judgment_ids:
        raise BadRequest(f"judgmentList is required for {experiment_type}")
    # A judgment still being generated is accepted: the job waits for it (experiments.waiting).
    # Whether a HYBRID_OPTIMIZER configuration is a two-clause hybrid query is checked by the
    # job too, which ends ERROR with the reason, as the plugin's does.
    for judgment_id in judgment_ids:
        judgment = _source(client, JUDGMENT_INDEX, judgment_id, "Judgment", ["status"])
        if judgment.get("status") == "ERROR":
            raise BadRequest(f"Judgment [{judgment_id}] is not COMPLETED "
                             f"(status: {judgment.get('status')})")

    experiment_id = experiment_id or new_id()
    return {
        "id": experiment_id,
        "timestamp": now_iso(),
        "name": name or f"{experiment_type}-{experiment_id[:8]}",
        "description": description or "",
        "type": experiment_type,
        "status": "PROCESSING",
        "querySetId": body["querySetId"],
        "searchConfigurationList": config_ids,
        "judgmentList": judgment_ids,
        "size": size,
        "isScheduled": False,
        "scheduledExperimentJobId": None,
        "results": [],
    }
