"""A ``PUT /experiments`` body checked (schemas/experiments.py, with this module's reads of the
cluster) and the PROCESSING document built from it (docs/contract.md, "Creating experiments")."""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

from opensearchpy import OpenSearch

from workbench.schemas.body import load
from workbench.schemas.configuration_list import REMOTE, entry_id
from workbench.schemas.experiments import Lookups, experiment_schema
from workbench.store.identity import carry
from workbench.store.indices import (
    JUDGMENT_INDEX,
    QUERY_SET_INDEX,
    REMOTE_CONFIG_INDEX,
    SEARCH_CONFIG_INDEX,
)
from workbench.store.repository import Repository, new_id, now_iso

#: ids of one kind read ahead, at most (a body naming more is refused by the schema anyway)
PREFETCH_LIMIT = 16


def lookups(client: OpenSearch, body: dict[str, Any] | None = None) -> Lookups:
    """What the body's ids name: a query set's queries, a configuration (local or remote), a
    judgment's status.
    The ids ``body`` names are all read at once, in parallel (each read on its own is a round
    trip the create would otherwise wait for in turn); any other id is read when asked for."""

    def query_set(query_set_id: str) -> dict[str, Any] | None:
        return Repository(client, QUERY_SET_INDEX).get_source(query_set_id, ["status"])

    def judgment(judgment_id: str) -> dict[str, Any] | None:
        return Repository(client, JUDGMENT_INDEX).get_source(judgment_id, ["status"])

    readers: dict[str, Callable[[str], Any]] = {
        "query_set": query_set,
        "search_configuration": Repository(client, SEARCH_CONFIG_INDEX).get_source,
        "remote_configuration": lambda c: Repository(client, REMOTE_CONFIG_INDEX).get_source(
            c, ["name"]),
        "judgment": judgment,
    }
    named = _named_ids(body or {})
    ahead: dict[tuple[str, str], Future[Any]] = {}
    if sum(len(ids) for ids in named.values()) > 1:
        with ThreadPoolExecutor(4, thread_name_prefix="lookup") as pool:
            ahead = {(kind, entity_id): pool.submit(carry(readers[kind]), entity_id)
                     for kind, ids in named.items() for entity_id in ids}

    def reader(kind: str) -> Callable[[str], Any]:
        def read(entity_id: str) -> Any:
            found = ahead.get((kind, entity_id))
            return found.result() if found is not None else readers[kind](entity_id)
        return read

    return Lookups(query_set=reader("query_set"),
                   search_configuration=reader("search_configuration"),
                   judgment=reader("judgment"),
                   remote_configuration=reader("remote_configuration"))


def _named_ids(body: dict[str, Any]) -> dict[str, list[str]]:
    """The string ids of each kind the body names (what is not a string the schema refuses);
    a configuration named by an id is read locally first, one typed ``remote`` only remotely."""
    def strings(value: Any) -> list[str]:
        values = value if isinstance(value, list) else [value]
        return list(dict.fromkeys(v for v in values if isinstance(v, str)))[:PREFETCH_LIMIT]

    configs = body.get("searchConfigurationList")
    entries = configs if isinstance(configs, list) else [configs]
    remote = [entry_id(e) for e in entries if isinstance(e, dict) and e.get("type") == REMOTE]
    return {"query_set": strings(body.get("querySetId")),
            "search_configuration": strings([entry_id(e) for e in entries
                                             if not (isinstance(e, dict)
                                                     and e.get("type") == REMOTE)]),
            "remote_configuration": strings(remote),
            "judgment": strings(body.get("judgmentList"))}


def new_experiment(client: OpenSearch, body: dict[str, Any],
                   experiment_id: str | None = None) -> dict[str, Any]:
    """The PROCESSING document for a valid request; raises a 4xx for an invalid one.
    ``experiment_id`` is the id the create chose (api/creates.py), a new one when None."""
    fields = load(experiment_schema(body, lookups(client, body)), body)
    experiment_type = fields["type"]
    experiment_id = experiment_id or new_id()
    configs = fields["searchConfigurationList"]
    doc: dict[str, Any] = {
        "id": experiment_id,
        "timestamp": now_iso(),
        "name": fields["name"] or f"{experiment_type}-{experiment_id[:8]}",
        "description": fields["description"] or "",
        "type": experiment_type,
        "status": "PROCESSING",
        "querySetId": fields["querySetId"],
        "searchConfigurationList": list(configs),
        "judgmentList": fields["judgmentList"],
        "size": fields["size"],
        "isScheduled": False,
        "scheduledExperimentJobId": None,
        "results": [],
    }
    if configs.remote:  # issue 47: which ids are remote search configurations
        doc["remoteSearchConfigurationIds"] = configs.remote
    return doc
