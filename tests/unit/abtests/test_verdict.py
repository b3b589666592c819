"""The verdict of an interleaved test (workbench/abtests/verdict.py): a hand-worked example, the
sign test against scipy's ``binomtest``, the query bootstrap and the Dashboards z-test."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest
from scipy.stats import binomtest

from workbench.abtests.verdict import (
    Impression,
    delta_ab,
    outcome,
    sign_test,
    total_clicks_test,
    verdict,
)


def plain(value: Any) -> bool:
    """Only JSON's own Python types (np.float64 is a float subclass, so compare exact types)."""
    if isinstance(value, dict):
        return all(type(k) is str and plain(v) for k, v in value.items())
    if isinstance(value, list):
        return all(plain(v) for v in value)
    return value is None or type(value) in (str, int, float, bool)


def test_outcome() -> None:
    assert outcome(2, 1) == "A"
    assert outcome(0, 3) == "B"
    assert outcome(1, 1) == "tie"
    assert outcome(0, 0) is None


def test_a_hand_worked_verdict() -> None:
    impressions = [
        Impression("q1", 2, 1),  # A wins (2 > 1)
        Impression("q1", 0, 0),  # no click: undecided
        Impression("q2", 1, 1),  # tie
        Impression("q2", 0, 3),  # B wins
        Impression("q3", 1, 0),  # A wins
    ]
    result = verdict(impressions)
    # wins_a = 2, wins_b = 1, ties = 1, decided = 4.
    # Δ = (2 + 1/2) / 4 - 1/2 = 0.625 - 0.5 = 0.125.
    # Sign test: n = 3, k = 2, P[X >= 2] = (3 + 1) / 8 = 1/2, p = min(1, 2 * 1/2) = 1.
    assert {k: result[k] for k in ("impressions", "impressions_with_clicks",
                                   "impressions_without_clicks", "wins_a", "wins_b", "ties")} \
        == {"impressions": 5, "impressions_with_clicks": 4, "impressions_without_clicks": 1,
            "wins_a": 2, "wins_b": 1, "ties": 1}
    assert result["delta_ab"] == 0.125
    assert result["p_value"] == 1.0
    assert result["alpha"] == 0.05
    assert result["significant"] is False
    assert result["winner"] is None
    # q1: 1 A win of 1 decided -> Δ = 1/2. q2: a tie and a B win -> (0 + 1/2)/2 - 1/2 = -1/4.
    # q3: 1 A win -> 1/2. Sorted by impressions (q1 and q2 have 2) then query.
    assert result["per_query"] == [
        {"query": "q1", "impressions": 2, "wins_a": 1, "wins_b": 0, "ties": 0, "delta_ab": 0.5},
        {"query": "q2", "impressions": 2, "wins_a": 0, "wins_b": 1, "ties": 1, "delta_ab": -0.25},
        {"query": "q3", "impressions": 1, "wins_a": 1, "wins_b": 0, "ties": 0, "delta_ab": 0.5},
    ]
    interval = result["confidence_interval"]
    assert interval["level"] == 0.95
    assert -0.5 <= interval["lower"] <= interval["upper"] <= 0.5
    assert result["warning"] == ("Only 4 impressions had a click; at least 100 are needed before "
                                 "the verdict can be trusted.")
    assert set(result) == {
        "impressions", "impressions_with_clicks", "impressions_without_clicks", "wins_a",
        "wins_b", "ties", "delta_ab", "p_value", "alpha", "significant", "winner",
        "confidence_interval", "per_query", "warning",
    }
    assert plain(result)
    json.dumps(result)


def test_no_impressions() -> None:
    result = verdict([])
    assert result["impressions"] == 0
    assert result["delta_ab"] is None
    assert result["p_value"] == 1.0
    assert result["winner"] is None
    assert result["confidence_interval"] == {"level": 0.95, "lower": None, "upper": None}
    assert result["per_query"] == []
    assert plain(result)


