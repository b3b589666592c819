"""A monitor's decision rule (workbench/monitors/decision.py) on hand-worked runs; every p-value
is checked against the t distribution of scipy.stats at the statistic worked out by hand."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from workbench.monitors.decision import (
    Drift,
    Rule,
    RunValues,
    baseline_runs,
    decide,
    judge_drift,
)

GOOD = {"a": 0.8, "b": 0.6, "c": 0.7, "d": 0.5}
# 0.2, 0.1, 0.2, 0.1 lower: mean difference 0.15, standard deviation sqrt(0.01 / 3)
LOW = {"a": 0.6, "b": 0.5, "c": 0.5, "d": 0.4}
SD = math.sqrt(0.01 / 3)


def rule(**kw: object) -> Rule:
    return Rule(**{"metric": "NDCG@10", "drop": 0.05, "min_queries": 4, **kw})  # type: ignore[arg-type]


def run(run_id: str, values: dict[str, float], judged: float = 1.0,
        flagged: bool = False) -> RunValues:
    return RunValues(run_id, values, judged, flagged)


def test_a_clear_drop_is_flagged_but_one_flagged_run_is_not_an_alert() -> None:
    d = decide(rule(), run("r2", LOW), [run("r1", GOOD)])
    t = 0.15 / (SD / 2)  # = 3 * sqrt(3) = 5.196, 3 degrees of freedom
    assert d.p_value == pytest.approx(stats.t.sf(t, 3), rel=1e-9)
    assert d.p_value == pytest.approx(0.00692, abs=5e-5)
    assert (d.state, d.flagged, d.consecutive, d.shared_queries) == ("OK", True, 1, 4)
    assert d.delta == pytest.approx(-0.15)
    assert "flagged 1 of 2 consecutive" in d.reason and "paired t on 4 shared" in d.reason


def test_two_consecutive_flagged_runs_alert() -> None:
    # the flagged run r2 stays out of the baseline: r3 is still compared with r1
    d = decide(rule(), run("r3", LOW), [run("r1", GOOD), run("r2", LOW, flagged=True)])
    assert (d.state, d.flagged, d.consecutive) == ("ALERT", True, 2)
    assert d.p_value == pytest.approx(stats.t.sf(3 * math.sqrt(3), 3), rel=1e-9)


def test_an_unflagged_run_between_breaks_the_streak() -> None:
    history = [run("r1", GOOD), run("r2", LOW, flagged=True), run("r3", GOOD)]
    d = decide(rule(), run("r4", LOW), history)
    assert (d.state, d.consecutive) == ("OK", 1)


def test_an_inconclusive_run_neither_breaks_nor_extends_the_streak() -> None:
    history = [run("r1", GOOD), run("r2", LOW, flagged=True), run("r3", GOOD, judged=0.5)]
    d = decide(rule(), run("r4", LOW), history)
    assert (d.state, d.consecutive) == ("ALERT", 2)


def test_a_drop_within_the_tolerance_is_not_flagged() -> None:
    # certainly lower (p 0.007), but by 0.15, within the tolerated 0.2
    d = decide(rule(drop=0.2), run("r2", LOW), [run("r1", GOOD)])
    assert d.p_value == pytest.approx(stats.t.sf(3 * math.sqrt(3), 3), rel=1e-9)
    assert (d.state, d.flagged, d.consecutive) == ("OK", False, 0)


def test_a_drop_beyond_the_tolerance_by_chance_is_not_flagged() -> None:
    # differences 0.3, -0.1, 0.2, 0.0: mean 0.1 > 0.05, sd sqrt(0.1 / 3), t = 0.1 / (sd / 2)
    noisy = {"a": 0.5, "b": 0.7, "c": 0.5, "d": 0.5}
    d = decide(rule(), run("r2", noisy), [run("r1", GOOD)])
    t = 0.1 / (math.sqrt(0.1 / 3) / 2)
    assert d.p_value == pytest.approx(stats.t.sf(t, 3), rel=1e-9)
    assert d.p_value > 0.05 and d.delta == pytest.approx(-0.1)
    assert (d.state, d.flagged) == ("OK", False)


def test_a_relative_drop_tolerates_a_share_of_the_baseline_mean() -> None:
    # baseline mean 0.65: 10 % of it is 0.065
    d = decide(rule(drop=0.1, relative=True), run("r2", LOW), [run("r1", GOOD)])
    assert d.flagged and "tolerated drop 0.0650" in d.reason
    # 30 % of 0.65 = 0.195 > 0.15: not flagged
    assert not decide(rule(drop=0.3, relative=True), run("r2", LOW), [run("r1", GOOD)]).flagged


def test_a_pinned_baseline_is_the_one_compared_with() -> None:
    history = [run("r1", GOOD), run("r2", LOW), run("r3", LOW)]
    # against the last two runs (r2, r3, not flagged) nothing moved: every difference is 0
    moving = decide(rule(previous_runs=2), run("r4", LOW), history)
    assert (moving.state, moving.flagged, moving.p_value, moving.delta) == ("OK", False, 1.0, 0.0)
    pinned = decide(rule(pinned_run="r1"), run("r4", LOW), history)
    assert pinned.flagged and pinned.p_value == pytest.approx(stats.t.sf(3 * math.sqrt(3), 3))
    assert "against 1 baseline run(s)" in pinned.reason
    missing = decide(rule(pinned_run="gone"), run("r4", LOW), history)
    assert (missing.state, missing.reason) == (
        "INCONCLUSIVE", "pinned run gone is not among the completed runs")


def test_the_baseline_is_the_last_n_conclusive_unflagged_runs() -> None:
    history = [run(f"r{i}", GOOD) for i in range(6)]
    history.insert(4, run("low-judged", GOOD, judged=0.1))
    history.insert(5, run("flagged", LOW, flagged=True))
    assert [r.run_id for r in baseline_runs(rule(previous_runs=3), history) or []] == \
        ["r3", "r4", "r5"]


def test_the_baseline_value_of_a_query_is_its_mean_over_the_baseline_runs() -> None:
    # a: (0.8 + 0.4) / 2 = 0.6, the others as GOOD: differences 0, 0.1, 0.2, 0.1
    d = decide(rule(), run("r3", LOW), [run("r1", GOOD), run("r2", {**GOOD, "a": 0.4})])
    diffs = [0.0, 0.1, 0.2, 0.1]
    mean, sd = 0.1, math.sqrt(sum((x - 0.1) ** 2 for x in diffs) / 3)
    assert d.delta == pytest.approx(-0.1)
    assert d.p_value == pytest.approx(stats.t.sf(mean / (sd / 2), 3), rel=1e-9)


def test_equal_values_are_equal_despite_rounding() -> None:
    # the mean of three 0.1s is 0.10000000000000002: no difference, no test
    history = [run(f"r{i}", dict.fromkeys("abcd", 0.1)) for i in range(3)]
    d = decide(rule(drop=0.0), run("r3", dict.fromkeys("abcd", 0.1)), history)
    assert (d.flagged, d.p_value, d.delta) == (False, 1.0, 0.0)


def test_low_judged_and_few_queries_are_inconclusive() -> None:
    low = decide(rule(), run("r2", LOW, judged=0.7), [run("r1", GOOD)])
    assert (low.state, low.flagged, low.p_value, low.reason) == (
        "INCONCLUSIVE", False, None, "Judged 0.700 is below the floor 0.8")
    few = decide(rule(), run("r2", {"x": 0.1, "y": 0.2, "z": 0.0}), [run("r1", GOOD)])
    assert (few.state, few.reason, few.shared_queries) == (
        "INCONCLUSIVE", "3 queries, fewer than 4", 0)


def test_a_first_run_has_no_baseline() -> None:
    assert decide(rule(), run("r1", GOOD), []) == \
        decide(rule(), run("r1", GOOD), [run("r0", GOOD, judged=0.2)])
    d = decide(rule(), run("r1", GOOD), [])
    assert (d.state, d.flagged, d.delta, d.reason) == ("OK", False, None, "no baseline yet")


def test_no_shared_queries_fall_back_to_welch() -> None:
    current = {"e": 0.4, "f": 0.3, "g": 0.5, "h": 0.2}
    d = decide(rule(), run("r2", current), [run("r1", GOOD)])
    # means 0.65 and 0.35, both variances 0.05 / 3 over 4 queries: Welch's df = 6
    se = math.sqrt(2 * (0.05 / 3) / 4)
    t = (0.65 - 0.35) / se
    assert d.p_value == pytest.approx(stats.t.sf(t, 6), rel=1e-9)
    assert (d.state, d.flagged, d.shared_queries) == ("OK", True, 0)
    assert d.delta == pytest.approx(-0.3)
    assert "Welch t on 4 against 4 queries (0 shared)" in d.reason


def test_too_few_shared_queries_are_tested_unpaired() -> None:
    current = {"a": 0.4, "f": 0.3, "g": 0.5, "h": 0.2}  # only "a" shared, 1 < 4
    d = decide(rule(), run("r2", current), [run("r1", GOOD)])
    assert d.shared_queries == 1 and "Welch" in d.reason


def test_judge_drift_counts_the_pairs_that_moved() -> None:
    then = {("q", "a"): 3.0, ("q", "b"): 2.0, ("q", "c"): 0.0, ("r", "a"): 1.0,
            ("r", "b"): 1.0, ("only", "then"): 3.0}
    now = {("q", "a"): 2.0, ("q", "b"): 2.0, ("q", "c"): 1.0, ("r", "a"): 1.0,
           ("r", "b"): 1.0, ("only", "now"): 0.0}
    # on a 0-3 scale one grade is 0.333 > 0.25: two of five shared pairs changed, 0.4 > 0.2
    assert judge_drift(then, now, scale=3.0) == Drift(pairs=5, changed=2, drift=True)
    # on a 0-10 scale one grade is 0.1: nothing changed
    assert judge_drift(then, now, scale=10.0) == Drift(pairs=5, changed=0, drift=False)
    # one of five (exactly the share, 0.2) is not drift
    assert judge_drift(then, {**now, ("q", "c"): 0.0}, scale=3.0) == Drift(5, 1, False)
    assert judge_drift(then, then) == Drift(6, 0, False)


def test_judge_drift_tolerance_is_strict_and_an_empty_set_is_no_drift() -> None:
    assert judge_drift({("q", "a"): 0.5}, {("q", "a"): 0.75}) == Drift(1, 0, False)
    assert judge_drift({("q", "a"): 0.5}, {("q", "a"): 0.76}) == Drift(1, 1, True)
    assert judge_drift({}, {("q", "a"): 1.0}) == Drift(0, 0, False)


def test_the_p_values_are_scipys_paired_and_welch_tests_on_the_same_numbers() -> None:
    rng = np.random.default_rng(46)
    before = rng.uniform(0.2, 1.0, 40)
    after = np.clip(before - 0.04 + rng.normal(0, 0.1, 40), 0, 1)
    queries = [f"q{i}" for i in range(40)]
    history = [run("r1", dict(zip(queries, before.tolist(), strict=True)))]
    paired = decide(rule(), run("r2", dict(zip(queries, after.tolist(), strict=True))), history)
    assert paired.p_value == pytest.approx(
        stats.ttest_rel(before, after, alternative="greater").pvalue, rel=1e-9)
    assert paired.shared_queries == 40
    fresh = {f"new{i}": v for i, v in enumerate(after.tolist())}
    welch = decide(rule(), run("r2", fresh), history)
    assert welch.p_value == pytest.approx(
        stats.ttest_ind(before, after, equal_var=False, alternative="greater").pvalue, rel=1e-9)
    assert welch.delta == pytest.approx(after.mean() - before.mean())
