"""``POST experiments/{id}/_fill`` and ``POST experiments/{id}/_fill/_estimate``: fill the holes
of a finished experiment's judgment lists (docs/holes.md). The fill is a job (a new
``FILLED_JUDGMENT``, created like ``PUT judgments``: ``api/creates.py``); the estimate answers
at once, as the caller, and stores nothing."""

from __future__ import annotations

from typing import Any

from flask import Blueprint, Response

from workbench.api import caller, json_body, json_response, services
from workbench.api.creates import Create, Kind
from workbench.api.deadlines import sync_deadline
from workbench.api.entities import repository
from workbench.api.judgment_estimate import price_of
from workbench.errors import BadRequest, Conflict, NotFound
from workbench.holes import job
from workbench.holes import pool as pooling
from workbench.jobs.base import JobFailed
from workbench.judgments.create import judgment_rules
from workbench.llm.base import LLMError
from workbench.schemas.body import load
from workbench.schemas.holes import FillSchema
from workbench.store.indices import EXPERIMENT_INDEX, JUDGMENT_INDEX

bp = Blueprint("holes", __name__, url_prefix="/experiments")

FILLED = Kind("judgment", "judgment", "/judgments", job.TASK)


def _request(experiment_id: str) -> tuple[dict[str, Any], dict[str, Any], pooling.Experiment]:
    """The experiment (404 unknown; 409 unfinished; 400 of a type or with indices that cannot
    be filled), the body checked, and the experiment's pool at the body's size."""
    body = json_body()
    assert body is not None
    experiment = repository(EXPERIMENT_INDEX).get_source(experiment_id)
    if experiment is None:
        raise NotFound(f"Experiment not found: {experiment_id}")
    try:
        pooling.check(experiment)
        fields = load(FillSchema(judgment_rules(services().client, price_of),
                                 int(experiment.get("size") or 10)), body)
        _check_references(experiment, fields)
        caller.refuse_unless_searchable(experiment.get("searchConfigurationList") or [])
        found = pooling.read(services().client, experiment, fields["size"])
    except pooling.Refused as exc:
        raise (Conflict(str(exc)) if exc.status == 409 else BadRequest(str(exc))) from None
    return experiment, fields, found


def _check_references(experiment: dict[str, Any], fields: dict[str, Any]) -> None:
    """A judge that compares results with each query's ``referenceAnswer`` needs them all."""
    choice = fields.get("judge")
    if choice is None or not choice.judge.needs_reference:
        return
    rules = judgment_rules(services().client)
    query_set = rules.entity("QuerySet", str(experiment.get("querySetId")))
    missing = rules.missing_references(query_set) if query_set else 0
    if missing:
        raise BadRequest(f"QuerySet [{experiment.get('querySetId')}] has {missing} queries "
                         f"without a referenceAnswer; the {choice.name} judge compares results "
                         "with it")


@bp.post("/<entity_id>/_fill")
def fill(entity_id: str) -> Response:
    create = Create(FILLED)
    experiment, fields, found = _request(entity_id)
    counts = found.pool.counts()
    doc = job.new_fill(create.id, fields, experiment, counts)
    doc.update(caller.created_by())
    create.store(repository(JUDGMENT_INDEX), doc, json_body())  # and queues its job
    return create.answer({"judgment_id": doc["id"], "pool": counts})


@bp.post("/<entity_id>/_fill/_estimate")
def estimate(entity_id: str) -> Response:
    experiment, fields, found = _request(entity_id)
    metadata = job.new_fill("estimate", fields, experiment, found.pool.counts())["metadata"]
    try:
        with sync_deadline("experiments/_fill/_estimate"):
            return json_response(job.estimate(services(), metadata, found))
    except (JobFailed, LLMError) as exc:  # what would end the job ERROR before any call
        raise BadRequest(str(exc)) from None
