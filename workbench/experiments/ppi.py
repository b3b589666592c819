"""Prediction-powered inference (PPI, PPI++) for the mean of a per-query metric.

A judge (an LLM, clicks, a reference model) rates every query; people rate a uniform random
sample of them. The judge-judged metric alone is biased by the judge's error; the human-judged
metric alone is unbiased but noisy (few queries). PPI combines them: with ``Y`` the human-judged
value and ``f`` the judge-judged value of a query,

    estimate = mean(lam * f over unlabelled queries) + mean(Y - lam * f over labelled queries)

is unbiased for the human-judged mean whatever the judge's quality, and its normal interval has
variance ``var(lam * f_unlabelled) / N + var(Y - lam * f_labelled) / n``. ``lam = 1`` is the
original PPI (Angelopoulos et al., Science 2023), ``lam = 0`` the humans alone; PPI++ (Angelopoulos,
Duchi & Zrnic 2023) tunes ``lam`` from the data to minimise the variance, clipped to [0, 1], so
that asymptotically it is never worse than the humans alone.

Two intervals around the same estimate and the same tuned ``lam``:

* ``normal``: the reference implementation's, ``ppi-python``'s ``ppi_mean_ci`` (population
  standard deviations, a normal quantile; the tuned ``lam`` is the labelled covariance of Y and
  f over (1 + n/N) times the variance of f over labelled and unlabelled together).
  ``tests/unit/experiments/test_ppi.py`` checks that the two agree to 1e-9.
* ``t`` (the summary's default): the same with sample standard deviations (ddof 1) and a
  Student t quantile with n - 1 degrees of freedom, as the summary's other intervals. The
  normal interval is asymptotic and too narrow for the 15 to 30 labelled queries teams label:
  on ESCI (``workbench/bench/ppi_coverage.py``) its 95 % intervals covered the truth 0.89 to 0.90
  of the time at 15 labelled queries, the ``t`` ones 0.93 to 0.94.

Written out here (a dozen lines of numpy) rather than imported because ``ppi-python`` pulls in
numba, pandas, statsmodels and scikit-learn, which the server does not otherwise need; it stays
a test dependency. Unlike the reference, a judge with no variance (lam undefined) gives
``lam = 0`` instead of NaN, and an empty unlabelled set gives the humans alone.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy import stats

INTERVALS = ("t", "normal")


@dataclass(frozen=True)
class Interval:
    """A point estimate, its standard error and two-sided (1 - alpha) interval; ``df`` None for
    a normal quantile, else the t distribution's degrees of freedom."""

    estimate: float
    standard_error: float
    low: float
    high: float
    lam: float
    df: int | None = None

    def p_value(self, null: float = 0.0) -> float | None:
        """Two-sided p-value of ``estimate == null`` under the interval's own distribution."""
        if self.standard_error <= 0.0:
            return None
        z = abs(self.estimate - null) / self.standard_error
        tail = stats.norm.sf(z) if self.df is None else stats.t.sf(z, self.df)
        return float(2.0 * tail)


def _interval(estimate: float, se: float, alpha: float, lam: float, df: int | None
              ) -> Interval:
    quantile = stats.norm.ppf(1.0 - alpha / 2.0) if df is None else \
        stats.t.ppf(1.0 - alpha / 2.0, df)
    half = float(quantile) * se
    return Interval(estimate, se, estimate - half, estimate + half, lam, df)


def _shape(kind: str, n: int) -> tuple[int, int | None]:
    """(ddof of the standard deviations, degrees of freedom) of an interval kind."""
    if kind == "normal":
        return 0, None
    if kind == "t":
        return 1, max(n - 1, 1)
    raise ValueError(f"unknown interval kind {kind!r}; expected one of {INTERVALS}")


def tuned_lambda(y: np.ndarray, f: np.ndarray, f_unlabelled: np.ndarray) -> float:
    """PPI++'s power-tuning parameter for a mean, clipped to [0, 1] (0 when the judge's values
    do not vary: they cannot help)."""
    n, big_n = y.size, f_unlabelled.size
    if n < 2 or big_n == 0:
        return 0.0
    covariance = float(np.mean((y - y.mean()) * (f - f.mean())))
    variance = float(np.var(np.concatenate([f, f_unlabelled]), ddof=1))
    if variance <= 0.0:
        return 0.0
    lam = covariance / ((1.0 + n / big_n) * variance)
    return min(1.0, max(0.0, lam))


def _std(values: np.ndarray, ddof: int) -> float:
    return float(values.std(ddof=ddof)) if values.size > ddof else 0.0


def classical_interval(y: Sequence[float] | np.ndarray, alpha: float,
                       kind: str = "normal") -> Interval:
    """The humans alone: the labelled mean with its interval (``normal``: ``ppi-python``'s
    ``classical_mean_ci``, population standard deviation over sqrt(n); ``t``: the t-interval)."""
    values = np.asarray(y, dtype=np.float64)
    ddof, df = _shape(kind, values.size)
    se = _std(values, ddof) / math.sqrt(values.size)
    return _interval(float(values.mean()), se, alpha, 0.0, df)


def ppi_interval(y: Sequence[float] | np.ndarray, f: Sequence[float] | np.ndarray,
                 f_unlabelled: Sequence[float] | np.ndarray, alpha: float,
                 lam: float | None = None, kind: str = "normal") -> Interval:
    """The prediction-powered estimate of the mean of ``y`` and its interval.

    ``y`` and ``f``: human- and judge-judged values of the labelled queries (same order);
    ``f_unlabelled``: judge-judged values of the other queries. ``lam`` None tunes it (PPI++).
    ``kind``: ``normal`` (the reference's) or ``t`` (module docstring).
    """
    y_arr = np.asarray(y, dtype=np.float64)
    f_arr = np.asarray(f, dtype=np.float64)
    unl = np.asarray(f_unlabelled, dtype=np.float64)
    if y_arr.shape != f_arr.shape or y_arr.size == 0:
        raise ValueError("labelled values and their judge values must be non-empty and paired")
    ddof, df = _shape(kind, y_arr.size)
    if unl.size == 0:
        return classical_interval(y_arr, alpha, kind)
    if lam is None:
        lam = tuned_lambda(y_arr, f_arr, unl)
    estimate = float(np.mean(lam * unl) + np.mean(y_arr - lam * f_arr))
    imputed = _std(lam * unl, ddof) / math.sqrt(unl.size)
    rectifier = _std(y_arr - lam * f_arr, ddof) / math.sqrt(y_arr.size)
    return _interval(estimate, math.sqrt(imputed**2 + rectifier**2), alpha, float(lam), df)
