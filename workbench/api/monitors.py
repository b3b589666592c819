"""Monitors (a workbench extension, docs/monitors.md): ``PUT`` creates (``PUT /{id}`` replaces a
definition, keeping its runs and gold set), list, get, ``_search``, delete (with its runs),
``POST /{id}/_run`` starts a run now, ``GET /{id}/runs`` lists runs newest first and
``GET /{id}/_report`` gives the metric over time (workbench/monitors/report.py)."""

from __future__ import annotations

import time
from typing import Any

from flask import Blueprint, Response, request

from workbench.api import caller, json_body, json_response, services
from workbench.api.creates import Create, Kind
from workbench.api.entities import (
    delete_entity,
    get_entity,
    list_entities,
    repository,
    search_entities,
)
from workbench.errors import BadRequest, NotFound
from workbench.judges import registry
from workbench.judges.base import OptionError, Setup
from workbench.judges.registry import BrokenJudge, UnknownJudge
from workbench.metrics import registry as metrics_registry
from workbench.monitors import report as monitor_report
from workbench.monitors import run as monitor_run
from workbench.schemas.body import load
from workbench.schemas.monitors import MonitorRules, MonitorSchema
from workbench.store.indices import (
    JUDGMENT_INDEX,
    MONITOR_INDEX,
    MONITOR_RUN_INDEX,
    QUERY_SET_INDEX,
    REMOTE_CONFIG_INDEX,
    SEARCH_CONFIG_INDEX,
)
from workbench.store.repository import now_iso

MONITOR = Kind("monitor", "monitor", "/monitors")
DEFAULT_RUNS = 50
MAX_RUNS = 1_000

bp = Blueprint("monitors", __name__, url_prefix="/monitors")


def _exists(index: str, label: str, path: str) -> Any:
    def check(entity_id: str) -> str | None:
        if repository(index).get_hit(entity_id, ["id"]) is None:
            return f"{path}: {label} [{entity_id}] does not exist"
        return None
    return check


def _search_configuration(config_id: str) -> str | None:
    """A local search configuration, or a remote one (docs/engines.md)."""
    for index in (SEARCH_CONFIG_INDEX, REMOTE_CONFIG_INDEX):
        if repository(index).get_hit(config_id, ["id"]) is not None:
            return None
    return f"searchConfigurationId: search configuration [{config_id}] does not exist"


def _query_set(set_id: str) -> str | None:
    found = repository(QUERY_SET_INDEX).get_source(set_id, ["status"])
    if found is None:
        return f"queries.querySetId: query set [{set_id}] does not exist"
    status = found.get("status")
    if status not in (None, "COMPLETED"):
        return (f"queries.querySetId: query set [{set_id}] is {status}; a panel must be "
                "COMPLETED")
    return None


def _judge(name: str, options: dict[str, Any]) -> str | None:
    try:
        registry.create(name, Setup(options, services(), source="monitor"))
    except UnknownJudge as exc:
        return f"judge.judge: {exc}"
    except OptionError as exc:
        return f"judge.judgeOptions.{exc.option}: {exc}"
    except BrokenJudge as exc:
        return f"judge.judge: {exc}"
    return None


def _metric(name: str, k: int) -> str | None:
    allowed = [*metrics_registry.pointwise_names(k), *metrics_registry.opt_in_names(k)]
    if name not in allowed:
        return (f"metrics: [{name}] is not a pointwise metric at k={k}; one of "
                f"[{', '.join(allowed)}]")
    return None


def rules() -> MonitorRules:
    return MonitorRules(
        search_configuration=_search_configuration,
        query_set=_query_set,
        judgment=_exists(JUDGMENT_INDEX, "judgment", "judgmentList"),
        model=lambda _model_id: None,  # a model of the registry or of ML Commons, as judgments
        judge=_judge,
        metric=_metric,
        run=_exists(MONITOR_RUN_INDEX, "run", "alerts.baseline.runId"))


def _definition(body: dict[str, Any]) -> dict[str, Any]:
    fields = load(MonitorSchema(rules()), body)
    caller.refuse_unless_searchable([fields["searchConfigurationId"]])
    return fields


