"""``GET /experiments/{id}/_summary`` and ``GET /experiments/{id}/_report``: what an experiment's
results say, with the statistics to tell a real difference from noise.

Both read the stored evaluation results as the caller (the SRW gate binds the caller's identity
for every cluster call) and compute everything on the fly; nothing is written.
"""

from __future__ import annotations

import math
import secrets
from typing import Any

from flask import Blueprint, Response, request
from opensearchpy import NotFoundError

from workbench.api import json_response, services
from workbench.errors import BadRequest, Conflict, NotFound
from workbench.experiments import label_sample, summary_humans, summary_read
from workbench.experiments.ppi import INTERVALS
from workbench.experiments.summary_build import (
    POINTWISE,
    Run,
    build,
    default_metric,
    metric_choices,
    metric_names,
    rows_of,
)
from workbench.holes import sources
from workbench.holes.job import TYPE as FILLED
from workbench.metrics import MetricError
from workbench.store.indices import EXPERIMENT_INDEX, JUDGMENT_INDEX, SEARCH_CONFIG_INDEX
from workbench.store.repository import Repository

bp = Blueprint("experiment_summary", __name__, url_prefix="/experiments")

DEFAULT_ALPHA = 0.05
DEFAULT_PERMUTATIONS = 10_000
MAX_PERMUTATIONS = 100_000
REPORT_FORMATS = ("md", "csv", "html")
SAMPLE_FORMATS = ("json", "csv")
MAX_SAMPLE_FIELDS = 20


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
    names = metric_choices(experiment)
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
    names = summary_read.configuration_names(client, configs)
    summary = build(experiment, names, own, judged, history, **params)
    if not pairwise:
        summary["warnings"].extend(summary_read.failed_judgment_queries(
            client, [str(j) for j in experiment.get("judgmentList") or []]))
    human_id = request.args.get("humanJudgments")
    automatic = human_id is None
    if automatic:
        human_id = _merged_with_people(experiment)
    if human_id is not None:
        _add_human_section(experiment, summary, own, names, human_id, params, automatic)
    return experiment, own, summary


def _merged_with_people(experiment: dict[str, Any]) -> str | None:
    """The first judgment list of a POINTWISE experiment that merges people's ratings with a
    judge's (a ``FILLED_JUDGMENT`` whose ``metadata.sources`` count both): its human ratings are
    the gold sample of the prediction-powered figures without ``humanJudgments``
    (docs/holes.md, "People's ratings in a filled list")."""
    if experiment.get("type") != POINTWISE:
        return None
    repo = Repository(services().client, JUDGMENT_INDEX)
    for judgment_id in (str(j) for j in experiment.get("judgmentList") or []):
        found = repo.get_source(judgment_id, ["type", "metadata.sources"]) or {}
        counted = (found.get("metadata") or {}).get("sources") or {}
        kinds = {sources.HUMAN if sources.is_kind(s, sources.HUMAN) else "other"
                 for s, n in counted.items() if n}
        if found.get("type") == FILLED and kinds == {sources.HUMAN, "other"}:
            return judgment_id
    return None


def _human(rating: dict[str, Any]) -> bool:
    """A rating people gave: every rating of a list without sources, else a ``human`` one."""
    return "source" not in rating or sources.is_kind(str(rating["source"]), sources.HUMAN)


def _add_human_section(experiment: dict[str, Any], summary: dict[str, Any], own: Run,
                       names: dict[str, str], human_id: str, params: dict[str, Any],
                       automatic: bool = False) -> None:
    """``humanJudgments``: the judge-aware figures (``summary_humans``) of a second judgment
    list that people made for part of the query set, or of the human ratings of a filled list
    (``automatic``: one of the experiment's own, found by ``_merged_with_people``)."""
    if experiment.get("type") != POINTWISE:
        raise BadRequest(f"humanJudgments applies to POINTWISE_EVALUATION experiments; "
                         f"experiment [{experiment.get('id')}] is {experiment.get('type')}")
    if not human_id.strip():
        raise BadRequest("humanJudgments is empty; it names the judgment list people made")
    kind = request.args.get("interval", "t")
    if kind not in INTERVALS:
        raise BadRequest(f"interval [{kind}] is not supported; expected one of "
                         f"[{', '.join(INTERVALS)}]")
    try:
        found = summary_read.human_ratings(services().client, human_id, keep=_human)
    except MetricError as exc:
        raise BadRequest(f"humanJudgments [{human_id}]: {exc}") from None
    if found is None:
        raise BadRequest(f"humanJudgments [{human_id}] is not a judgment list (no judgment "
                         "has this id)")
    source, human = found
    if source.get("status") not in (None, "COMPLETED"):
        raise Conflict(f"humanJudgments [{human_id}] is {source.get('status')}; only a "
                       "COMPLETED judgment list can be compared")
    queries, rows = rows_of(experiment, own)
    k = int(experiment.get("size") or 10)
    if source.get("type") == FILLED:
        with_people = len(summary_humans.labelled_positions(queries, human))
        human = summary_humans.complete_queries(rows, queries, human, k)
        left = with_people - len(summary_humans.labelled_positions(queries, human))
        if left:
            summary["warnings"].append({
                "level": "info", "code": "partly_human_queries", "judgmentId": human_id,
                "queries": left,
                "message": f"people rated only part of the top-{k} hits of {left} of the "
                           f"{with_people} queries they rated in [{source.get('name') or human_id}]"
                           " (a judge rated the rest); only queries people rated whole are the "
                           "gold sample"})
        if not summary_humans.labelled_positions(queries, human):
            message = (f"no query of [{source.get('name') or human_id}] has people's ratings "
                       f"for all of its top-{k} hits, so people's ratings give no gold sample; "
                       "label whole queries (GET experiments/{id}/_label_sample) to correct "
                       "the judge's metric")
            if not automatic:
                raise BadRequest(f"humanJudgments [{human_id}]: {message}")
            summary["warnings"].append({"level": "info", "code": "no_human_gold_sample",
                                        "judgmentId": human_id, "message": message})
            return
    if not summary_humans.labelled_positions(queries, human):
        raise BadRequest(f"humanJudgments [{human_id}] rates none of the {len(queries)} "
                         f"queries of query set [{experiment.get('querySetId')}]")
    # The metric asked for first; the condensed ones are left out (summary_humans recomputes
    # the standard ones from people's ratings).
    metrics = sorted(metric_names(experiment), key=lambda m: m != params["metric"])
    section, warnings = summary_humans.build(
        rows, names, queries, human, human_id, k,
        params["baseline"], metrics, params["alpha"], kind)
    section["name"] = source.get("name")
    if automatic:
        section["automatic"] = True  # not asked for: the experiment's filled list has people's
    summary["humanJudgments"] = section
    summary["warnings"].extend(warnings)


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


