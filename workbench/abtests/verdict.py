"""The verdict of an interleaved A/B test from per-impression clicks (Chapelle, Joachims,
Radlinski & Yue, "Large-scale validation and analysis of interleaved search evaluation",
ACM TOIS 2012).

The unit of evidence is the impression, not the click: an impression is won by the team with
more clicked documents, tied when both have the same positive count, and says nothing without
a click. ``Δ_AB = (wins_A + ties/2) / (wins_A + wins_B + ties) - 1/2`` is the preference
(> 0: A preferred). Whether it is real is read from an exact sign test over wins and losses
(ties carry no direction), and how large it is from a bootstrap interval that resamples
*queries*, so a few head queries with many impressions cannot pass for broad agreement.

``total_clicks_test`` is what the plugin's Dashboards UI computes, kept only for comparison.
Pure numpy and scipy: no Flask, Redis or OpenSearch here.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
from scipy import stats

# Impressions per test the documentation recommends (docs/ab-tests.md); tests/unit/abtests/
# test_simulation.py measures the power of the verdict at this size.
RECOMMENDED_IMPRESSIONS = 1000

# At most this many cells (resamples x queries) of the bootstrap's index matrix at once, so
# memory stays bounded (about 32 MB of int64) whatever the number of queries.
_BOOTSTRAP_CELLS = 1 << 22


@dataclass(frozen=True)
class Impression:
    """One interleaved result list shown, reduced to what the verdict needs."""

    query: str  # the user query text: the per-query breakdown and the bootstrap group by it
    clicks_a: int  # distinct clicked documents drafted by team A
    clicks_b: int  # distinct clicked documents drafted by team B


def outcome(clicks_a: int, clicks_b: int) -> str | None:
    """The team with more clicks ("A" or "B"), "tie" for equal positive counts, or None without
    a click (an impression nobody clicked prefers neither ranker)."""
    if clicks_a == clicks_b:
        return "tie" if clicks_a > 0 else None
    return "A" if clicks_a > clicks_b else "B"


def sign_test(wins_a: int, wins_b: int) -> float:
    """Exact two-sided sign test of wins against losses (ties excluded):
    ``min(1, 2 * P[X >= max(wins_a, wins_b)])`` with ``X ~ Bin(wins_a + wins_b, 1/2)``.

    Exact, so it holds its level for the few decided impressions of a young test, where a normal
    approximation does not. 1.0 when nothing was decided.
    """
    n = wins_a + wins_b
    if n == 0:
        return 1.0
    k = max(wins_a, wins_b)
    return min(1.0, 2.0 * float(stats.binom.sf(k - 1, n, 0.5)))


def delta_ab(wins_a: int, wins_b: int, ties: int) -> float | None:
    """``(wins_a + ties / 2) / (wins_a + wins_b + ties) - 1/2``; > 0 means A is preferred.

    None when no impression was decided (no click at all): there is no preference to report.
    """
    decided = wins_a + wins_b + ties
    if decided == 0:
        return None
    return (wins_a + ties / 2) / decided - 0.5


class Tally:
    """What the verdict needs of a test's impressions, counted one impression at a time: per
    query, ``[impressions, wins_a, wins_b, ties]``, and the clicks of each team. A results read
    keeps this, not the impressions, so its memory grows with the distinct queries only."""

    def __init__(self) -> None:
        self.per_query: dict[str, list[int]] = {}
        self.clicks_a = 0
        self.clicks_b = 0

    def add(self, query: str, clicks_a: int, clicks_b: int) -> str | None:
        """Count one impression; its ``outcome``."""
        row = self.per_query.setdefault(query, [0, 0, 0, 0])
        row[0] += 1
        result = outcome(clicks_a, clicks_b)
        if result is not None:
            row[{"A": 1, "B": 2, "tie": 3}[result]] += 1
        self.clicks_a += clicks_a
        self.clicks_b += clicks_b
        return result


def verdict(impressions: Sequence[Impression], *, alpha: float = 0.05,
            confidence: float = 0.95, resamples: int = 2000, seed: int = 0,
            min_decided: int = 100) -> dict[str, Any]:
    """``verdict_of`` the impressions, counted."""
    tally = Tally()
    for impression in impressions:
        tally.add(impression.query, impression.clicks_a, impression.clicks_b)
    return verdict_of(tally, alpha=alpha, confidence=confidence, resamples=resamples,
                      seed=seed, min_decided=min_decided)


def verdict_of(
    tally: Tally,
    *,
    alpha: float = 0.05,
    confidence: float = 0.95,
    resamples: int = 2000,
    seed: int = 0,
    min_decided: int = 100,
) -> dict[str, Any]:
    """The test's outcome as a JSON-ready dict (plain floats and ints).

    ``winner`` is set only when the sign test rejects "no preference" at ``alpha``; the interval
    is a percentile bootstrap of Δ_AB over distinct queries (seeded, so a report is repeatable);
    ``warning`` says when too few impressions had a click for the verdict to be trusted.
    """
    tallies = tally.per_query  # query -> [impressions, wins_a, wins_b, ties]
    shown = sum(row[0] for row in tallies.values())
    wins_a = sum(row[1] for row in tallies.values())
    wins_b = sum(row[2] for row in tallies.values())
    ties = sum(row[3] for row in tallies.values())
    decided = wins_a + wins_b + ties
    p_value = sign_test(wins_a, wins_b)
    significant = p_value < alpha and wins_a != wins_b
    winner = ("A" if wins_a > wins_b else "B") if significant else None

    lower: float | None = None
    upper: float | None = None
    if decided:
        # in query order, so the same impressions give the same interval whatever order they
        # were read in
        per_query_tallies = np.array([tallies[query][1:] for query in sorted(tallies)],
                                     dtype=np.int64)
        lower, upper = _query_bootstrap(per_query_tallies, confidence, resamples, seed)

    per_query = [
        {"query": query, "impressions": row[0], "wins_a": row[1], "wins_b": row[2],
         "ties": row[3], "delta_ab": delta_ab(row[1], row[2], row[3])}
        for query, row in sorted(tallies.items(), key=lambda item: (-item[1][0], item[0]))
    ]

    warning = None
    if decided < min_decided:
        warning = (f"Only {decided} impressions had a click; at least {min_decided} are needed "
                   "before the verdict can be trusted.")

    return {
        "impressions": shown,
        "impressions_with_clicks": decided,
        "impressions_without_clicks": shown - decided,
        "wins_a": wins_a,
        "wins_b": wins_b,
        "ties": ties,
        "delta_ab": delta_ab(wins_a, wins_b, ties),
        "p_value": p_value,
        "alpha": alpha,
        "significant": significant,
        "winner": winner,
        "confidence_interval": {"level": confidence, "lower": lower, "upper": upper},
        "per_query": per_query,
        "warning": warning,
    }


def _query_bootstrap(
    tallies: npt.NDArray[np.int64], confidence: float, resamples: int, seed: int
) -> tuple[float | None, float | None]:
    """Percentile interval of Δ_AB over resamples of the queries drawn with replacement.

    ``tallies``: one row (wins_a, wins_b, ties) per distinct query. A drawn query brings all its
    impressions, so the interval is as wide as the disagreement between queries. Resamples that
    drew no decided impression have no Δ and are dropped.
    """
    n_queries = tallies.shape[0]
    columns = np.ascontiguousarray(tallies.T)  # one gather per column is much faster than 3-D
    rng = np.random.default_rng(seed)
    sums = np.empty((resamples, 3), dtype=np.int64)
    chunk = max(1, _BOOTSTRAP_CELLS // n_queries)
    for start in range(0, resamples, chunk):
        rows = min(chunk, resamples - start)
        drawn = rng.integers(0, n_queries, size=(rows, n_queries))
        for column in range(3):
            sums[start:start + rows, column] = columns[column][drawn].sum(axis=1)
    decided = sums.sum(axis=1)
    kept = decided > 0
    if not kept.any():
        return None, None
    deltas = (sums[kept, 0] + sums[kept, 2] / 2) / decided[kept] - 0.5
    tail = (1 - confidence) / 2
    lower, upper = np.quantile(deltas, [tail, 1 - tail])
    return float(lower), float(upper)


def total_clicks_test(clicks_a: int, clicks_b: int) -> dict[str, Any]:
    """The plugin Dashboards UI's reading: a two-sided z-test that A's share of all clicks is 1/2,
    ``z = (clicks_a - n/2) / sqrt(n/4)``, ``p = 2 * (1 - Φ(|z|))``.

    It treats every click as an independent trial, yet several clicks come from one impression
    (one user, one list): when one user's clicks lean to one team, it overstates significance
    (and when they split between the teams, it understates it). It is shown only so a team can
    compare both readings; the verdict is ``verdict``'s.
    """
    n = clicks_a + clicks_b
    if n == 0:
        return {"clicks_a": clicks_a, "clicks_b": clicks_b, "z": None, "p_value": None,
                "winner": None, "significant": False}
    z = (clicks_a - n / 2) / math.sqrt(n / 4)
    p_value = 2.0 * float(stats.norm.sf(abs(z)))
    winner = None if clicks_a == clicks_b else ("A" if clicks_a > clicks_b else "B")
    return {"clicks_a": clicks_a, "clicks_b": clicks_b, "z": z, "p_value": p_value,
            "winner": winner, "significant": p_value < 0.05 and winner is not None}
