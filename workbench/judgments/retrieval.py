"""Retrieving the documents a judgment job rates: the top hits of each query with each search
configuration, in ``_msearch`` batches, de-duplicated (configuration order, then rank). With
``expand`` (``expandCoverage``) each configuration's hybrid sub-queries are searched instead, and
the hits follow configuration order, then clause order, then rank (judgments/pooling.py).

A remote search configuration (issue 47) is searched through ``workbench.remote.search``; its
hits are described from their mapped ``_source`` as local hits are, and a query's remote
failure counts as a failed search of that query."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from workbench.jobs.base import JobFailed
from workbench.judgments import pooling
from workbench.querysets.entries import QueryEntry
from workbench.remote.configs import RemoteConfig
from workbench.remote.search import RemoteFailure, load_config, search_remote
from workbench.schemas.configuration_list import REMOTE_LABEL
from workbench.services import Services
from workbench.store.indices import REMOTE_CONFIG_INDEX, SEARCH_CONFIG_INDEX
from workbench.store.repository import Repository
from workbench.store.search import SearchFailure, missing_pipeline, msearch
from workbench.store.search_render import render

Hit = tuple[str, str]  # (docId, the text shown to the judge)
Remote = dict[str, RemoteConfig]  # the remote search configurations among a job's, by id
#: a ``_retry`` reads the failed documents again by id from the configuration's index, which a
#: remote search configuration does not offer
REMOTE_RETRY = ("Cannot retry a judgment of remote search configurations: their documents "
                "cannot be read again by id; create the judgment again")


@dataclass
class Target:
    """One query to judge: the documents to rate and what is already known about them."""

    entry: QueryEntry
    hits: list[Hit] = field(default_factory=list)
    known: dict[str, str] = field(default_factory=dict)  # reused or cached ratings
    rationales: dict[str, str] = field(default_factory=dict)  # of the known ratings
    search_error: str | None = None


def load(svc: Services, index: str, entity_id: str, label: str) -> dict[str, Any]:
    """An entity the job needs, or the job fails with ``<label> [<id>] does not exist``."""
    source = Repository(svc.client, index).get_source(entity_id)
    if source is None:
        raise JobFailed(f"{label} [{entity_id}] does not exist")
    return source


def load_configurations(svc: Services, metadata: dict[str, Any]
                        ) -> tuple[list[dict[str, Any]], Remote]:
    """The stored search configurations a judgment's metadata names, in order (a remote one's
    document without its password), and the remote ones' definitions by id (those listed in
    ``remoteSearchConfigurationIds``)."""
    remote_ids = set(metadata.get("remoteSearchConfigurationIds") or [])
    configs, remote = [], {}
    for config_id in metadata["searchConfigurationList"]:
        if config_id not in remote_ids:
            configs.append(load(svc, SEARCH_CONFIG_INDEX, config_id, "SearchConfiguration"))
            continue
        doc = load(svc, REMOTE_CONFIG_INDEX, config_id, REMOTE_LABEL)
        definition = load_config(svc, config_id)
        if definition is None:
            raise JobFailed(f"{REMOTE_LABEL} [{config_id}] does not exist")
        configs.append({**{k: v for k, v in doc.items() if k != "passwordEncrypted"},
                        "id": config_id})
        remote[config_id] = definition
    return configs, remote


def local_indices(configs: list[dict[str, Any]]) -> list[str]:
    """The indices the local configurations search (a remote one has none)."""
    return [str(c["index"]) for c in configs if c.get("index")]


def target_of(config: dict[str, Any]) -> str:
    """What a configuration's hits are documents of: its index, or a remote configuration's
    ``connectionUrl`` (so that a judgment cache entry of a remote id is never one of a local
    document, and the other way round)."""
    return str(config.get("index") or config.get("connectionUrl") or "")


def retrieve(svc: Services, entries: list[QueryEntry], configs: list[dict[str, Any]],
             size: int, describe: Callable[[dict[str, Any]], str],
             expand: bool = False, remote: Remote | None = None) -> list[Target]:
    """Top ``size`` hits per query per configuration, each described by ``describe(_source)``;
    with ``expand``, the top ``size`` of each of the configuration's hybrid sub-queries.
    ``remote``: the remote search configurations among ``configs``, by their ``id``.
    A query all of whose searches fail keeps the reason in ``search_error``; a named search
    pipeline that does not exist fails the job."""
    remote = remote or {}
    local = [c for c in configs if str(c.get("id")) not in remote]
    missing = missing_pipeline(svc.client, local)
    if missing:
        raise JobFailed(missing)
    targets = [Target(entry) for entry in entries]
    # the answers of each (query, configuration), in clause order
    answers: list[list[list[Any]]] = [[[] for _ in configs] for _ in entries]
    searches, owners = [], []
    for number, entry in enumerate(entries):
        for slot, config in enumerate(configs):
            if str(config.get("id")) in remote:
                continue
            try:
                rendered = render(config, entry.query_text, size, entry.custom_fields)
                found = pooling.clause_searches(rendered, size) if expand else [rendered]
                searches.extend(found)
                owners.extend([(number, slot)] * len(found))
            except Exception as exc:  # noqa: BLE001 - a query that cannot be rendered fails alone
                targets[number].search_error = str(exc)
    for (number, slot), answer in zip(owners, msearch(svc.client, searches) if searches else [],
                                      strict=True):
        answers[number][slot].append(
            answer.reason if isinstance(answer, SearchFailure) else answer["hits"]["hits"])
    for slot, config in enumerate(configs):
        definition = remote.get(str(config.get("id")))
        if definition is None:
            continue
        found_remote = search_remote(svc, definition, [
            (entry.query_text, entry.custom_fields or None) for entry in entries], size)
        for number, outcome in enumerate(found_remote):
            answers[number][slot].append(outcome.reason if isinstance(outcome, RemoteFailure)
                                         else outcome)
    for target, per_config in zip(targets, answers, strict=True):
        seen: set[str] = set()
        reasons = []
        for hits in (hits for config_answers in per_config for hits in config_answers):
            if isinstance(hits, str):
                reasons.append(hits)
                continue
            for hit in hits:
                doc_id = str(hit["_id"])
                if doc_id not in seen:
                    seen.add(doc_id)
                    target.hits.append((doc_id, describe(hit.get("_source") or {})))
        tried = sum(len(config_answers) for config_answers in per_config)
        if reasons and len(reasons) == tried:
            target.search_error = "; ".join(reasons)
    return targets
