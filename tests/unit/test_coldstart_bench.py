"""The pure pieces of the cold-start benchmark (workbench/bench/coldstart.py), on hand-made
examples whose answer is known: the known item's reciprocal rank, NDCG as the workbench computes
it, Kendall's tau with its bootstrap interval over queries, the throughput bound, the ESCI
scale, and the configurations' rendering."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from workbench.bench.coldstart import (
    CONFIGURATIONS,
    bootstrap_tau,
    bound_ratio,
    markdown,
    ndcg_at_k,
    on_shipped_scale,
    reciprocal_rank,
    render,
    tau,
)


def test_the_known_items_reciprocal_rank() -> None:
    ranked = ["a", "b", "c", "d"]
    assert reciprocal_rank(ranked, "a") == 1.0
    assert reciprocal_rank(ranked, "c") == pytest.approx(1 / 3)
    assert reciprocal_rank(ranked, "z") == 0.0
    assert reciprocal_rank([], "a") == 0.0
    # beyond the cut it is not found
    assert reciprocal_rank([str(i) for i in range(20)], "12") == 0.0
    assert reciprocal_rank([str(i) for i in range(20)], "9") == pytest.approx(0.1)


def test_ndcg_is_the_workbenchs_with_the_ideal_from_every_rating() -> None:
    ratings = {"a": 3.0, "b": 2.0, "c": 0.0, "x": 1.0}
    assert ndcg_at_k(["a", "b", "x", "c"], ratings) == pytest.approx(1.0)
    # exponential gain: (2^2 - 1) / log2(2) over the ideal 7/1 + 3/log2(3) + 1/2
    assert ndcg_at_k(["b"], ratings) == pytest.approx(3 / (7 + 3 / math.log2(3) + 1 / 2))
    # the unrated and the unretrieved gain nothing; no rating at all gives 0
    assert ndcg_at_k(["q", "r"], ratings) == 0.0
    assert ndcg_at_k(["a"], {}) == 0.0
    # a judge's similarity in [0, 1] is a grade like any other
    assert ndcg_at_k(["b", "a"], {"a": 1.0, "b": 0.5}) < 1.0


def test_tau_of_orders() -> None:
    assert tau([1, 2, 3], [10, 20, 30]) == pytest.approx(1.0)
    assert tau([1, 2, 3], [3, 2, 1]) == pytest.approx(-1.0)
    # one swapped pair of three: (2 - 1) / 3
    assert tau([1, 2, 3], [1, 3, 2]) == pytest.approx(1 / 3)
    assert tau([1, 2, 3], [5, 5, 5]) is None
    assert tau([1], [1]) is None


def test_bootstrap_of_queries_that_all_agree_is_certain() -> None:
    """Every query orders the configurations as the reference: every resample does too."""
    reference = [0.2, 0.5, 0.9]
    per_query = np.array([[0.1, 0.4, 0.8]] * 6 + [[0.0, 0.3, 0.7]] * 4)
    figures = bootstrap_tau(reference, per_query, rounds=200)
    assert figures["tau"] == pytest.approx(1.0)
    assert figures["low"] == pytest.approx(1.0) and figures["high"] == pytest.approx(1.0)
    reverse = bootstrap_tau(reference, per_query[:, ::-1], rounds=200)
    assert reverse["tau"] == pytest.approx(-1.0) and reverse["high"] == pytest.approx(-1.0)


def test_bootstrap_interval_of_split_queries_covers_both_answers() -> None:
    """Half the queries agree with the reference and half reverse it, with the same margin: the
    means tie (tau undefined) and resamples go either way, so the interval spans -1 to 1; the
    draw is seeded."""
    reference = [1.0, 2.0]
    per_query = np.array([[0.0, 1.0]] * 20 + [[1.0, 0.0]] * 20)
    figures = bootstrap_tau(reference, per_query, rounds=500, seed=7)
    assert figures["tau"] is None
    assert figures["low"] == -1.0 and figures["high"] == 1.0
    assert 0 < figures["defined_rounds"] <= 500
    assert bootstrap_tau(reference, per_query, rounds=500, seed=7) == figures


def test_bootstrap_of_a_known_mixture() -> None:
    """Three configurations; the mean order swaps the last two (tau 1/3), and since 90 % of the
    queries say so, nearly every resample does."""
    reference = [1.0, 2.0, 3.0]
    per_query = np.array([[0.0, 0.6, 0.5]] * 9 + [[0.0, 0.5, 0.9]] * 1)
    figures = bootstrap_tau(reference, per_query, rounds=1000)
    assert figures["tau"] == pytest.approx(1 / 3)
    assert figures["low"] == pytest.approx(1 / 3)
    assert figures["high"] in (pytest.approx(1 / 3), pytest.approx(1.0))


def test_the_throughput_bound() -> None:
    # 60 calls of 2 s one at a time take 120 s at best
    assert bound_ratio(132.0, 60, 2.0, 1) == pytest.approx(1.1)
    # four at a time: a quarter of it
    assert bound_ratio(33.0, 60, 2.0, 4) == pytest.approx(1.1)
    assert bound_ratio(5.0, 0, 2.0, 1) == math.inf


def test_esci_grades_on_the_shipped_scale() -> None:
    sample = {"tv": {"a": 100.0, "b": 10.0, "c": 1.0, "d": 0.0}}
    shipped = {"tv": {"a": 3.0, "b": 2.0, "c": 1.0, "d": 0.0}}
    assert on_shipped_scale(sample) == shipped
    assert on_shipped_scale(shipped) == shipped
    with pytest.raises(ValueError):
        on_shipped_scale({"tv": {"a": 7.0}})


def test_configurations_really_differ_and_render() -> None:
    assert len(CONFIGURATIONS) >= 8
    bodies = {json.dumps(body, sort_keys=True) for body in CONFIGURATIONS.values()}
    assert len(bodies) == len(CONFIGURATIONS)
    for body in CONFIGURATIONS.values():
        text = json.dumps(render(body, 'say "hi"\\'))
        assert "%SearchText%" not in text and 'say \\"hi\\"\\\\' in text


def test_the_page_quotes_the_recorded_run() -> None:
    """docs/performance.md holds the tables of scripts/bench/results/coldstart.json, so its
    figures cannot go stale."""
    repo = Path(__file__).resolve().parents[2]
    report = json.loads((repo / "scripts/bench/results/coldstart.json").read_text())
    page = (repo / "docs" / "performance.md").read_text()
    for table in markdown(report).split("\n\n"):
        assert table in page
