"""Judgments: ``PUT`` (LLM, UBI, IMPORT), list (``?status=``), get, ``_search``, delete,
``POST /{id}/_retry`` and ``PUT /{id}`` (edit ratings). Generation runs on the workers."""

from __future__ import annotations

from contextlib import suppress
from datetime import UTC, datetime
from typing import Any

import numpy as np
from flask import Blueprint, Response, request
from opensearchpy.exceptions import ConflictError

from workbench.api import caller, json_body, json_response, services
from workbench.api.creates import JUDGMENT, Create
from workbench.api.entities import (
    cancel_if_running,
    cancel_job,
    delete_entity,
    get_entity,
    list_entities,
    refuse_if_used,
    repository,
    search_entities,
)
from workbench.api.judgment_estimate import price_of
from workbench.errors import BadRequest, Conflict, NotFound, SearchRelevanceError
from workbench.jobs.control import forget_cancel
from workbench.jobs.queue import QueueUnavailable, enqueue
from workbench.judgments import agreement, summary
from workbench.judgments.create import judgment_rules, new_judgment
from workbench.judgments.retrieval import REMOTE_RETRY
from workbench.metrics import relevance_threshold
from workbench.schemas.body import load
from workbench.schemas.judgment_ratings import (
    CompareRules,
    CompareSchema,
    RatingEditsSchema,
    apply_edits,
    check_scale,
    rating_type_of,
)
from workbench.schemas.judgments import judgment_schema
from workbench.store.indices import JUDGMENT_INDEX
from workbench.store.repository import now_iso

bp = Blueprint("judgments", __name__, url_prefix="/judgments")

HEAVY = ["judgmentRatings.ratings"]
RETRY_GRACE_SECONDS = 300
RUNNING = ("PROCESSING", "RETRYING")


@bp.put("")
def put_judgment() -> Response:
    body = json_body()
    assert body is not None
    create = Create(JUDGMENT)
    client = services().client
    rules = judgment_rules(client, price_of)
    fields = load(judgment_schema(body, rules), body)
    doc = new_judgment(client, fields, rules, create.id)
    metadata = doc["metadata"]
    caller.refuse_unless_searchable(metadata.get("searchConfigurationList") or [],
                                    [metadata.get("ubiEventsIndex") or ""])
    doc.update(caller.created_by())
    create.store(repository(JUDGMENT_INDEX), doc, body)  # and queues its job
    return create.answer({"judgment_id": doc["id"]})


@bp.get("")
def list_judgments() -> Response:
    status = request.args.get("status")
    query = {"term": {"status.keyword": status.upper()}} if status else None
    return list_entities(repository(JUDGMENT_INDEX), query=query,
                         source={"excludes": HEAVY})


@bp.route("/_search", methods=["GET", "POST"])
def search_judgments() -> Response:
    return search_entities(repository(JUDGMENT_INDEX), excludes=HEAVY)


@bp.get("/<entity_id>")
def get_judgment(entity_id: str) -> Response:
    return get_entity(repository(JUDGMENT_INDEX), entity_id)


@bp.delete("/<entity_id>")
def delete_judgment(entity_id: str) -> Response:
    """A running judgment's job is cancelled first (Redis down: 503, nothing deleted)."""
    refuse_if_used("judgmentList", entity_id, "judgement")
    cancel_if_running(JUDGMENT_INDEX, entity_id, RUNNING)
    return delete_entity(repository(JUDGMENT_INDEX), entity_id)


@bp.post("/<entity_id>/_cancel")
def cancel_judgment(entity_id: str) -> Response:
    """Ask the job of a PROCESSING or RETRYING judgment to stop; the job ends it ERROR with
    ``metadata.error: "cancelled by the user"`` within seconds."""
    return cancel_job(JUDGMENT_INDEX, entity_id, "Judgment", RUNNING)


def _age_seconds(timestamp: str | None) -> float:
    if not timestamp:
        return float("inf")
    then = datetime.strptime(timestamp, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=UTC)
    return (datetime.now(UTC) - then).total_seconds()


@bp.post("/<entity_id>/_retry")
def retry_judgment(entity_id: str) -> Response:
    repo = repository(JUDGMENT_INDEX)
    hit = repo.get_hit(entity_id)
    if hit is None:
        raise NotFound(f"Judgment not found: {entity_id}")
    doc = hit["_source"]
    if doc.get("type") != "LLM_JUDGMENT":
        raise BadRequest("Retry is only supported for LLM_JUDGMENT type")
    if doc.get("status") == "PROCESSING":
        raise Conflict("Cannot retry a judgment whose initial generation is still PROCESSING")
    if doc.get("status") == "RETRYING" and _age_seconds(doc.get("timestamp")) < RETRY_GRACE_SECONDS:
        raise Conflict("A retry is already in progress for this judgment")
    ratings = doc.get("judgmentRatings") or []
    if not ratings:
        raise BadRequest("No judgment ratings found")
    left_out = summary.left_out(doc.get("metadata") or {}, ratings)
    if not any(entry.get("failures") for entry in ratings) and not left_out:
        # (a judgment made before failed queries were kept left them out: those are retried
        # whole, searched again: judgments/llm/generation.retry_failed)
        raise BadRequest("No failed documents to retry")
    if not doc.get("metadata"):
        raise BadRequest("Judgment metadata is missing")
    if not doc["metadata"].get("searchConfigurationList"):
        # An ERROR written over the metadata leaves nothing to search the failed documents in.
        raise BadRequest("Judgment metadata names no searchConfigurationList to retry with")
    if doc["metadata"].get("remoteSearchConfigurationIds"):
        raise BadRequest(REMOTE_RETRY)
    caller.refuse_unless_searchable(doc["metadata"].get("searchConfigurationList") or [])
    forget_cancel(services().redis, entity_id)  # a late cancel of an earlier run
    updated = {**doc, "status": "RETRYING", "timestamp": now_iso()}
    try:
        written = repo.put(updated, seq_no=hit["_seq_no"], primary_term=hit["_primary_term"])
    except ConflictError:
        raise Conflict("A concurrent retry is already in progress for this judgment") from None
    try:
        enqueue("workbench.judgments.retry", entity_id, str(doc.get("type") or ""))
    except QueueUnavailable:
        # Back to the status and timestamp it had, unless something changed it meanwhile.
        with suppress(ConflictError):
            repo.put(doc, seq_no=written["_seq_no"], primary_term=written["_primary_term"])
        raise
    return json_response({"judgment_id": entity_id, "status": "RETRYING",
                          "message": "Retrying failed documents"})


