"""workbench.experiments.ppi against the reference implementation, ``ppi-python``, and against a
hand-worked example."""

from __future__ import annotations

import math

import numpy as np
import pytest
from ppi_py import classical_mean_ci, ppi_mean_ci, ppi_mean_pointestimate
from scipy import stats

from workbench.experiments.ppi import classical_interval, ppi_interval, tuned_lambda


def _cases() -> list[tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """(Y, Yhat, Yhat_unlabelled) shaped like per-query metrics: values in [0, 1] with many
    zeros, judges from good to useless, labelled sets of 5 to 60 queries."""
    rng = np.random.default_rng(7)
    out = []
    for n, big_n, noise in ((5, 40, 0.05), (15, 135, 0.1), (30, 120, 0.3), (60, 90, 1.0),
                            (12, 12, 0.2)):
        truth = np.clip(rng.beta(0.6, 1.2, n + big_n) - (rng.random(n + big_n) < 0.3), 0, 1)
        judge = np.clip(truth + rng.normal(0.05, noise, n + big_n), 0, 1)
        out.append((truth[:n], judge[:n], judge[n:]))
    # differences of two configurations: mostly ties, a few wins and losses
    deltas = np.where(rng.random(150) < 0.1, rng.normal(0.02, 0.06, 150), 0.0)
    judged = np.where(deltas != 0, deltas + rng.normal(0, 0.02, 150), 0.0)
    out.append((deltas[:30], judged[:30], judged[30:]))
    return out


@pytest.mark.parametrize("case", _cases())
@pytest.mark.parametrize("alpha", [0.05, 0.1])
def test_ppi_plus_plus_equals_the_reference(case: tuple[np.ndarray, ...], alpha: float) -> None:
    y, f, unl = case
    mine = ppi_interval(y, f, unl, alpha)
    low, high = ppi_mean_ci(y, f, unl, alpha=alpha)
    assert mine.low == pytest.approx(float(low[0]), abs=1e-9)
    assert mine.high == pytest.approx(float(high[0]), abs=1e-9)
    assert mine.estimate == pytest.approx(float(ppi_mean_pointestimate(y, f, unl)[0]), abs=1e-9)
    assert 0.0 <= mine.lam <= 1.0


@pytest.mark.parametrize("case", _cases())
@pytest.mark.parametrize("lam", [0.0, 0.4, 1.0])
def test_fixed_lambda_equals_the_reference(case: tuple[np.ndarray, ...], lam: float) -> None:
    y, f, unl = case
    mine = ppi_interval(y, f, unl, 0.05, lam=lam)
    low, high = ppi_mean_ci(y, f, unl, alpha=0.05, lam=lam)
    assert (mine.low, mine.high) == pytest.approx((float(low[0]), float(high[0])), abs=1e-9)
    assert mine.estimate == pytest.approx(
        float(ppi_mean_pointestimate(y, f, unl, lam=lam)[0]), abs=1e-9)


@pytest.mark.parametrize("case", _cases())
def test_humans_alone_equal_the_reference(case: tuple[np.ndarray, ...]) -> None:
    y = case[0]
    mine = classical_interval(y, 0.05)
    low, high = classical_mean_ci(y, alpha=0.05)
    assert (mine.low, mine.high) == pytest.approx((float(low), float(high)), abs=1e-9)


@pytest.mark.parametrize("case", _cases())
def test_t_interval_is_the_reference_with_sample_variances_and_a_t_quantile(
        case: tuple[np.ndarray, ...]) -> None:
    """Same estimate and lambda as the reference; the standard error from ddof-1 variances and
    the half-width from Student's t with n - 1 degrees of freedom."""
    y, f, unl = case
    normal = ppi_interval(y, f, unl, 0.05)
    got = ppi_interval(y, f, unl, 0.05, kind="t")
    lam = normal.lam
    se = math.sqrt(np.var(lam * unl, ddof=1) / unl.size + np.var(y - lam * f, ddof=1) / y.size)
    half = stats.t.ppf(0.975, y.size - 1) * se
    assert (got.estimate, got.lam) == (normal.estimate, normal.lam)
    assert (got.low, got.high) == pytest.approx((got.estimate - half, got.estimate + half),
                                                abs=1e-12)
    assert got.p_value() == pytest.approx(2 * stats.t.sf(abs(got.estimate) / se, y.size - 1))
    alone = classical_interval(y, 0.05, "t")
    low, high = stats.t.interval(0.95, y.size - 1, loc=y.mean(), scale=stats.sem(y))
    assert (alone.low, alone.high) == pytest.approx((low, high), abs=1e-12)


def test_unknown_interval_kind() -> None:
    with pytest.raises(ValueError, match="unknown interval kind 'wide'"):
        ppi_interval([1.0, 0.0], [1.0, 0.0], [1.0], 0.05, kind="wide")


def test_hand_worked_example() -> None:
    """Y = (1, 0, 1, 0), f = (1, 0, 0, 0), f_unlabelled = (1, 1, 0, 0), lam = 1:
    estimate = 0.5 + mean(0, 0, 1, 0) = 0.75; rectifier sd = sqrt(3)/4, imputed sd = 1/2, so the
    standard error is sqrt(1/16 + 3/64) = sqrt(7)/8."""
    got = ppi_interval([1, 0, 1, 0], [1, 0, 0, 0], [1, 1, 0, 0], 0.05, lam=1.0)
    assert got.estimate == pytest.approx(0.75)
    assert got.standard_error == pytest.approx(math.sqrt(7) / 8)
    assert got.high - got.estimate == pytest.approx(1.959963984540054 * math.sqrt(7) / 8)
    # tuned: cov_n(Y, f) = 1/8; var(f over all 8, ddof 1) = (3/8 * 5/8) * 8/7 = 15/56;
    # lam = (1/8) / ((1 + 4/4) * 15/56) = 7/30
    assert tuned_lambda(np.array([1., 0, 1, 0]), np.array([1., 0, 0, 0]),
                        np.array([1., 1, 0, 0])) == pytest.approx(0.125 / (2 * 15 / 56))


def test_a_judge_without_variance_counts_for_nothing() -> None:
    """The reference answers NaN (0 / 0); the workbench falls back to the humans alone."""
    got = ppi_interval([0.2, 0.4, 0.9], [0.5, 0.5, 0.5], [0.5] * 10, 0.05)
    alone = classical_interval([0.2, 0.4, 0.9], 0.05)
    assert got.lam == 0.0
    assert (got.estimate, got.low, got.high) == pytest.approx((alone.estimate, alone.low,
                                                               alone.high))


def test_no_unlabelled_queries_is_the_humans_alone() -> None:
    got = ppi_interval([0.2, 0.4], [0.1, 0.3], [], 0.05)
    assert got.estimate == pytest.approx(0.3) and got.lam == 0.0


def test_p_value_of_the_difference() -> None:
    got = ppi_interval([0.1, 0.2, 0.0, 0.3], [0.1, 0.2, 0.0, 0.3], [0.2] * 4 + [0.1] * 4, 0.05,
                       lam=1.0)
    z = got.estimate / got.standard_error
    assert got.p_value() == pytest.approx(math.erfc(abs(z) / math.sqrt(2)))
