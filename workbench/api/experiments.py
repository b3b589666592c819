"""Experiments: ``PUT`` (create and run), list, get, ``_search``, delete (cascading), ``PATCH``,
``GET /{id}/validate``. Runs happen on the workers."""

from __future__ import annotations

from flask import Blueprint, Response

from workbench.api import caller, json_body, json_response, services
from workbench.api.creates import EXPERIMENT, Create
from workbench.api.entities import (
    cancel_if_running,
    cancel_job,
    delete_entity,
    get_entity,
    list_entities,
    plugin_settings,
    repository,
    search_entities,
)
from workbench.errors import Conflict, NotFound
from workbench.experiments.create import new_experiment
from workbench.experiments.runner import EVENTS
from workbench.experiments.signature import validate
from workbench.schemas.body import load
from workbench.schemas.experiments import ExperimentPatchSchema
from workbench.store.indices import (
    EVALUATION_INDEX,
    EXPERIMENT_INDEX,
    HISTORY_INDEX,
    JOBS_INDEX,
    VARIANT_INDEX,
)

bp = Blueprint("experiments", __name__, url_prefix="/experiments")


@bp.put("")
def put_experiment() -> Response:
    body = json_body()
    assert body is not None
    svc = services()
    create = Create(EXPERIMENT)
    doc = new_experiment(svc.client, body, create.id)
    caller.refuse_unless_searchable(doc.get("searchConfigurationList") or [])
    doc.update(caller.created_by())
    result = create.store(repository(EXPERIMENT_INDEX), doc, body)  # and queues its job
    if not create.replayed:  # counted once, by the request that queued it
        svc.record_event("experiment_executions", EVENTS[doc["type"]],
                         settings=plugin_settings())
    return create.answer({"experiment_id": doc["id"],
                          "experiment_result": str(result["result"]).upper()})


@bp.get("")
def list_experiments() -> Response:
    return list_entities(repository(EXPERIMENT_INDEX))


@bp.route("/_search", methods=["GET", "POST"])
def search_experiments() -> Response:
    return search_entities(repository(EXPERIMENT_INDEX), excludes=["results"])


@bp.get("/<entity_id>")
def get_experiment(entity_id: str) -> Response:
    return get_entity(repository(EXPERIMENT_INDEX), entity_id)


@bp.delete("/<entity_id>")
def delete_experiment(entity_id: str) -> Response:
    """Cascade: evaluation results, variants, the schedule and its history, then the
    experiment itself. A running experiment's job is cancelled first (Redis down: 503, nothing
    deleted); it removes what it wrote after the cascade."""
    cancel_if_running(EXPERIMENT_INDEX, entity_id, ("PROCESSING",))
    by_experiment = {"term": {"experimentId": entity_id}}
    repository(EVALUATION_INDEX).delete_by_query(by_experiment)
    repository(VARIANT_INDEX).delete_by_query(by_experiment)
    repository(HISTORY_INDEX).delete_by_query(by_experiment)
    jobs = repository(JOBS_INDEX)
    if jobs.get_source(entity_id) is not None:
        jobs.delete(entity_id)
    return delete_entity(repository(EXPERIMENT_INDEX), entity_id)


@bp.post("/<entity_id>/_cancel")
def cancel_experiment(entity_id: str) -> Response:
    """Ask the job of a PROCESSING experiment to stop; the job removes the evaluation results
    and variants it wrote and ends it ERROR with ``results: [{"error": "cancelled by the
    user"}]`` within seconds."""
    return cancel_job(EXPERIMENT_INDEX, entity_id, "Experiment", ("PROCESSING",))


@bp.patch("/<entity_id>")
def patch_experiment(entity_id: str) -> Response:
    body = json_body()
    assert body is not None
    changes = load(ExperimentPatchSchema(), body)
    repo = repository(EXPERIMENT_INDEX)
    hit = repo.get_hit(entity_id)
    if hit is None:
        raise NotFound(f"Experiment not found: {entity_id}")
    if hit["_source"].get("status") == "PROCESSING":
        raise Conflict("Cannot patch experiment while it is in PROCESSING status. Please wait "
                       "for it to complete.")
    repo.put({**hit["_source"], **changes}, seq_no=hit["_seq_no"],
             primary_term=hit["_primary_term"])
    return json_response({"experiment_id": entity_id, "experiment_result": "updated"})


@bp.get("/<entity_id>/validate")
def validate_experiment(entity_id: str) -> Response:
    experiment = repository(EXPERIMENT_INDEX).get_source(entity_id)
    if experiment is None:
        raise NotFound(f"Experiment not found: {entity_id}")
    return json_response(validate(services().client, experiment))
