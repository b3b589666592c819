"""The summary's statistics on examples worked by hand, and cross-checked with scipy.stats."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from scipy import stats

from workbench.experiments.summary_stats import describe, holm, paired, randomization_p


def test_describe_by_hand() -> None:
    # mean 2.5, median 2.5, sd sqrt(5/3); 95 % CI 2.5 +- t(0.975, 3) sd / 2, t = 3.182446
    out = describe([1, 2, 3, 4])
    assert out["n"] == 4 and out["mean"] == 2.5 and out["median"] == 2.5
    assert out["sd"] == pytest.approx(math.sqrt(5 / 3))
    half = 3.182446305284263 * math.sqrt(5 / 3) / 2
    assert out["ci95"] == pytest.approx([2.5 - half, 2.5 + half])
    assert out["ci95"] == pytest.approx([0.445739, 4.554261], abs=1e-6)


def test_describe_edges() -> None:
    assert describe([]) == {"n": 0, "mean": None, "median": None, "sd": None, "ci95": None}
    one = describe([0.7])
    assert one["mean"] == 0.7 and one["sd"] is None and one["ci95"] is None
    flat = describe([0.5, 0.5, 0.5])
    assert flat["sd"] == 0.0 and flat["ci95"] == [0.5, 0.5]


BASE = [0.2, 0.4, 0.6, 0.8]
CAND = [0.3, 0.4, 0.9, 0.7]  # deltas 0.1, 0, 0.3, -0.1


def test_paired_by_hand() -> None:
    out = paired(BASE, CAND, alpha=0.05, permutations=20_000)
    assert (out["wins"], out["losses"], out["ties"]) == (2, 1, 1)
    assert out["meanDelta"] == pytest.approx(0.075)
    assert out["baselineMean"] == pytest.approx(0.5) and out["candidateMean"] == pytest.approx(
        0.575)
    # sd of the deltas: sqrt(0.0875 / 3); t = 0.075 / (sd / 2)
    sd = math.sqrt(0.0875 / 3)
    assert out["tTest"]["statistic"] == pytest.approx(0.075 / (sd / 2))
    assert out["effectSize"]["cohensD"] == pytest.approx(0.075 / sd)
    # Wilcoxon drops the zero; |0.1|, |-0.1| share rank 1.5, 0.3 has rank 3: W+ 4.5, W- 1.5
    assert out["wilcoxon"]["statistic"] == 1.5
    # Every sign pattern of (0.1, 0, 0.3, -0.1): |mean| >= 0.075 in 12 of 16
    patterns = [abs(np.dot(s, [0.1, 0.0, 0.3, -0.1])) / 4 >= 0.075 - 1e-12
                for s in itertools.product((-1, 1), repeat=4)]
    assert sum(patterns) / 16 == 0.75
    assert out["randomization"]["pValue"] == pytest.approx(0.75, abs=0.01)
    assert out["randomization"]["seed"] == 0
    assert out["significant"] is False


def test_paired_matches_scipy() -> None:
    rng = np.random.default_rng(7)
    base = rng.uniform(0, 1, 60).round(2)
    cand = np.clip(base + rng.normal(0.08, 0.15, 60), 0, 1).round(2)
    out = paired(base.tolist(), cand.tolist(), alpha=0.05, permutations=5_000)
    t = stats.ttest_rel(cand, base)
    # Equal differences must tie in the ranks: the differences are rounded to 10 decimals.
    w = stats.wilcoxon(np.round(cand - base, 10))
    assert out["tTest"]["statistic"] == pytest.approx(t.statistic)
    assert out["tTest"]["pValue"] == pytest.approx(t.pvalue)
    assert out["wilcoxon"]["statistic"] == pytest.approx(w.statistic)
    assert out["wilcoxon"]["pValue"] == pytest.approx(w.pvalue)
    assert out["significant"] == (t.pvalue < 0.05)
    # The randomization p agrees with the t-test's in size, and a fixed seed repeats it.
    again = paired(base.tolist(), cand.tolist(), alpha=0.05, permutations=5_000)
    assert again["randomization"] == out["randomization"]
    assert out["randomization"]["pValue"] < 0.01 and t.pvalue < 0.01


def test_paired_without_differences() -> None:
    out = paired([0.5, 0.2, 0.1], [0.5, 0.2, 0.1], alpha=0.05, permutations=100)
    assert out["tTest"] == {"statistic": None, "pValue": 1.0}
    assert out["wilcoxon"] == {"statistic": 0.0, "pValue": 1.0}
    assert out["randomization"]["pValue"] == 1.0
    assert out["effectSize"]["cohensD"] is None
    assert out["ties"] == 3 and out["significant"] is False


def test_randomization_is_never_zero() -> None:
    p = randomization_p([1.0] * 30, permutations=999)
    assert p == pytest.approx(1 / 1000, abs=2 / 1000)  # only the identity pattern(s) match


def test_holm_by_hand() -> None:
    # sorted 0.01, 0.03, 0.04 -> 3 x 0.01 = 0.03, 2 x 0.03 = 0.06, max(0.06, 1 x 0.04) = 0.06
    assert holm([0.01, 0.04, 0.03, None]) == pytest.approx([0.03, 0.06, 0.06, None])
    assert holm([0.5, 0.6]) == [1.0, 1.0]
    assert holm([]) == []
