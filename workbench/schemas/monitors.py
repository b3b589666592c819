"""The body of a monitor (``PUT /monitors``, a workbench extension: docs/differences.md).

Every field is checked in the order declared here, and the first bad one is the 400, its
message opening with the field's path (``queries.ubi.window must be ...``). Checks that need
the cluster (the search configuration, query set, judgment lists and model exist; the judge
can be built) are the route's ``MonitorRules``, asked only once the body's own shape is valid
up to that field.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from marshmallow import ValidationError

from workbench.schemas.body import Step, StepSchema, Text
from workbench.schemas.query_sets import DEFAULT_UBI_INDEX, SAMPLERS
from workbench.schemas.schedules import cron_error
from workbench.schemas.text import DESCRIPTION_LIMIT, NAME_LIMIT

DEFAULT_K = 10
MAX_K = 100
DEFAULT_WINDOW = "7d"
DEFAULT_UBI_SIZE = 50
MAX_UBI_SIZE = 10_000
DEFAULT_GOLD_PAIRS = 20
MAX_GOLD_PAIRS = 1_000
MAX_ALERTS = 20
WINDOW = re.compile(r"([1-9][0-9]{0,4})([dh])")
TIMEZONES = ("UTC",)

#: an alert rule's defaults (docs/monitors.md; workbench/monitors/decision.py ``Rule``)
ALERT_DEFAULTS: dict[str, Any] = {"drop": None, "relative": False, "persistence": 2,
                                  "minJudged": 0.8, "minQueries": 10, "alpha": 0.05}
DEFAULT_PREVIOUS_RUNS = 5


@dataclass(frozen=True)
class MonitorRules:
    """What the route checks against the cluster; each returns an error message or None.

    ``metric``: whether a name is a pointwise metric at ``k`` (``None`` when it is)."""

    search_configuration: Callable[[str], str | None]
    query_set: Callable[[str], str | None]
    judgment: Callable[[str], str | None]
    model: Callable[[str], str | None]
    judge: Callable[[str, dict[str, Any]], str | None]
    metric: Callable[[str, int], str | None]
    run: Callable[[str], str | None]


def _object(value: Any, path: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise ValidationError(f"{path} must be an object")
    return value


def _string(value: Any, path: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ValidationError(f"{path} must be a non-empty string")
    return value.strip()


def _int(value: Any, path: str, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise ValidationError(f"{path} must be an integer from {low} to {high}, got: {value}")
    return value


def _number(value: Any, path: str, low: float, high: float, open_low: bool = False) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) \
            or not math.isfinite(value) or not (low < value if open_low else low <= value) \
            or not value <= high:
        bound = f"greater than {low}" if open_low else f"from {low}"
        raise ValidationError(f"{path} must be a number {bound} to {high}, got: {value}")
    return float(value)


def _bool(value: Any, path: str) -> bool:
    if not isinstance(value, bool):
        raise ValidationError(f"{path} must be true or false, got: {value}")
    return value


def _unknown(given: dict[str, Any], allowed: tuple[str, ...], path: str) -> None:
    extra = sorted(set(given) - set(allowed))
    if extra:
        raise ValidationError(f"{path}.{extra[0]} is not a field of {path}; allowed: "
                              f"[{', '.join(allowed)}]")


def window_seconds(window: str) -> int:
    """``7d`` -> 604800, ``12h`` -> 43200."""
    match = WINDOW.fullmatch(window)
    assert match is not None
    return int(match.group(1)) * (86400 if match.group(2) == "d" else 3600)


class _Step(Step):
    @property
    def monitor_rules(self) -> MonitorRules:
        rules: MonitorRules = self.rules
        return rules


def _fail_if(message: str | None) -> None:
    if message:
        raise ValidationError(message)


class _SearchConfiguration(_Step):
    def check(self, value: Any) -> str:
        config_id = _string(value, "searchConfigurationId")
        _fail_if(self.monitor_rules.search_configuration(config_id))
        return config_id


class _Queries(_Step):
    def check(self, value: Any) -> dict[str, Any]:
        if value is None:
            raise ValidationError("queries is required: an object with querySetId and/or ubi")
        queries = _object(value, "queries")
        _unknown(queries, ("querySetId", "ubi"), "queries")
        if queries.get("querySetId") is None and queries.get("ubi") is None:
            raise ValidationError("queries must have querySetId (a fixed panel) and/or ubi "
                                  "(a sample of recent UBI queries)")
        out: dict[str, Any] = {}
        if queries.get("querySetId") is not None:
            set_id = _string(queries["querySetId"], "queries.querySetId")
            _fail_if(self.monitor_rules.query_set(set_id))
            out["querySetId"] = set_id
        if queries.get("ubi") is not None:
            out["ubi"] = self._ubi(_object(queries["ubi"], "queries.ubi"))
        return out

    @staticmethod
    def _ubi(ubi: dict[str, Any]) -> dict[str, Any]:
        path = "queries.ubi"
        _unknown(ubi, ("sampling", "size", "window", "ubiQueriesIndex"), path)
        sampling = ubi.get("sampling")
        if sampling not in SAMPLERS:
            raise ValidationError(f"{path}.sampling must be one of [{', '.join(SAMPLERS)}], "
                                  f"got: {sampling}")
        size = _int(ubi.get("size", DEFAULT_UBI_SIZE), f"{path}.size", 1, MAX_UBI_SIZE)
        window = ubi.get("window", DEFAULT_WINDOW)
        if not isinstance(window, str) or WINDOW.fullmatch(window) is None:
            raise ValidationError(f"{path}.window must be a number of days or hours such as "
                                  f"7d or 12h, got: {window}")
        index = _string(ubi.get("ubiQueriesIndex", DEFAULT_UBI_INDEX),
                        f"{path}.ubiQueriesIndex")
        return {"sampling": sampling, "size": size, "window": window,
                "ubiQueriesIndex": index}


class _Judge(_Step):
    def check(self, value: Any) -> dict[str, Any]:
        if value is None:
            raise ValidationError("judge is required: {\"modelId\": ...} (an LLM) or "
                                  "{\"judge\": \"token_overlap\", \"judgeOptions\": {...}}")
        judge = _object(value, "judge")
        if ("modelId" in judge) == ("judge" in judge):
            raise ValidationError("judge must have exactly one of modelId (an LLM) and judge "
                                  "(a reference judge)")
        if "modelId" in judge:
            _unknown(judge, ("modelId", "llmJudgmentRatingType", "contextFields"), "judge")
            model_id = _string(judge["modelId"], "judge.modelId")
            _fail_if(self.monitor_rules.model(model_id))
            out: dict[str, Any] = {"modelId": model_id}
            if judge.get("llmJudgmentRatingType") is not None:
                out["llmJudgmentRatingType"] = _string(judge["llmJudgmentRatingType"],
                                                       "judge.llmJudgmentRatingType")
            if judge.get("contextFields") is not None:
                out["contextFields"] = _strings(judge["contextFields"], "judge.contextFields")
            return out
        _unknown(judge, ("judge", "judgeOptions", "contextFields"), "judge")
        name = _string(judge["judge"], "judge.judge")
        options = _object(judge.get("judgeOptions") or {}, "judge.judgeOptions")
        _fail_if(self.monitor_rules.judge(name, options))
        out = {"judge": name, "judgeOptions": options}
        if judge.get("contextFields") is not None:
            out["contextFields"] = _strings(judge["contextFields"], "judge.contextFields")
        return out


def _strings(value: Any, path: str) -> list[str]:
    if not isinstance(value, list):
        raise ValidationError(f"{path} must be a list of strings")
    return [_string(item, f"{path}[{n}]") for n, item in enumerate(value)]


class _JudgmentList(_Step):
    def check(self, value: Any) -> list[str]:
        ids = _strings([] if value is None else value, "judgmentList")
        for judgment_id in ids:
            _fail_if(self.monitor_rules.judgment(judgment_id))
        return ids


class _K(_Step):
    def check(self, value: Any) -> int:
        return DEFAULT_K if value is None else _int(value, "k", 1, MAX_K)


class _Metrics(_Step):
    def check(self, value: Any) -> list[str]:
        k = self.loaded.get("k", DEFAULT_K)
        if value is None:
            return [f"NDCG@{k}"]
        names = _strings(value, "metrics")
        if not names:
            raise ValidationError("metrics must name at least one metric")
        for name in names:
            _fail_if(self.monitor_rules.metric(name, k))
        return list(dict.fromkeys(names))


class _Schedule(_Step):
    def check(self, value: Any) -> dict[str, Any] | None:
        if value is None:
            return None
        schedule = _object(value, "schedule")
        _unknown(schedule, ("cron", "timezone"), "schedule")
        cron = _string(schedule.get("cron"), "schedule.cron")
        error = cron_error(cron, 0, datetime.now(UTC))
        if error:
            raise ValidationError(f"schedule.cron: {error}")
        timezone = schedule.get("timezone", "UTC")
        if timezone not in TIMEZONES:
            raise ValidationError(f"schedule.timezone must be UTC, got: {timezone}")
        return {"cron": cron, "timezone": timezone}


class _Alerts(_Step):
    def check(self, value: Any) -> list[dict[str, Any]]:
        if value is None:
            return []
        if not isinstance(value, list):
            raise ValidationError("alerts must be a list of alert rules")
        if len(value) > MAX_ALERTS:
            raise ValidationError(f"alerts may have at most {MAX_ALERTS} rules, got: "
                                  f"{len(value)}")
        metrics = self.loaded.get("metrics") or []
        return [self._rule(_object(item, f"alerts[{n}]"), f"alerts[{n}]", metrics)
                for n, item in enumerate(value)]

    def _rule(self, rule: dict[str, Any], path: str, metrics: list[str]) -> dict[str, Any]:
        _unknown(rule, ("metric", "drop", "relative", "baseline", "persistence", "minJudged",
                        "minQueries", "alpha"), path)
        metric = _string(rule.get("metric"), f"{path}.metric")
        if metric not in metrics:
            raise ValidationError(f"{path}.metric must be one of the monitor's metrics "
                                  f"[{', '.join(metrics)}], got: {metric}")
        if rule.get("drop") is None:
            raise ValidationError(f"{path}.drop is required: the drop that matters")
        relative = _bool(rule.get("relative", False), f"{path}.relative")
        drop = _number(rule["drop"], f"{path}.drop", 0.0, 1.0, open_low=True)
        baseline = _object(rule.get("baseline", {"previousRuns": DEFAULT_PREVIOUS_RUNS}),
                           f"{path}.baseline")
        if len(baseline) != 1 or next(iter(baseline)) not in ("previousRuns", "runId"):
            raise ValidationError(f"{path}.baseline must be {{\"previousRuns\": n}} or "
                                  "{\"runId\": \"<a run id>\"}")
        if "previousRuns" in baseline:
            checked: dict[str, Any] = {
                "previousRuns": _int(baseline["previousRuns"], f"{path}.baseline.previousRuns",
                                     1, 100)}
        else:
            run_id = _string(baseline["runId"], f"{path}.baseline.runId")
            if self.monitor_rules.run(run_id):
                raise ValidationError(f"{path}.baseline.runId: run [{run_id}] does not exist")
            checked = {"runId": run_id}
        return {
            "metric": metric, "drop": drop, "relative": relative, "baseline": checked,
            "persistence": _int(rule.get("persistence", 2), f"{path}.persistence", 1, 100),
            "minJudged": _number(rule.get("minJudged", 0.8), f"{path}.minJudged", 0.0, 1.0),
            "minQueries": _int(rule.get("minQueries", 10), f"{path}.minQueries", 1, 100_000),
            "alpha": _number(rule.get("alpha", 0.05), f"{path}.alpha", 0.0, 0.5,
                             open_low=True),
        }


class _GoldPairs(_Step):
    def check(self, value: Any) -> int:
        return DEFAULT_GOLD_PAIRS if value is None else _int(value, "goldPairs", 0,
                                                             MAX_GOLD_PAIRS)


class _Budget(_Step):
    def check(self, value: Any) -> dict[str, Any] | None:
        if value is None:
            return None
        budget = _object(value, "budget")
        _unknown(budget, ("maxTokens", "maxCost"), "budget")
        out: dict[str, Any] = {}
        if budget.get("maxTokens") is not None:
            out["maxTokens"] = _int(budget["maxTokens"], "budget.maxTokens", 1, 10**12)
        if budget.get("maxCost") is not None:
            out["maxCost"] = _number(budget["maxCost"], "budget.maxCost", 0.0, 1e12,
                                     open_low=True)
        return out or None


class MonitorSchema(StepSchema):
    """``PUT /monitors``: the fields of docs/monitors.md, loaded with their defaults."""

    name = Text("name", NAME_LIMIT)
    description = Text("description", DESCRIPTION_LIMIT, optional=True)
    searchConfigurationId = _SearchConfiguration(data_key="searchConfigurationId")
    queries = _Queries(data_key="queries")
    judge = _Judge(data_key="judge")
    judgmentList = _JudgmentList(data_key="judgmentList")
    k = _K(data_key="k")
    metrics = _Metrics(data_key="metrics")
    schedule = _Schedule(data_key="schedule")
    alerts = _Alerts(data_key="alerts")
    goldPairs = _GoldPairs(data_key="goldPairs")
    budget = _Budget(data_key="budget")

    def __init__(self, rules: MonitorRules, **kwargs: Any) -> None:
        super().__init__(rules=rules, **kwargs)