@bp.put("")
def put_monitor() -> Response:
    body = json_body()
    assert body is not None
    create = Create(MONITOR)
    fields = _definition(body)
    now_ms = int(time.time() * 1000)
    doc = {"id": create.id, **fields, "timestamp": now_iso(), "enabledTime": now_ms,
           **caller.created_by()}
    create.store(repository(MONITOR_INDEX), doc, body)
    return create.answer({"monitor_id": doc["id"], "status": "CREATED"})


@bp.put("/<entity_id>")
def update_monitor(entity_id: str) -> Response:
    monitor_id = entity_id
    """Replace a monitor's definition; its runs, gold set and creation time are kept (the
    judge changed here is what the gold set catches). A changed schedule starts afresh."""
    repo = repository(MONITOR_INDEX)
    found = repo.get_source(monitor_id)
    if found is None:
        raise NotFound(f"Monitor not found: {monitor_id}")
    body = json_body()
    assert body is not None
    fields = _definition(body)
    doc = {"id": monitor_id, **fields, "timestamp": found.get("timestamp") or now_iso(),
           "lastUpdateTime": now_iso(),
           "enabledTime": found.get("enabledTime") if fields["schedule"] == found.get(
               "schedule") else int(time.time() * 1000)}
    for kept in ("gold", "createdBy"):
        if kept in found:
            doc[kept] = found[kept]
    repo.put(doc)
    return json_response({"monitor_id": monitor_id, "status": "UPDATED"})


@bp.get("")
def list_monitors() -> Response:
    return list_entities(repository(MONITOR_INDEX))


@bp.route("/_search", methods=["GET", "POST"])
def search_monitors() -> Response:
    return search_entities(repository(MONITOR_INDEX))


@bp.get("/<entity_id>")
def get_monitor(entity_id: str) -> Response:
    return get_entity(repository(MONITOR_INDEX), entity_id)


@bp.delete("/<entity_id>")
def delete_monitor(entity_id: str) -> Response:
    response = delete_entity(repository(MONITOR_INDEX), entity_id)
    if response.status_code == 200:
        repository(MONITOR_RUN_INDEX).delete_by_query({"term": {"monitorId": entity_id}})
    return response


def _monitor(monitor_id: str) -> dict[str, Any]:
    found = repository(MONITOR_INDEX).get_source(monitor_id)
    if found is None:
        raise NotFound(f"Monitor not found: {monitor_id}")
    return found


@bp.post("/<entity_id>/_run")
def run_monitor(entity_id: str) -> Response:
    monitor = _monitor(entity_id)
    run_id = monitor_run.start(services(), monitor, "manual")
    return json_response({"run_id": run_id, "status": "PROCESSING"})


def _size() -> int:
    raw = request.args.get("size")
    if raw is None:
        return DEFAULT_RUNS
    if not raw.isdigit() or not 1 <= int(raw) <= MAX_RUNS:
        raise BadRequest(f"size must be an integer from 1 to {MAX_RUNS}, got: {raw}")
    return int(raw)


def runs_of(monitor_id: str, size: int) -> dict[str, Any]:
    answer = repository(MONITOR_RUN_INDEX).search({
        "size": size, "track_total_hits": True,
        "sort": [{"timestamp": "desc"}, {"id": "desc"}],
        "query": {"term": {"monitorId": monitor_id}}})
    return {"runs": [h["_source"] for h in answer["hits"]["hits"]],
            "total": int(answer["hits"]["total"]["value"])}


@bp.get("/<entity_id>/runs")
def list_runs(entity_id: str) -> Response:
    _monitor(entity_id)
    return json_response(runs_of(entity_id, _size()))


REPORTS = {"html": (monitor_report.html, "text/html; charset=utf-8"),
           "md": (monitor_report.markdown, "text/markdown; charset=utf-8"),
           "csv": (monitor_report.csv_rows, "text/csv; charset=utf-8")}


@bp.get("/<entity_id>/_report")
def report(entity_id: str) -> Response:
    monitor = _monitor(entity_id)
    fmt = request.args.get("format", "html")
    if fmt not in REPORTS:
        raise BadRequest(f"format must be one of [{', '.join(REPORTS)}], got: {fmt}")
    render, content_type = REPORTS[fmt]
    runs = runs_of(entity_id, _size())["runs"]
    return Response(render(monitor, runs), status=200, content_type=content_type)