@bp.get("/<entity_id>/_label_sample")
def get_label_sample(entity_id: str) -> Response:
    """The queries people should label for ``humanJudgments`` (``label_sample``): ``queries``
    of them drawn uniformly with ``seed`` (random when not given; the answer says which), each
    with the pool of documents the experiment's configurations returned in their top k, as JSON
    or as the CSV ``workbench judgments import`` reads back; ``fields`` adds those fields of
    each document, for the people who rate it."""
    experiment = _experiment(entity_id)
    if experiment.get("type") != POINTWISE:
        raise BadRequest(f"a label sample is drawn from a POINTWISE_EVALUATION experiment; "
                         f"experiment [{entity_id}] is {experiment.get('type')}")
    if "queries" not in request.args:
        raise BadRequest("queries is required: how many queries people will label")
    budget = int(_number("queries", 0, int))
    if budget < 1:
        raise BadRequest(f"queries [{budget}] must be at least 1")
    seed = int(_number("seed", secrets.randbelow(2**31), int))
    if not 0 <= seed < 2**63:
        raise BadRequest(f"seed [{seed}] must be between 0 and 2^63 - 1")
    fmt = request.args.get("format", "json")
    if fmt not in SAMPLE_FORMATS:
        raise BadRequest(f"format [{fmt}] is not supported; expected one of "
                         f"[{', '.join(SAMPLE_FORMATS)}]")
    fields = [f.strip() for f in request.args.get("fields", "").split(",") if f.strip()]
    if len(fields) > MAX_SAMPLE_FIELDS:
        raise BadRequest(f"fields names {len(fields)} fields; at most {MAX_SAMPLE_FIELDS}")
    client = services().client
    own = Run(results=list(experiment.get("results") or []),
              evaluations=summary_read.evaluations(client, entity_id))
    queries, rows = rows_of(experiment, own)
    chosen = label_sample.draw(queries, budget, seed)
    pooled = label_sample.pool(rows, queries, chosen, int(experiment.get("size") or 10))
    documents = _document_fields(pooled, fields) if fields else {}
    entries: list[dict[str, Any]] = []
    for query, doc_id, config_id in pooled:
        entry: dict[str, Any] = {"query": query, "docId": doc_id, "rating": None,
                                 "searchConfigurationId": config_id}
        if fields:
            source = documents.get((config_id, doc_id)) or {}
            entry["fields"] = {f: source.get(f) for f in fields}
        entries.append(entry)
    if fmt == "csv":
        return Response(label_sample.as_csv(entries, fields),
                        content_type="text/csv; charset=UTF-8",
                        headers={"Content-Disposition":
                                 f'attachment; filename="label-sample-{entity_id}.csv"'})
    return json_response({
        "experimentId": entity_id, "querySetId": experiment.get("querySetId"),
        "strategy": label_sample.STRATEGY, "seed": seed,
        "queries": {"total": len(queries), "sampled": len(chosen)},
        "sampledQueries": chosen, "documents": len(entries), "rows": entries})


def _document_fields(pooled: list[tuple[str, str, str]], fields: list[str]
                     ) -> dict[tuple[str, str], dict[str, Any]]:
    """(configuration id, doc id) -> the document's ``_source``, read from the index each
    configuration searches (one ``_mget`` per configuration)."""
    client = services().client
    configs = Repository(client, SEARCH_CONFIG_INDEX)
    by_config: dict[str, list[str]] = {}
    for _, doc_id, config_id in pooled:
        by_config.setdefault(config_id, []).append(doc_id)
    out: dict[tuple[str, str], dict[str, Any]] = {}
    for config_id, doc_ids in by_config.items():
        index = (configs.get_source(config_id, ["index"]) or {}).get("index")
        if not isinstance(index, str) or not index:
            continue
        try:
            found = Repository(client, index).mget_sources(doc_ids, fields)
        except NotFoundError:  # the index is gone: the rows keep their ids, fields empty
            continue
        out.update({(config_id, doc_id): source for doc_id, source in found.items()})
    return out
