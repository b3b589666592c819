"""The simulation of workbench/bench/ppi_coverage.py on synthetic data whose answer is known: a
useful judge narrows the intervals and keeps coverage near 95 %, a useless one costs (almost)
nothing, and the subset design over-covers when the labelled share is large (the finite
population the intervals do not model)."""

from __future__ import annotations

import numpy as np
import pytest

from workbench.bench.ppi_coverage import ndcg_values, simulate


def synthetic(noise: float, seed: int = 5) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    truth = rng.normal(0.5, 0.2, (1, 300))
    return truth, truth + rng.normal(0.1, noise, truth.shape)


def test_a_good_judge_narrows_the_interval_and_keeps_coverage() -> None:
    truth, judged = synthetic(0.05)
    row = simulate(truth, judged, [40], 600, "resampled", "t")["40"][0]
    assert 0.92 <= row["coverage"] <= 0.975
    # lambda ~ var(Y) / ((1 + n/N) var(f)) = 0.04 / (1.15 x 0.0425) ~ 0.8
    assert row["widthRatio"] < 0.5 and 0.7 < row["lambda"] < 0.9
    assert row["effectiveLabelledQueries"] > 4 * 40


def test_a_useless_judge_costs_little() -> None:
    rng = np.random.default_rng(9)
    truth = rng.normal(0.5, 0.2, (1, 300))
    row = simulate(truth, rng.normal(0.5, 0.2, (1, 300)), [40], 600, "resampled", "t")["40"][0]
    assert 0.92 <= row["coverage"] <= 0.975
    assert 0.97 <= row["widthRatio"] <= 1.06 and row["lambda"] < 0.15


def test_the_subset_design_over_covers_a_large_labelled_share() -> None:
    truth, judged = synthetic(0.5)
    row = simulate(truth, judged, [200], 400, "subset", "normal")["200"][0]
    assert row["coverage"] > 0.98  # 2/3 of a finite set labelled: the intervals ignore it


def test_ndcg_values_count_a_query_without_hits_as_zero() -> None:
    values = ndcg_values({"a": ["d1", "d2"], "b": []}, ["a", "b"], {"a": {"d2": 1.0}})
    assert values.tolist() == pytest.approx([1 / np.log2(3), 0.0], abs=1e-15)
