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
from workbench.errors import BadRequest, Conflict, NotFound
from workbench.jobs.control import forget_cancel
from workbench.jobs.queue import QueueUnavailable, enqueue
from workbench.judgments import agreement, summary
from workbench.judgments.create import new_judgment
from workbench.metrics import relevance_threshold
from workbench.schemas.javafmt import double_to_string
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
    doc = new_judgment(services().client, body, price_of, create.id)
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
    if not any(entry.get("failures") for entry in ratings):
        raise BadRequest("No failed documents to retry")
    if not doc.get("metadata"):
        raise BadRequest("Judgment metadata is missing")
    if not doc["metadata"].get("searchConfigurationList"):
        # An ERROR written over the metadata leaves nothing to search the failed documents in.
        raise BadRequest("Judgment metadata names no searchConfigurationList to retry with")
    caller.refuse_unless_searchable(doc["metadata"].get("searchConfigurationList") or [])
    forget_cancel(services().redis, entity_id)  # a late cancel of an earlier run
    updated = {**doc, "status": "RETRYING", "timestamp": now_iso()}
    try:
        written = repo.put(updated, seq_no=hit["_seq_no"], primary_term=hit["_primary_term"])
    except ConflictError:
        raise Conflict("A concurrent retry is already in progress for this judgment") from None
    try:
        enqueue("workbench.judgments.retry", entity_id)
    except QueueUnavailable:
        # Back to the status and timestamp it had, unless something changed it meanwhile.
        with suppress(ConflictError):
            repo.put(doc, seq_no=written["_seq_no"], primary_term=written["_primary_term"])
        raise
    return json_response({"judgment_id": entity_id, "status": "RETRYING",
                          "message": "Retrying failed documents"})


def _edits(body: dict[str, Any]) -> list[tuple[str, str, Any]]:
    """(query, docId, rating) triples from an edit body, with the contract's REST checks."""
    entries = body.get("judgmentRatings")
    if entries is None:
        raise BadRequest("judgmentRatings is required")
    if not isinstance(entries, list):
        raise BadRequest("expected a list of {query, ratings:[{docId, rating}]} objects")
    edits = []
    for entry in entries:
        if not isinstance(entry, dict):
            raise BadRequest("expected a list of {query, ratings:[{docId, rating}]} objects")
        if not isinstance(entry.get("ratings"), list):
            raise BadRequest("each entry must have a ratings list")
        for rating in entry["ratings"]:
            if (not isinstance(rating, dict) or not entry.get("query")
                    or not rating.get("docId") or rating.get("rating") is None):
                raise BadRequest("each rating must have a query, docId and rating")
            edits.append((str(entry["query"]), str(rating["docId"]), rating["rating"]))
    if not edits:
        raise BadRequest("at least one rating is required")
    return edits


def _scaled(value: Any, doc_id: str, rating_type: str) -> str:
    try:
        if isinstance(value, bool):
            raise ValueError
        number = float(value)
    except (TypeError, ValueError):
        raise BadRequest(f"rating '{value}' for docId {doc_id} must be a number") from None
    if rating_type == "RELEVANT_IRRELEVANT":
        if number not in (0.0, 1.0):
            raise BadRequest(f"rating '{value}' for docId {doc_id} must be 0 or 1 for a "
                             "RELEVANT_IRRELEVANT judgment")
    elif not 0.0 <= number <= 1.0:
        raise BadRequest(f"rating '{value}' for docId {doc_id} must be a number between 0 "
                         "and 1 for a SCORE0_1 judgment")
    return double_to_string(number)