def test_only_unclicked_impressions_give_no_interval() -> None:
    result = verdict([Impression("q", 0, 0)] * 5)
    assert result["impressions_without_clicks"] == 5
    assert result["delta_ab"] is None
    assert result["confidence_interval"]["lower"] is None
    assert result["per_query"][0]["delta_ab"] is None


def test_delta_ab() -> None:
    assert delta_ab(0, 0, 0) is None
    assert delta_ab(3, 1, 0) == 0.25
    assert delta_ab(0, 0, 7) == 0.0
    assert delta_ab(0, 2, 0) == -0.5


@pytest.mark.parametrize(("wins_a", "wins_b"), [
    (1, 0), (0, 4), (3, 2), (5, 5), (10, 0), (7, 13), (30, 50), (61, 39), (600, 540),
    (540, 600), (1000, 1000), (5000, 5210),
])
def test_sign_test_is_scipy_s_exact_binomial_test(wins_a: int, wins_b: int) -> None:
    n = wins_a + wins_b
    expected = binomtest(max(wins_a, wins_b), n, 0.5).pvalue
    assert sign_test(wins_a, wins_b) == pytest.approx(expected, rel=1e-9, abs=1e-300)


def test_sign_test_without_decided_impressions() -> None:
    assert sign_test(0, 0) == 1.0


def test_ties_do_not_enter_the_sign_test() -> None:
    wins = [Impression("q", 1, 0)] * 600 + [Impression("q", 0, 1)] * 540
    with_ties = verdict(wins + [Impression("q", 1, 1)] * 400)
    assert with_ties["p_value"] == verdict(wins)["p_value"] == sign_test(600, 540)
    assert with_ties["ties"] == 400
    # p = 0.0800 (binomtest(600, 1140)): not significant at 0.05, whatever the ties.
    assert with_ties["p_value"] == pytest.approx(binomtest(600, 1140, 0.5).pvalue)
    assert with_ties["significant"] is False
    assert with_ties["winner"] is None


def test_a_clear_winner() -> None:
    impressions = [Impression("q", 1, 0)] * 70 + [Impression("q", 0, 1)] * 30
    result = verdict(impressions, min_decided=100)
    assert result["significant"] is True
    assert result["winner"] == "A"
    assert result["warning"] is None
    flipped = verdict([Impression(i.query, i.clicks_b, i.clicks_a) for i in impressions])
    assert flipped["winner"] == "B"
    assert flipped["delta_ab"] == pytest.approx(-result["delta_ab"]) == pytest.approx(-0.2)


def spread_over_queries() -> list[Impression]:
    """60 queries, each with its own mix of wins, losses, ties and unclicked impressions."""
    impressions = []
    for i in range(60):
        query = f"query {i}"
        impressions += [Impression(query, 2, 1)] * (8 + i % 7)
        impressions += [Impression(query, 0, 1)] * (3 + i % 5)
        impressions += [Impression(query, 1, 1)] * (i % 4)
        impressions += [Impression(query, 0, 0)] * (i % 3)
    return impressions


def test_the_bootstrap_interval_contains_delta_and_is_reproducible() -> None:
    impressions = spread_over_queries()
    result = verdict(impressions, seed=11)
    interval = result["confidence_interval"]
    assert 0 < interval["lower"] < result["delta_ab"] < interval["upper"] < 0.5
    assert verdict(impressions, seed=11) == result
    assert verdict(impressions, seed=12)["confidence_interval"] != interval
    narrower = verdict(impressions, seed=11, confidence=0.5)["confidence_interval"]
    assert interval["lower"] < narrower["lower"] < narrower["upper"] < interval["upper"]


