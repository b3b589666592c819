"""``GET /experiments/{id}/_summary`` and ``GET /experiments/{id}/_report``: what an experiment's
results say, with the statistics to tell a real difference from noise.

Both read the stored evaluation results as the caller (the SRW gate binds the caller's identity
for every cluster call) and compute everything on the fly; nothing is written.
"""

from __future__ import annotations

import math
from typing import Any

from flask import Blueprint, Response, request

from workbench.api import json_response, services
from workbench.errors import BadRequest, Conflict, NotFound
from workbench.experiments import summary_read
from workbench.experiments.summary_build import Run, build, default_metric, metric_names
from workbench.store.indices import EXPERIMENT_INDEX
from workbench.store.repository import Repository

bp = Blueprint("experiment_summary", __name__, url_prefix="/experiments")

DEFAULT_ALPHA = 0.05
DEFAULT_PERMUTATIONS = 10_000
MAX_PERMUTATIONS = 100_000
REPORT_FORMATS = ("md", "csv", "html")


def _experiment(entity_id: str) -> dict[str, Any]:
    experiment = Repository(services().client, EXPERIMENT_INDEX).get_source(entity_id)
    if experiment is None:
        raise NotFound(f"Experiment not found: {entity_id}")
    status = experiment.get("status")
    if status == "PROCESSING":
        raise Conflict(f"Experiment [{entity_id}] is PROCESSING; its summary is available once "
                       "it has COMPLETED")
    if status != "COMPLETED":
        raise Conflict(f"Experiment [{entity_id}] is {status}; only a COMPLETED experiment has "
                       "results to summarise")
    return experiment


def _parameters(experiment: dict[str, Any]) -> dict[str, Any]:
    """``baseline``, ``metric``, ``alpha`` and ``permutations``, checked (a 400 names the
    parameter)."""
    configs = [str(c) for c in experiment.get("searchConfigurationList") or []]
    baseline = request.args.get("baseline", configs[0] if configs else "")
    if baseline not in configs:
        raise BadRequest(f"baseline [{baseline}] is not a search configuration of experiment "
                         f"[{experiment.get('id')}]; expected one of [{', '.join(configs)}]")
    names = metric_names(experiment)
    metric = request.args.get("metric", default_metric(experiment))
    if metric not in names:
        raise BadRequest(f"metric [{metric}] is not a metric of this experiment; expected one "
                         f"of [{', '.join(names)}]")
    alpha = _number("alpha", DEFAULT_ALPHA, float)
    if not 0.0 < alpha < 1.0:
        raise BadRequest(f"alpha [{request.args.get('alpha')}] must be between 0 and 1 "
                         "(exclusive)")
    permutations = int(_number("permutations", DEFAULT_PERMUTATIONS, int))
    if not 1 <= permutations <= MAX_PERMUTATIONS:
        raise BadRequest(f"permutations [{permutations}] must be between 1 and "
                         f"{MAX_PERMUTATIONS}")
    return {"baseline": baseline, "metric": metric, "alpha": alpha,
            "permutations": permutations}


def _number(name: str, default: float, kind: type[float] | type[int]) -> float:
    raw = request.args.get(name)
    if raw is None:
        return default
    try:
        value = kind(raw)
    except ValueError:
        raise BadRequest(f"{name} [{raw}] is not a valid {kind.__name__}") from None
    if not math.isfinite(value):
        raise BadRequest(f"{name} [{raw}] must be finite")
    return value


def experiment_summary(entity_id: str) -> tuple[dict[str, Any], Run, dict[str, Any]]:
    """(experiment, its own run as stored, summary) of a COMPLETED experiment under the
    request's parameters."""
    experiment = _experiment(entity_id)
    params = _parameters(experiment)
    client = services().client
    configs = [str(c) for c in experiment.get("searchConfigurationList") or []]
    kind = experiment.get("type")
    pairwise = kind == "PAIRWISE_COMPARISON"
    own = Run(results=list(experiment.get("results") or []),
              evaluations=[] if pairwise else summary_read.evaluations(client, entity_id),
              timestamp=experiment.get("timestamp"))
    if kind == "HYBRID_OPTIMIZER":
        own.variant_errors = summary_read.variant_errors(client, entity_id)
    judged = None if pairwise else summary_read.judged_documents(
        client, [str(j) for j in experiment.get("judgmentList") or []])
    history = summary_read.scheduled_runs(client, entity_id) \
        if experiment.get("isScheduled") else []
    summary = build(experiment, summary_read.configuration_names(client, configs), own, judged,
                    history, **params)
    return experiment, own, summary


@bp.get("/<entity_id>/_summary")
def get_summary(entity_id: str) -> Response:
    return json_response(experiment_summary(entity_id)[2])


@bp.get("/<entity_id>/_report")
def get_report(entity_id: str) -> Response:
    """The summary as Markdown tables, CSV rows (query x configuration x metric) or a
    self-contained HTML page with plots."""
    fmt = request.args.get("format", "html")
    if fmt not in REPORT_FORMATS:
        raise BadRequest(f"format [{fmt}] is not supported; expected one of "
                         f"[{', '.join(REPORT_FORMATS)}]")
    from workbench.experiments import report  # matplotlib is imported only for reports

    experiment, own, summary = experiment_summary(entity_id)
    if fmt == "md":
        return Response(report.markdown(summary), content_type="text/markdown; charset=UTF-8")
    if fmt == "csv":
        return Response(report.csv_rows(experiment, own, summary),
                        content_type="text/csv; charset=UTF-8",
                        headers={"Content-Disposition":
                                 f'attachment; filename="experiment-{entity_id}.csv"'})
    return Response(report.html(experiment, own, summary), content_type="text/html; charset=UTF-8")
