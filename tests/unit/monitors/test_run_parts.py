"""The pure parts of a monitor run (workbench/monitors/run.py, scheduling.py) on
hand-worked cases."""

from __future__ import annotations

import math
from datetime import UTC, datetime

import pytest

from workbench.judgments.retrieval import Target
from workbench.monitors import run, scheduling
from workbench.querysets import sampling
from workbench.querysets.entries import QueryEntry

# Student's t, 97.5 % quantile, 2 degrees of freedom (any table): 4.302653
T_975_2 = 4.302653


def target(text: str, doc_ids: list[str]) -> Target:
    return Target(QueryEntry(text), [(d, "{}") for d in doc_ids])


def test_mean_and_t_interval() -> None:
    summary = run._mean_ci([0.2, 0.4, 0.9])
    mean = 0.5
    sd = math.sqrt(((0.3 ** 2) + (0.1 ** 2) + (0.4 ** 2)) / 2)  # 0.3605551
    half = T_975_2 * sd / math.sqrt(3)
    assert summary["n"] == 3 and summary["mean"] == pytest.approx(mean)
    assert summary["ci95"] == pytest.approx([mean - half, mean + half], abs=1e-6)
    assert run._mean_ci([0.7]) == {"mean": 0.7, "ci95": None, "n": 1}
    assert run._mean_ci([]) == {"mean": None, "ci95": None, "n": 0}


def test_measure_uses_every_known_rating_of_the_query() -> None:
    """"q" shows [x, y, z] rated [1, 0, (unrated)], and w (rated 1 by an earlier run) is not
    shown: DCG@3 = 1, ideal [1, 1, 0] = 1 + 1/log2(3); Judged@3 = 2/3. A query with no hits is
    left out."""
    targets = [target("q", ["x", "y", "z"]), target("empty", [])]
    queries, summary = run.measure(targets, {"q": {"x": 1.0, "y": 0.0, "w": 1.0}}, 3,
                                   ["NDCG@3", "Precision@3"])
    assert queries == [{"query": "q", "docIds": ["x", "y", "z"], "values": {
        "NDCG@3": pytest.approx(1 / (1 + 1 / math.log2(3))),
        "Precision@3": pytest.approx(1 / 3), "Judged@3": pytest.approx(2 / 3)}}]
    assert summary["Judged@3"]["n"] == 1 and list(summary) == ["NDCG@3", "Precision@3",
                                                               "Judged@3"]


def test_the_gold_set_is_the_first_rated_pairs_by_query_then_rank() -> None:
    targets = [target("a", ["1", "2", "3"]), target("b", ["4", "5"])]
    ratings = {"a": {"1": 1.0, "3": 0.0}, "b": {"4": 1.0, "5": 1.0}}
    assert [(p["query"], p["docId"], p["rating"]) for p in run.pick_gold(targets, ratings, 3)
            ] == [("a", "1", 1.0), ("a", "3", 0.0), ("b", "4", 1.0)]


def test_the_runs_state_is_the_worst_rule_unless_the_judge_drifted() -> None:
    assert run.overall([], False) == "OK"
    assert run.overall([{"state": "OK"}, {"state": "INCONCLUSIVE"}], False) == "INCONCLUSIVE"
    assert run.overall([{"state": "ALERT"}, {"state": "INCONCLUSIVE"}], False) == "ALERT"
    assert run.overall([{"state": "ALERT"}], True) == "JUDGE_DRIFT"


def test_a_stored_run_as_a_rule_reads_it() -> None:
    stored = {"id": "r1", "queries": [{"query": "a", "values": {"NDCG@3": 0.5}},
                                      {"query": "b", "values": {"NDCG@3": 0.25}}],
              "metrics": {"Judged@3": {"mean": 0.9}},
              "decisions": [{"flagged": False}, {"flagged": True}]}
    values = run.run_values(stored, "NDCG@3", "Judged@3", 1)
    assert (values.run_id, dict(values.values), values.judged, values.flagged) == (
        "r1", {"a": 0.5, "b": 0.25}, 0.9, True)
    assert run.run_values(stored, "NDCG@3", "Judged@3", 5).flagged is False


def test_latest_fire_time() -> None:
    enabled = int(datetime(2026, 1, 1, 2, 59, tzinfo=UTC).timestamp() * 1000)
    assert scheduling.latest_fire("0 3 * * *", enabled,
                                  datetime(2026, 1, 1, 2, 59, 59, tzinfo=UTC)) is None
    # several missed fire times: the last one only
    assert scheduling.latest_fire("0 3 * * *", enabled,
                                  datetime(2026, 1, 4, 3, 0, 5, tzinfo=UTC)) == datetime(
        2026, 1, 4, 3, 0, tzinfo=UTC)


def test_the_window_filter_keeps_the_callers_query_unchanged() -> None:
    assert sampling._wanted(None) is sampling.NON_EMPTY
    assert sampling._wanted("2026-01-01T00:00:00.000Z")["bool"]["filter"] == [
        {"range": {"timestamp": {"gte": "2026-01-01T00:00:00.000Z"}}}]
