"""Whether a monitor's run says quality dropped: a test against a baseline plus persistence.

A run is noisy (a different sample of queries, a judge that wavers), so one low mean is not an
alarm. A rule flags a run when two things hold: a one-sided test at level ``alpha`` says its
metric is lower than the baseline's at all (the chance part), and the mean drop it measured
exceeds the tolerated ``drop`` (the part that matters). It alerts only when ``persistence``
consecutive runs were flagged. The test is Student's t on the per-query differences of the
queries the run shares with the baseline (paired: each query is its own control, so the spread
between easy and hard queries cancels out), or Welch's unequal-variance t on the two samples
when too few queries are shared (pure UBI samples). The t-test rather than Wilcoxon: what is
tested is a shift of the *mean*, which is what the metric's mean reports, and with NDCG's many
ties (zeros, unchanged queries) the signed-rank test loses its exactness. Testing "lower by more
than the drop" instead would make the tolerated drop a second significance margin: a real drop
just above it would almost never be flagged. The rule is docs/algorithms.md, "Monitor
decisions"; its false-alarm rate and detection delay are measured by ``workbench bench --only
monitors`` (docs/performance.md, "Monitors").

Judge drift is told apart from search drift by re-rating a fixed gold set of pairs each run:
``judge_drift`` says whether the judge's answers on it moved.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
from scipy import stats

OK = "OK"
INCONCLUSIVE = "INCONCLUSIVE"
ALERT = "ALERT"


@dataclass(frozen=True)
class Rule:
    """One alert rule of a monitor (the ``alerts`` entries of its definition)."""

    metric: str
    drop: float
    relative: bool = False
    previous_runs: int = 5
    pinned_run: str | None = None
    persistence: int = 2
    min_judged: float = 0.8
    min_queries: int = 10
    alpha: float = 0.05


@dataclass(frozen=True)
class RunValues:
    """One run as a rule reads it: the metric per query, the run's mean Judged@k, and (for
    earlier runs) whether this rule flagged it."""

    run_id: str
    values: Mapping[str, float]
    judged: float
    flagged: bool = False


@dataclass(frozen=True)
class Decision:
    """A rule's verdict on a run. ``delta`` is current mean - baseline mean (negative: lower) on
    the values tested; ``consecutive`` counts the flagged runs in a row ending with this one."""

    state: str
    flagged: bool
    consecutive: int
    delta: float | None
    p_value: float | None
    shared_queries: int
    reason: str


@dataclass(frozen=True)
class Drift:
    """The gold set re-rated: pairs compared, how many changed beyond the tolerance, drift."""

    pairs: int
    changed: int
    drift: bool


def counts(rule: Rule, run: RunValues) -> bool:
    """Whether a run is conclusive for the rule: judged enough, enough queries."""
    return run.judged >= rule.min_judged and len(run.values) >= rule.min_queries


def baseline_runs(rule: Rule, history: Sequence[RunValues]) -> list[RunValues] | None:
    """The runs the current one is compared with: the pinned run, or the last ``previous_runs``
    conclusive runs this rule did not flag (a flagged run is suspected of the very drop being
    tested, so a lasting drop keeps alerting until it recovers or a later run is pinned).
    None when the pinned run is not in the history."""
    if rule.pinned_run is not None:
        pinned = [run for run in history if run.run_id == rule.pinned_run]
        return pinned[-1:] if pinned else None
    usable = [run for run in history if counts(rule, run) and not run.flagged]
    return usable[-rule.previous_runs:] if rule.previous_runs > 0 else []


def baseline_values(runs: Sequence[RunValues]) -> dict[str, float]:
    """Each query's mean value over the baseline runs that have it."""
    sums: dict[str, list[float]] = {}
    for run in runs:
        for query, value in run.values.items():
            sums.setdefault(query, []).append(float(value))
    return {query: float(np.mean(values)) for query, values in sums.items()}


# Values equal but for floating-point rounding (a mean of equal values) are equal: a difference
# of 1e-17 is not evidence of anything.
DECIMALS = 12


def paired_p(differences: np.ndarray) -> float:
    """One-sided p of "mean(baseline - current) > 0" by a one-sample t-test on the per-query
    differences; a constant difference is certain either way (the t statistic is undefined)."""
    differences = np.round(differences, DECIMALS)
    if differences.size < 2 or np.ptp(differences) == 0:
        return 0.0 if float(differences.mean()) > 0 else 1.0
    return float(stats.ttest_1samp(differences, 0.0, alternative="greater").pvalue)