@bp.put("/<entity_id>")
def edit_ratings(entity_id: str) -> Response:
    """Edit ratings of an LLM judgment, as the plugin does (its 3.9): every refusal is its
    ``search_relevance_exception`` with its status, checked in its order; each rating is
    stored as the text sent (``1`` as ``"1"``); the judgment gets a new timestamp (Dashboards
    lists it first again); a write that meets a concurrent one answers the cluster's 409."""
    body = json_body()
    assert body is not None
    edits = load(RatingEditsSchema(), body)["judgmentRatings"]
    repo = repository(JUDGMENT_INDEX)
    hit = repo.get_hit(entity_id)
    if hit is None:
        raise SearchRelevanceError(f"Judgment not found: {entity_id}", 404)
    doc = hit["_source"]
    if doc.get("type") != "LLM_JUDGMENT":
        raise SearchRelevanceError("Rating update is only supported for LLM_JUDGMENT type", 400)
    if doc.get("status") in RUNNING:
        raise SearchRelevanceError(f"Judgment is currently {doc['status']}; cannot edit "
                                   "ratings until it completes", 409)
    metadata = doc.get("metadata") or {}
    check_scale(edits, rating_type_of(metadata))
    entries = doc.get("judgmentRatings")
    if entries is None:  # (an empty list is a judgment whose queries are all missing: 404)
        raise SearchRelevanceError("Judgment has no ratings to update", 400)
    apply_edits(entries, edits)
    updated = {**doc, "timestamp": now_iso(), "status": "COMPLETED",
               "judgmentRatings": entries, "metadata": summary.recompute(metadata, entries)}
    try:
        repo.put(updated, seq_no=hit["_seq_no"], primary_term=hit["_primary_term"])
    except ConflictError as exc:
        if not repo.holds(entity_id, updated):  # not this write's own first attempt
            raise _as_named(exc) from None
    return json_response({"judgment_id": entity_id, "result": "updated"})


def _as_named(exc: ConflictError) -> ConflictError:
    """The cluster's version conflict as the plugin's answer shows it: the index by the name
    SRW answers use (after the migration a judgment is written through an alias, and the
    cluster names the concrete index behind it)."""
    info = exc.info
    if isinstance(info, dict) and isinstance(info.get("error"), dict):
        error = info["error"]
        for cause in [error, *(error.get("root_cause") or [])]:
            if isinstance(cause, dict) and str(cause.get("index", "")).startswith(
                    f"{JUDGMENT_INDEX}-"):
                cause["index"] = JUDGMENT_INDEX
    return exc


def _default_threshold(ratings: list[dict[str, Any]]) -> float:
    """The experiments' relevance rule over a list's ratings (max(half the highest rating, the
    90th percentile), docs/algorithms.md, "Relevance threshold")."""
    values = [agreement.parse_rating(r.get("rating"), e.get("query", ""), r.get("docId", ""))
              for e in ratings for r in e.get("ratings") or []]
    return float(relevance_threshold(np.array(values, dtype=np.float64)))


def _completed(judgment_id: str) -> dict[str, Any]:
    doc = repository(JUDGMENT_INDEX).get_source(judgment_id)
    if doc is None:
        raise NotFound(f"Judgment not found: {judgment_id}")
    if doc.get("status") != "COMPLETED":
        raise Conflict(f"Judgment [{judgment_id}] is {doc.get('status')}; compare it once it "
                       "is COMPLETED")
    return doc


@bp.post("/_compare")
def compare_judgments() -> Response:
    """Agreement of a candidate judgment list with a reference list (e.g. an LLM's against
    people's), over the query-document pairs both rated."""
    body = json_body()
    assert body is not None
    fields = load(CompareSchema(CompareRules(_completed, _default_threshold)), body)
    roles = ("reference", "candidate")
    ids = {role: fields[role] for role in roles}
    docs = fields["lists"]
    thresholds = {role: fields[f"{role}Threshold"] for role in roles}
    try:
        report = agreement.compare(docs["reference"].get("judgmentRatings") or [],
                                   docs["candidate"].get("judgmentRatings") or [],
                                   thresholds["reference"], thresholds["candidate"])
    except ValueError as exc:
        raise BadRequest(str(exc)) from exc
    described = {role: {"id": ids[role], "name": docs[role].get("name"),
                        "type": docs[role].get("type"), "threshold": thresholds[role]}
                 for role in ids}
    return json_response({**described, **report})
