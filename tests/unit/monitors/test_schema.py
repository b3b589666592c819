"""The monitor body (workbench/schemas/monitors.py): defaults, and the first bad field named,
with the cluster's answers given by stand-in rules."""

from __future__ import annotations

from typing import Any

import pytest

from workbench.errors import BadRequest
from workbench.schemas.body import load
from workbench.schemas.monitors import MonitorRules, MonitorSchema, window_seconds


def _none(*_: Any) -> None:
    return None


def rules(**given: Any) -> MonitorRules:
    fields = dict.fromkeys(("search_configuration", "query_set", "judgment", "model", "judge",
                            "metric", "run"), _none)
    return MonitorRules(**{**fields, **given})


BODY = {"name": "n", "searchConfigurationId": "c", "queries": {"querySetId": "p"},
        "judge": {"judge": "token_overlap"}}


def test_defaults() -> None:
    loaded = load(MonitorSchema(rules()), dict(BODY))
    assert loaded == {"name": "n", "description": "", "searchConfigurationId": "c",
                      "queries": {"querySetId": "p"},
                      "judge": {"judge": "token_overlap", "judgeOptions": {}},
                      "judgmentList": [], "k": 10, "metrics": ["NDCG@10"], "schedule": None,
                      "alerts": [], "goldPairs": 20, "budget": None}


@pytest.mark.parametrize(("change", "reason"), [
    ({"queries": {"ubi": {"sampling": "topn", "size": 0}}},
     "queries.ubi.size must be an integer from 1 to 10000, got: 0"),
    ({"queries": {"querySetId": "p", "extra": 1}},
     "queries.extra is not a field of queries; allowed: [querySetId, ubi]"),
    ({"judge": "token_overlap"}, "judge must be an object"),
    ({"alerts": [{"metric": "NDCG@10", "drop": 0}]},
     "alerts[0].drop must be a number greater than 0.0 to 1.0, got: 0"),
    ({"alerts": [{"metric": "NDCG@10", "drop": 0.1, "baseline": {"previousRuns": 0}}]},
     "alerts[0].baseline.previousRuns must be an integer from 1 to 100, got: 0"),
    ({"alerts": [{"metric": "NDCG@10", "drop": 0.1, "baseline": {}}]},
     'alerts[0].baseline must be {"previousRuns": n} or {"runId": "<a run id>"}'),
    ({"alerts": [{"metric": "NDCG@10", "drop": 0.1, "minJudged": 1.5}]},
     "alerts[0].minJudged must be a number from 0.0 to 1.0, got: 1.5"),
    ({"schedule": {"cron": "0 3 * * *", "timezone": "CET"}},
     "schedule.timezone must be UTC, got: CET"),
    ({"budget": {"maxCost": -1}}, "budget.maxCost must be a number greater than 0.0 to "
                                  "1000000000000.0, got: -1"),
])
def test_the_first_bad_field_is_named(change: dict[str, Any], reason: str) -> None:
    with pytest.raises(BadRequest) as caught:
        load(MonitorSchema(rules()), {**BODY, **change})
    assert caught.value.reason == reason


def test_a_rule_of_the_route_is_asked_only_for_a_valid_value() -> None:
    asked: list[str] = []

    def config(config_id: str) -> str | None:
        asked.append(config_id)
        return f"searchConfigurationId: search configuration [{config_id}] does not exist"

    with pytest.raises(BadRequest) as caught:
        load(MonitorSchema(rules(search_configuration=config)), {**BODY,
                                                                 "searchConfigurationId": "x"})
    assert caught.value.reason == "searchConfigurationId: search configuration [x] does not exist"
    with pytest.raises(BadRequest):
        load(MonitorSchema(rules(search_configuration=config)), {**BODY,
                                                                 "searchConfigurationId": 5})
    assert asked == ["x"]


def test_window() -> None:
    assert (window_seconds("7d"), window_seconds("12h")) == (604800, 43200)