def welch_p(baseline: np.ndarray, current: np.ndarray) -> float:
    """One-sided p of "mean(baseline) > mean(current)" by Welch's t-test."""
    baseline, current = np.round(baseline, DECIMALS), np.round(current, DECIMALS)
    if baseline.size < 2 or current.size < 2 or (np.ptp(baseline) == 0 and np.ptp(current) == 0):
        return 0.0 if float(baseline.mean() - current.mean()) > 0 else 1.0
    return float(stats.ttest_ind(baseline, current, equal_var=False,
                                 alternative="greater").pvalue)


def decide(rule: Rule, current: RunValues, history: Sequence[RunValues]) -> Decision:
    """The rule's verdict on ``current`` given the earlier completed runs (oldest first)."""
    def verdict(state: str, reason: str, flagged: bool = False, consecutive: int = 0,
                delta: float | None = None, p: float | None = None, shared: int = 0
                ) -> Decision:
        return Decision(state, flagged, consecutive, delta, p, shared, reason)

    if current.judged < rule.min_judged:
        return verdict(INCONCLUSIVE, f"Judged {current.judged:.3f} is below the floor "
                                     f"{rule.min_judged:g}")
    runs = baseline_runs(rule, history)
    if runs is None:
        return verdict(INCONCLUSIVE, f"pinned run {rule.pinned_run} is not among the "
                                     f"completed runs")
    if not runs:
        if len(current.values) < rule.min_queries:
            return verdict(INCONCLUSIVE, f"{len(current.values)} queries, fewer than "
                                         f"{rule.min_queries}")
        return verdict(OK, "no baseline yet")
    base = baseline_values(runs)
    shared = sorted(set(base) & set(current.values))
    if len(shared) >= rule.min_queries:
        before = np.array([base[q] for q in shared])
        after = np.array([float(current.values[q]) for q in shared])
        tolerated = rule.drop * float(before.mean()) if rule.relative else rule.drop
        p = paired_p(before - after)
        test = f"paired t on {len(shared)} shared queries"
    else:
        before = np.array(list(base.values()))
        after = np.array([float(v) for v in current.values.values()])
        if after.size < rule.min_queries:
            return verdict(INCONCLUSIVE, f"{after.size} queries, fewer than "
                                         f"{rule.min_queries}", shared=len(shared))
        tolerated = rule.drop * float(before.mean()) if rule.relative else rule.drop
        p = welch_p(before, after)
        test = f"Welch t on {after.size} against {before.size} queries " \
               f"({len(shared)} shared)"
    delta = round(float(after.mean() - before.mean()), DECIMALS)
    p = p if math.isfinite(p) else 1.0
    flagged = p < rule.alpha and -delta > tolerated
    consecutive = 0
    if flagged:
        consecutive = 1
        for run in reversed(history):
            if not counts(rule, run):
                continue  # an inconclusive run neither breaks nor extends the streak
            if not run.flagged:
                break
            consecutive += 1
    state = ALERT if flagged and consecutive >= rule.persistence else OK
    what = (f"{rule.metric} {delta:+.4f} against {len(runs)} baseline run(s), "
            f"tolerated drop {tolerated:.4f}, p={p:.3g} ({test})")
    if flagged:
        what += f"; flagged {consecutive} of {rule.persistence} consecutive"
    return verdict(state, what, flagged, consecutive, delta, p, len(shared))


def judge_drift(then: Mapping[tuple[str, str], float], now: Mapping[tuple[str, str], float],
                scale: float = 1.0, tolerance: float = 0.25, share: float = 0.2) -> Drift:
    """The gold set's ratings then and now (``(query, docId) -> rating``, on a scale whose top
    is ``scale``): drift when more than ``share`` of the pairs rated both times changed by more
    than ``tolerance`` of the scale."""
    pairs = sorted(set(then) & set(now))
    changed = sum(1 for pair in pairs
                  if abs(float(now[pair]) - float(then[pair])) / scale > tolerance)
    return Drift(len(pairs), changed, bool(pairs) and changed / len(pairs) > share)
