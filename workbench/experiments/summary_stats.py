"""The statistics of an experiment summary, over per-query metric values (numpy + scipy only).

Pure functions, so that each figure can be checked against a hand-worked example and against
``scipy.stats`` directly:

* ``describe``: mean, median, sample standard deviation (ddof=1) and the 95 % t-interval of the
  mean over queries.
* ``paired``: a candidate against a baseline on the same queries: per-query deltas, wins /
  losses / ties, the paired t-test (``scipy.stats.ttest_rel``), the Wilcoxon signed-rank test
  (``scipy.stats.wilcoxon``, zero differences dropped as Wilcoxon did), a paired randomization
  (sign-flip) test and Cohen's d of the differences (d_z = mean delta / sd of the deltas).
* ``randomization_p``: the sign-flip test with a fixed seed (``SEED``), so the same inputs
  always give the same p-value: p = (1 + #{|mean of flipped deltas| >= |observed mean|}) /
  (permutations + 1), which is never 0.
* ``holm``: Holm's step-down adjustment of a family of p-values.

Every p-value is two-sided. A figure that cannot be computed (fewer than two queries, no
variance) is None rather than NaN, so the answer is plain JSON.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from typing import Any

import numpy as np
from scipy import stats

SEED = 0
TIE_TOLERANCE = 1e-9  # stored metric values are rounded: a smaller difference is a tie
# Differences are rounded to 10 decimals first, so that equal differences of stored two-decimal
# values (0.3 - 0.2 and 0.8 - 0.7 differ in binary) tie in the Wilcoxon ranks.
DELTA_DECIMALS = 10
_CHUNK = 2_000  # randomization permutations drawn at once (memory: chunk x queries floats)


def finite(value: float | None) -> float | None:
    """A float for JSON: NaN and infinities become None."""
    if value is None:
        return None
    value = float(value)
    return value if math.isfinite(value) else None


def describe(values: Sequence[float]) -> dict[str, Any]:
    """``n``, ``mean``, ``median``, ``sd`` (sample) and ``ci95`` (t-interval of the mean)."""
    data = np.asarray(values, dtype=np.float64)
    n = int(data.size)
    if n == 0:
        return {"n": 0, "mean": None, "median": None, "sd": None, "ci95": None}
    mean = float(data.mean())
    out: dict[str, Any] = {"n": n, "mean": mean, "median": float(np.median(data)),
                           "sd": None, "ci95": None}
    if n >= 2:
        sd = float(data.std(ddof=1))
        half = float(stats.t.ppf(0.975, n - 1)) * sd / math.sqrt(n)
        out["sd"] = sd
        out["ci95"] = [mean - half, mean + half]
    return out


def t_test(deltas: np.ndarray) -> tuple[float | None, float | None]:
    """(statistic, p) of the paired t-test on the differences. All differences equal: no
    variance, so p is 1 when they are all zero and 0 otherwise (the statistic is None)."""
    if deltas.size < 2:
        return None, None
    if np.ptp(deltas) <= TIE_TOLERANCE:
        return None, 1.0 if abs(float(deltas.mean())) <= TIE_TOLERANCE else 0.0
    result = stats.ttest_1samp(deltas, 0.0)
    return finite(result.statistic), finite(result.pvalue)


def paired_t_p(baseline: Sequence[float], candidate: Sequence[float]) -> float | None:
    """Only the p-value of the paired t-test (for families of many comparisons)."""
    deltas = np.round(np.asarray(candidate, dtype=np.float64)
                      - np.asarray(baseline, dtype=np.float64), DELTA_DECIMALS)
    return t_test(deltas)[1]


def wilcoxon(deltas: np.ndarray) -> tuple[float | None, float | None]:
    """(statistic, p) of the Wilcoxon signed-rank test; no non-zero difference: (0, 1)."""
    if deltas.size == 0:
        return None, None
    if not np.any(np.abs(deltas) > TIE_TOLERANCE):
        return 0.0, 1.0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # small samples: scipy warns about the approximation
        result = stats.wilcoxon(deltas)
    return finite(result.statistic), finite(result.pvalue)


def randomization_p(deltas: Sequence[float] | np.ndarray, permutations: int,
                    seed: int = SEED) -> float | None:
    """Two-sided p of the paired randomization test: each query's delta keeps or flips its sign
    with probability 1/2 (the two configurations swapped for that query)."""
    data = np.asarray(deltas, dtype=np.float64)
    if data.size == 0 or permutations < 1:
        return None
    observed = abs(float(data.mean()))
    rng = np.random.default_rng(seed)
    extreme = 0
    left = permutations
    while left:
        rows = min(left, _CHUNK)
        signs = rng.choice(np.array([-1.0, 1.0]), size=(rows, data.size))
        means = np.abs((signs * data).mean(axis=1))
        extreme += int(np.count_nonzero(means >= observed - 1e-12))
        left -= rows
    return (extreme + 1) / (permutations + 1)


def cohens_d(deltas: np.ndarray) -> float | None:
    """d_z: the mean difference in units of the differences' sample standard deviation."""
    if deltas.size < 2:
        return None
    sd = float(deltas.std(ddof=1))
    return None if sd <= TIE_TOLERANCE else float(deltas.mean()) / sd


def paired(baseline: Sequence[float], candidate: Sequence[float], alpha: float,
           permutations: int, seed: int = SEED) -> dict[str, Any]:
    """A candidate against a baseline over the same queries, in the same order. ``significant``
    is the paired t-test's p below ``alpha``."""
    base = np.asarray(baseline, dtype=np.float64)
    cand = np.asarray(candidate, dtype=np.float64)
    if base.shape != cand.shape:
        raise ValueError("paired samples must have the same length")
    deltas = np.round(cand - base, DELTA_DECIMALS)
    t_stat, t_p = t_test(deltas)
    w_stat, w_p = wilcoxon(deltas)
    n = int(deltas.size)
    return {
        "n": n,
        "baselineMean": float(base.mean()) if n else None,
        "candidateMean": float(cand.mean()) if n else None,
        "meanDelta": float(deltas.mean()) if n else None,
        "wins": int(np.count_nonzero(deltas > TIE_TOLERANCE)),
        "losses": int(np.count_nonzero(deltas < -TIE_TOLERANCE)),
        "ties": int(np.count_nonzero(np.abs(deltas) <= TIE_TOLERANCE)),
        "tTest": {"statistic": t_stat, "pValue": t_p},
        "wilcoxon": {"statistic": w_stat, "pValue": w_p},
        "randomization": {"pValue": randomization_p(deltas, permutations, seed),
                          "permutations": permutations, "seed": seed},
        "effectSize": {"cohensD": cohens_d(deltas)},
        "significant": t_p is not None and t_p < alpha,
    }


def holm(pvalues: Sequence[float | None]) -> list[float | None]:
    """Holm's adjusted p-values, in the input order (None stays None and is not counted):
    the i-th smallest of m is multiplied by (m - i), made monotone, capped at 1."""
    known = [(p, i) for i, p in enumerate(pvalues) if p is not None]
    known.sort()
    m = len(known)
    adjusted: list[float | None] = [None] * len(pvalues)
    running = 0.0
    for rank, (p, index) in enumerate(known):
        running = max(running, min(1.0, (m - rank) * p))
        adjusted[index] = running
    return adjusted
