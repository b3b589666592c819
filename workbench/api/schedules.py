"""Scheduled experiments: ``POST|GET /experiments/schedule``, ``GET|DELETE .../{id}``
(docs/contract.md, "Scheduled experiments"). The job's id is the experiment's id, as Dashboards
looks it up by the experiment."""

from __future__ import annotations

from flask import Blueprint, Response

from workbench.api import caller, json_body, json_response, services
from workbench.api.entities import (
    delete_entity,
    get_entity,
    list_entities,
    plugin_settings,
    repository,
)
from workbench.errors import Conflict, NotFound, TextError
from workbench.experiments.scheduling import job_document, last_fire_key
from workbench.schemas.body import load
from workbench.schemas.schedules import ScheduleSchema
from workbench.store.indices import EXPERIMENT_INDEX, JOBS_INDEX

bp = Blueprint("schedules", __name__, url_prefix="/experiments/schedule")


@bp.before_request
def scheduling_gate() -> None:
    if not plugin_settings().value("scheduled_experiments_enabled"):
        raise TextError(403, "Scheduled experiments is disabled")


def _minimum_interval() -> float:
    minimum: float = plugin_settings().value("scheduled_experiments_minimum_interval")
    return minimum


@bp.post("")
def schedule_experiment() -> Response:
    body = json_body()
    assert body is not None
    fields = load(ScheduleSchema(minimum_interval=_minimum_interval), body)
    experiment_id, expression = fields["experimentId"], fields["cronExpression"]
    experiments = repository(EXPERIMENT_INDEX)
    experiment = experiments.get_source(experiment_id)
    if experiment is None:
        raise NotFound(f"Experiment not found: {experiment_id}")
    caller.refuse_unless_searchable(experiment.get("searchConfigurationList") or [])
    jobs = repository(JOBS_INDEX)
    if jobs.get_source(experiment_id) is not None:
        raise Conflict(f"Experiment [{experiment_id}] is already scheduled", status=409,
                       error_type="version_conflict_engine_exception")
    # A new schedule starts afresh; before the job is written, so Redis down leaves nothing.
    services().redis.delete(last_fire_key(experiment_id))
    result = jobs.create({**job_document(experiment_id, expression), **caller.created_by()})
    experiments.update_fields(experiment_id, {"isScheduled": True,
                                              "scheduledExperimentJobId": experiment_id})
    return json_response({"job_id": experiment_id, "job_result": str(result["result"]).upper()})


@bp.get("")
def list_schedules() -> Response:
    return list_entities(repository(JOBS_INDEX))


@bp.get("/<job_id>")
def get_schedule(job_id: str) -> Response:
    return get_entity(repository(JOBS_INDEX), job_id)


@bp.delete("/<job_id>")
def delete_schedule(job_id: str) -> Response:
    response = delete_entity(repository(JOBS_INDEX), job_id)
    experiments = repository(EXPERIMENT_INDEX)
    if response.status_code == 200 and experiments.get_source(job_id) is not None:
        experiments.update_fields(job_id, {"isScheduled": False,
                                           "scheduledExperimentJobId": None})
    return response
