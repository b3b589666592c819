"""The pure pieces of the monitors benchmark (workbench/bench/monitors.py) on hand-made runs: the
judge's grades, the gold set, the simulated runs and their states, the delay to an ALERT, the
pairs never rated before; and docs/performance.md's table against the recorded monitors.json."""

from __future__ import annotations

import json
from pathlib import Path

from workbench.bench.monitors import (
    Scenario,
    SimRun,
    gold_pairs,
    hybrid_grades,
    new_pairs,
    runs_until_alert,
    simulate,
)
from workbench.monitors.decision import Rule

REPO = Path(__file__).resolve().parents[3]
QUERIES = [f"q{i:02d}" for i in range(20)]
GOOD = {q: 0.5 + 0.02 * i for i, q in enumerate(QUERIES)}
RULE = Rule("NDCG@10", drop=0.01, min_queries=5)


def test_people_win_and_the_reference_judge_fills_the_rest_on_their_scale() -> None:
    grades = hybrid_grades({"a": 2.0, "b": 0.0}, {"a": 1.0, "b": 1.0, "c": 0.5, "d": 0.1})
    # c: 0.5 x 3 = 1.5 rounds to 2 (half to even); d: 0.3 rounds to 0
    assert grades == {"a": 2.0, "b": 0.0, "c": 2.0, "d": 0.0}


def test_the_gold_set_is_the_first_pairs_by_query_then_rank() -> None:
    results = {"b": ["b1", "b2"], "a": ["a1", "a2", "a3"]}
    assert gold_pairs(["b", "a"], results, 4) == [("a", "a1"), ("a", "a2"), ("a", "a3"),
                                                  ("b", "b1")]


def test_an_unchanged_panel_never_alerts_and_a_clear_drop_alerts_at_its_second_run() -> None:
    same = simulate(Scenario(GOOD, GOOD), "panel", RULE, runs=12, seed=1)
    assert [r.state for r in same] == ["OK"] * 12 and all(r.queries == 20 for r in same)
    worse = {q: v - 0.1 + (0.01 if i % 2 else 0.0) for i, (q, v) in enumerate(GOOD.items())}
    runs = simulate(Scenario(GOOD, worse, swap_at=5), "panel", RULE, runs=8, seed=1)
    assert [r.state for r in runs] == ["OK"] * 5 + ["ALERT"] * 3
    assert [r.flagged for r in runs] == [False] * 4 + [True] * 4
    assert runs_until_alert(runs, 5) == 2


def test_samples_draw_their_size_and_fresh_ones_are_never_paired() -> None:
    sample = simulate(Scenario(GOOD, GOOD), "sample", RULE, runs=3, seed=7, size=8)
    assert [r.queries for r in sample] == [8, 8, 8]
    worse = {q: v - 0.3 for q, v in GOOD.items()}
    fresh = simulate(Scenario(GOOD, worse, swap_at=3), "fresh", RULE, runs=4, seed=7, size=8)
    assert [r.state for r in fresh] == ["OK", "OK", "OK", "ALERT"]


def test_a_moved_gold_set_is_judge_drift_whatever_the_rule_says() -> None:
    gold = {("q", str(i)): 3.0 for i in range(10)}
    moved = {**gold, ("q", "0"): 0.0, ("q", "1"): 0.0, ("q", "2"): 1.0}  # 3 of 10 > 0.2
    lower = {q: v - 0.3 for q, v in GOOD.items()}
    runs = simulate(Scenario(GOOD, lower, 3, gold, moved), "panel", RULE, runs=5, seed=0)
    assert [r.state for r in runs] == ["OK", "OK", "JUDGE_DRIFT", "JUDGE_DRIFT", "JUDGE_DRIFT"]
    assert [r.rule_state for r in runs] == ["OK", "OK", "OK", "ALERT", "ALERT"]
    kept = {**gold, ("q", "0"): 0.0, ("q", "1"): 0.0}  # 2 of 10 is not more than 0.2
    assert all(r.state != "JUDGE_DRIFT"
               for r in simulate(Scenario(GOOD, GOOD, 3, gold, kept), "panel", RULE, 5, 0))


def test_runs_until_alert_counts_the_swapped_run_as_one() -> None:
    ok, alert = SimRun("OK", "OK", False, 1, None), SimRun("ALERT", "ALERT", True, 1, 0.0)
    assert runs_until_alert([ok, ok, alert], 2) == 2
    assert runs_until_alert([ok, alert, alert], 2) == 1
    assert runs_until_alert([alert, ok, ok], 2) is None


def test_only_pairs_never_rated_before_are_new() -> None:
    results = {"a": ["1", "2"], "b": ["3"], "c": ["4", "5"]}
    changed = {"a": ["1", "9"], "b": ["3"], "c": ["4", "5"]}
    assert new_pairs([["a", "b"], ["a", "c"], ["a"]], [results, results, changed]) == \
        [(3, 3), (4, 2), (2, 1)]


def test_the_performance_page_quotes_the_recorded_run() -> None:
    report = json.loads((REPO / "scripts" / "bench" / "results" / "monitors.json").read_text())
    page = (REPO / "docs" / "performance.md").read_text()
    for mode in ("panel", "sample", "fresh"):
        alarms = report["false_alarms"][mode]["alerts_per_50_runs"]
        detect = report["detection"][mode]
        row = (f"| `{mode}` | {alarms['mean']:.2f} (max {alarms['max']}) | "
               f"{detect['worse_0.05']['within_2_runs']:.0%} | "
               f"{_delay(detect['worse_0.05']['runs_until_alert'])} | "
               f"{detect['worse_0.02']['within_2_runs']:.0%} | "
               f"{_delay(detect['worse_0.02']['runs_until_alert'])} |")
        assert row in page, row
    for worse, margin in report["margins"].items():
        assert f"`{worse}`: {margin['judge']:.4f}" in page


def _delay(figure: dict[str, object]) -> str:
    mean = figure["mean"]
    text = "—" if mean is None else f"{mean:.1f}"
    return f"{text} ({figure['never']} never)" if figure["never"] else text