@bp.put("/<entity_id>")
def edit_ratings(entity_id: str) -> Response:
    body = json_body()
    assert body is not None
    edits = _edits(body)
    repo = repository(JUDGMENT_INDEX)
    hit = repo.get_hit(entity_id)
    if hit is None:
        raise NotFound(f"Judgment not found: {entity_id}")
    doc = hit["_source"]
    if doc.get("type") != "LLM_JUDGMENT":
        raise BadRequest("Rating update is only supported for LLM_JUDGMENT type")
    if doc.get("status") in ("PROCESSING", "RETRYING"):
        raise Conflict(f"Judgment is currently {doc['status']}; cannot edit ratings until it "
                       "completes")
    metadata = doc.get("metadata") or {}
    rating_type = metadata.get("llmJudgmentRatingType") or "SCORE0_1"
    entries = doc.get("judgmentRatings") or []
    for query, doc_id, value in edits:
        rating = _scaled(value, doc_id, rating_type)
        entry = next((e for e in entries if e.get("query") == query), None)
        if entry is None:
            raise NotFound(f"Query not found in judgment: {query}")
        ratings = entry.setdefault("ratings", [])
        failures = entry.get("failures") or []
        existing = next((r for r in ratings if r.get("docId") == doc_id), None)
        if existing is not None:
            existing["rating"] = rating
        elif any(f.get("docId") == doc_id for f in failures):
            ratings.append({"docId": doc_id, "rating": rating})
            entry["failures"] = [f for f in failures if f.get("docId") != doc_id]
            if not entry["failures"]:
                del entry["failures"]
        else:
            raise BadRequest(f"Document {doc_id} is not part of query [{query}] in this judgment")
    updated = {**doc, "status": "COMPLETED", "judgmentRatings": entries,
               "metadata": summary.recompute(metadata, entries)}
    try:
        repo.put(updated, seq_no=hit["_seq_no"], primary_term=hit["_primary_term"])
    except ConflictError:
        raise Conflict("Judgment was changed concurrently; reload it and edit again") from None
    return json_response({"judgment_id": entity_id, "result": "updated"})


def _threshold(body: dict[str, Any], field: str, ratings: list[dict[str, Any]]) -> float:
    """The given threshold, else the experiments' relevance rule over the list's ratings
    (max(half the highest rating, the 90th percentile), docs/algorithms.md, "Relevance
    threshold")."""
    value = body.get(field)
    if value is not None:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise BadRequest(f"{field} must be a number, got: {value}")
        return float(value)
    values = [agreement.parse_rating(r.get("rating"), e.get("query", ""), r.get("docId", ""))
              for e in ratings for r in e.get("ratings") or []]
    return float(relevance_threshold(np.array(values, dtype=np.float64)))


@bp.post("/_compare")
def compare_judgments() -> Response:
    """Agreement of a candidate judgment list with a reference list (e.g. an LLM's against
    people's), over the query-document pairs both rated."""
    body = json_body()
    assert body is not None
    ids = {}
    for role in ("reference", "candidate"):
        value = body.get(f"{role}JudgmentId", body.get(role))
        if not isinstance(value, str) or not value.strip():
            raise BadRequest(f"{role}JudgmentId is required")
        ids[role] = value
    if ids["reference"] == ids["candidate"]:
        raise BadRequest("A judgment list cannot be compared with itself; give two different "
                         "judgment ids")
    repo = repository(JUDGMENT_INDEX)
    docs = {}
    for role, judgment_id in ids.items():
        doc = repo.get_source(judgment_id)
        if doc is None:
            raise NotFound(f"Judgment not found: {judgment_id}")
        if doc.get("status") != "COMPLETED":
            raise Conflict(f"Judgment [{judgment_id}] is {doc.get('status')}; compare it once it "
                           "is COMPLETED")
        docs[role] = doc
    try:
        thresholds = {role: _threshold(body, f"{role}Threshold",
                                       docs[role].get("judgmentRatings") or [])
                      for role in ids}
        report = agreement.compare(docs["reference"].get("judgmentRatings") or [],
                                   docs["candidate"].get("judgmentRatings") or [],
                                   thresholds["reference"], thresholds["candidate"])
    except ValueError as exc:
        raise BadRequest(str(exc)) from exc
    described = {role: {"id": ids[role], "name": docs[role].get("name"),
                        "type": docs[role].get("type"), "threshold": thresholds[role]}
                 for role in ids}
    return json_response({**described, **report})
