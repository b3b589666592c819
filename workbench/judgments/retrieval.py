"""Retrieving the documents a judgment job rates: the top hits of each query with each search
configuration, in ``_msearch`` batches, de-duplicated (configuration order, then rank). With
``expand`` (``expandCoverage``) each configuration's hybrid sub-queries are searched instead, and
the hits follow configuration order, then clause order, then rank (judgments/pooling.py)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from workbench.jobs.base import JobFailed
from workbench.judgments import pooling
from workbench.querysets.entries import QueryEntry
from workbench.services import Services
from workbench.store.repository import Repository
from workbench.store.search import SearchFailure, missing_pipeline, msearch
from workbench.store.search_render import render

Hit = tuple[str, str]  # (docId, the text shown to the judge)


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


def retrieve(svc: Services, entries: list[QueryEntry], configs: list[dict[str, Any]],
             size: int, describe: Callable[[dict[str, Any]], str],
             expand: bool = False) -> list[Target]:
    """Top ``size`` hits per query per configuration, each described by ``describe(_source)``;
    with ``expand``, the top ``size`` of each of the configuration's hybrid sub-queries.
    A query all of whose searches fail keeps the reason in ``search_error``; a named search
    pipeline that does not exist fails the job."""
    missing = missing_pipeline(svc.client, configs)
    if missing:
        raise JobFailed(missing)
    targets = [Target(entry) for entry in entries]
    searches, owners = [], []
    for number, entry in enumerate(entries):
        for config in configs:
            try:
                rendered = render(config, entry.query_text, size, entry.custom_fields)
                found = pooling.clause_searches(rendered, size) if expand else [rendered]
                searches.extend(found)
                owners.extend([number] * len(found))
            except Exception as exc:  # noqa: BLE001 - a query that cannot be rendered fails alone
                targets[number].search_error = str(exc)
    answers = msearch(svc.client, searches) if searches else []
    failed: dict[int, list[str]] = {}
    tried: dict[int, int] = {}
    for number, answer in zip(owners, answers, strict=True):
        tried[number] = tried.get(number, 0) + 1
        if isinstance(answer, SearchFailure):
            failed.setdefault(number, []).append(answer.reason)
            continue
        seen = {d for d, _ in targets[number].hits}
        for hit in answer["hits"]["hits"]:
            if hit["_id"] not in seen:
                seen.add(hit["_id"])
                targets[number].hits.append((hit["_id"], describe(hit.get("_source") or {})))
    for number, reasons in failed.items():
        if len(reasons) == tried.get(number, 0):
            targets[number].search_error = "; ".join(reasons)
    return targets