def test_the_bootstrap_resamples_queries_not_impressions() -> None:
    # One head query with 900 impressions, all won by A, and 100 tail queries with one impression
    # each, won by B. Per impression A looks strong: Δ = 900/1000 - 1/2 = 0.4, and the sign test
    # (900 vs 100) is overwhelming. But all of A's evidence is one query. A resample draws 101
    # queries with replacement; the head query comes K ~ Bin(101, 1/101) times and Δ is
    # 900K / (900K + 101 - K) - 1/2:
    #   K = 0: -1/2 with probability (100/101)^101 = 0.366, so the 2.5 % quantile is -1/2;
    #   P[K >= 3] = 0.080 > 2.5 % > P[K >= 4] = 0.018, so the 97.5 % quantile is K = 3:
    #   2700 / 2798 - 1/2 = 0.4650.
    impressions = [Impression("head", 1, 0)] * 900
    impressions += [Impression(f"tail {i}", 0, 1) for i in range(100)]
    result = verdict(impressions, seed=0)
    assert result["delta_ab"] == pytest.approx(0.4)
    assert result["winner"] == "A"
    interval = result["confidence_interval"]
    assert interval["lower"] == -0.5
    assert interval["upper"] == pytest.approx(2700 / 2798 - 0.5)
    assert interval["lower"] < 0 < result["delta_ab"] < interval["upper"]
    assert result["per_query"][0] == {"query": "head", "impressions": 900, "wins_a": 900,
                                      "wins_b": 0, "ties": 0, "delta_ab": 0.5}
    assert [q["query"] for q in result["per_query"][1:4]] == ["tail 0", "tail 1", "tail 10"]

    # The same 900 A wins and 100 B wins spread evenly over 100 queries: a tight interval.
    even = [Impression(f"q{i}", 1, 0) for i in range(100) for _ in range(9)]
    even += [Impression(f"q{i}", 0, 1) for i in range(100)]
    tight = verdict(even, seed=0)["confidence_interval"]
    assert tight["lower"] == tight["upper"] == pytest.approx(0.4)


def test_the_warning_below_min_decided() -> None:
    unclicked = [Impression("q", 0, 0)] * 50
    few = [Impression("q", 1, 0)] * 99 + unclicked
    assert verdict(few)["warning"] == ("Only 99 impressions had a click; at least 100 are "
                                       "needed before the verdict can be trusted.")
    assert verdict([*few, Impression("q", 1, 1)])["warning"] is None
    assert verdict(few, min_decided=99)["warning"] is None


def test_total_clicks_test_by_hand() -> None:
    # n = 100, z = (60 - 50) / sqrt(100 / 4) = 10 / 5 = 2, p = 2 (1 - Φ(2)) = 0.0455.
    result = total_clicks_test(60, 40)
    assert result["z"] == 2.0
    assert result["p_value"] == pytest.approx(0.0455003, abs=1e-7)
    assert result["p_value"] == pytest.approx(math.erfc(2 / math.sqrt(2)))
    assert result["winner"] == "A"
    assert result["significant"] is True
    assert result == {"clicks_a": 60, "clicks_b": 40, "z": 2.0, "p_value": result["p_value"],
                      "winner": "A", "significant": True}
    assert plain(result)

    assert total_clicks_test(40, 60)["winner"] == "B"
    assert total_clicks_test(40, 60)["z"] == -2.0
    # z = (55 - 50) / 5 = 1, p = 0.317: not significant.
    assert total_clicks_test(55, 45)["significant"] is False
    tie = total_clicks_test(50, 50)
    assert (tie["z"], tie["p_value"], tie["winner"], tie["significant"]) == (0.0, 1.0, None, False)
    assert total_clicks_test(0, 0) == {"clicks_a": 0, "clicks_b": 0, "z": None, "p_value": None,
                                       "winner": None, "significant": False}


def test_the_interval_does_not_depend_on_the_order_impressions_were_read_in() -> None:
    impressions = [Impression(f"q{n % 7}", n % 3 == 0, n % 5 == 0) for n in range(200)]
    first = verdict(impressions)["confidence_interval"]
    again = verdict(list(reversed(impressions)))["confidence_interval"]
    assert first == again
