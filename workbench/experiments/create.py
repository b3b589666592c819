"""A ``PUT /experiments`` body checked (schemas/experiments.py, with this module's reads of the
cluster) and the PROCESSING document built from it (docs/contract.md, "Creating experiments")."""

from __future__ import annotations

from typing import Any

from opensearchpy import OpenSearch

from workbench.querysets.entries import QueryEntry, read_entries
from workbench.schemas.body import load
from workbench.schemas.experiments import Lookups, experiment_schema
from workbench.store.indices import JUDGMENT_INDEX, QUERY_SET_INDEX, SEARCH_CONFIG_INDEX
from workbench.store.repository import Repository, new_id, now_iso


def lookups(client: OpenSearch) -> Lookups:
    """What the body's ids name: a query set's queries, a configuration, a judgment's status."""

    def query_set(query_set_id: str) -> list[QueryEntry] | None:
        source = Repository(client, QUERY_SET_INDEX).get_source(query_set_id)
        return None if source is None else read_entries(source)

    return Lookups(
        query_set=query_set,
        search_configuration=Repository(client, SEARCH_CONFIG_INDEX).get_source,
        judgment=lambda judgment_id: Repository(client, JUDGMENT_INDEX).get_source(
            judgment_id, ["status"]),
    )


def new_experiment(client: OpenSearch, body: dict[str, Any],
                   experiment_id: str | None = None) -> dict[str, Any]:
    """The PROCESSING document for a valid request; raises a 4xx for an invalid one.
    ``experiment_id`` is the id the create chose (api/creates.py), a new one when None."""
    fields = load(experiment_schema(body, lookups(client)), body)
    experiment_type = fields["type"]
    experiment_id = experiment_id or new_id()
    return {
        "id": experiment_id,
        "timestamp": now_iso(),
        "name": fields["name"] or f"{experiment_type}-{experiment_id[:8]}",
        "description": fields["description"] or "",
        "type": experiment_type,
        "status": "PROCESSING",
        "querySetId": fields["querySetId"],
        "searchConfigurationList": fields["searchConfigurationList"],
        "judgmentList": fields["judgmentList"],
        "size": fields["size"],
        "isScheduled": False,
        "scheduledExperimentJobId": None,
        "results": [],
    }
