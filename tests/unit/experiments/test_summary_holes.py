"""The summary's hole warnings on hand-made rows: the Judged@k margin (0.10, absolute), ties of
winners, the metric whose twin is checked, and rows without condensed values."""

from __future__ import annotations

import pytest

from workbench.experiments.summary_build import Row
from workbench.experiments.summary_holes import JUDGED_SPREAD, twins, warnings

NAMES = {"p": "production", "n": "new"}


def row(config: str, judged: list[float], ndcg: list[float], primed: list[float],
        variant: str | None = None) -> Row:
    return Row(config, variant_id=variant, values={
        "NDCG@10": ndcg, "MAP@10": ndcg, "Judged@10": judged, "NDCG'@10": primed,
        "MAP'@10": primed})


def codes(rows: list[Row], metric: str = "NDCG@10") -> list[str]:
    return [w["code"] for w in warnings(rows, NAMES, 10, metric)]


def test_the_judged_margin_is_absolute_and_strict() -> None:
    assert JUDGED_SPREAD == 0.10
    # 0.95 and 0.80 (means over two queries): 0.15 apart, more than 0.10.
    spread = warnings([row("p", [1.0, 0.9], [0.5, 0.5], [0.5, 0.5]),
                       row("n", [0.8, 0.8], [0.4, 0.4], [0.4, 0.4])], NAMES, 10, "NDCG@10")
    assert [w["code"] for w in spread] == ["judged_spread"]
    assert spread[0]["spread"] == pytest.approx(0.15)
    assert spread[0]["message"] == (
        "mean Judged@10 differs by 0.15 between [production] (0.95) and [new] (0.80), more than "
        "0.10: the standard metrics count unjudged hits as irrelevant and so favour "
        "[production]; compare on NDCG'@10, or fill the holes by judging the unjudged hits")
    # Exactly 0.10 apart (0.9 and 0.8): not more than the margin.
    assert codes([row("p", [0.9], [0.5], [0.5]), row("n", [0.8], [0.4], [0.4])]) == []


def test_disagreement_needs_different_winners_and_ties_share_the_win() -> None:
    rows = [row("p", [1.0], [0.6], [0.6]), row("n", [1.0], [0.5], [0.7])]
    got = warnings(rows, NAMES, 10, "NDCG@10")
    assert [w["code"] for w in got] == ["condensed_disagrees"]
    assert got[0]["message"] == (
        "[production] wins on NDCG@10 (0.6000) but [new] wins on NDCG'@10 (0.7000), which "
        "leaves unjudged hits out: the ranking on NDCG@10 may come from the holes of the "
        "judgment list rather than from the search")
    # A tie on the standard metric: "new" wins both, no disagreement.
    assert codes([row("p", [1.0], [0.6], [0.6]), row("n", [1.0], [0.6], [0.7])]) == []
    # Hybrid variants are named with their parameters.
    variants = [row("p", [1.0], [0.6], [0.6], "w=1.0/0.0"), row("p", [1.0], [0.5], [0.7], "w=0")]
    assert "[production (w=1.0/0.0)] wins on NDCG@10" in warnings(
        variants, NAMES, 10, "NDCG@10")[0]["message"]


def test_the_twin_checked_follows_the_metric() -> None:
    assert twins("NDCG@10", 10) == twins("NDCG'@10", 10) == ("NDCG@10", "NDCG'@10")
    assert twins("MAP'@5", 10) == ("MAP@5", "MAP'@5")
    assert twins("Precision@10", 10) == ("Precision@10", "Precision'@10")
    assert twins("MRR", 10) == twins("Judged@10", 10) == twins("HitRate@10", 10) == (
        "NDCG@10", "NDCG'@10")


def test_no_warning_without_condensed_values_or_with_one_row() -> None:
    plain = [Row("p", values={"NDCG@10": [0.5]}), Row("n", values={"NDCG@10": [0.1]})]
    assert codes(plain) == []
    assert codes([row("p", [1.0], [0.6], [0.6])]) == []
