"""The judge-aware part of a POINTWISE summary: what a small human-labelled sample says about the
metrics the experiment's own judgments (the *judge*: an LLM, clicks, a reference model) produced.

Inputs: the summary's rows (the judge-judged per-query values, exact where stored, and each
query's top-k doc ids) and a second judgment list from people that rates some of the query
set's queries (*labelled* queries). For every labelled query the human-judged metrics are
recomputed here from the stored top-k doc ids and the human ratings, with the same metric code
the run used.

Per configuration and metric, and per comparison with the baseline (on the paired per-query
difference): the judge-only mean over all queries, the humans-only mean over the labelled ones
(with its normal interval), the prediction-powered estimate of the human-judged mean with its
PPI++ interval (``ppi.ppi_interval``), the judge's bias (human minus judge on the labelled
queries), the Pearson correlation of the two per-query values, and the effective number of
labelled queries: how many the humans alone would need for an interval as narrow.

Intervals are ``t`` by default (sample variances, Student t with n - 1 degrees of freedom) or
``normal``, the reference implementation's (``ppi`` module docstring: why ``t`` is the
default, and what each covered on ESCI).

PPI's *unlabelled* set is the queries people did not label; the judge's values of the labelled
queries count only in the rectifier. This is the reference's setting (two independent samples),
so the interval's variance formula holds as written and equals ``ppi-python``'s. It requires the
labelled queries to be a uniform random sample of the query set (``label_sample.draw``): a hand
picked or uncertainty-stratified sample would need weights the estimator does not take.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from workbench.experiments.ppi import Interval, classical_interval, ppi_interval
from workbench.experiments.summary_build import LOW_COVERAGE, Row, coverage
from workbench.metrics import evaluate_many

# Below this many labelled queries the intervals cover less often than they say (on ESCI the
# 95 % t intervals covered 0.90 to 0.94 of the time at 15 labelled queries): a warning says so.
FEW_LABELLED = 20
# Below this many labelled queries whose human-judged difference is not 0, the interval of a
# difference is too narrow (few changed queries make a skewed, lumpy mean; on ESCI the 95 %
# intervals covered the true difference about 0.5 to 0.7 of the time): a warning says so.
FEW_CHANGED = 5
TIE = 1e-9  # a smaller difference is a tie, as in summary_stats


def labelled_positions(queries: Sequence[str], human: Mapping[str, Mapping[str, float]]
                       ) -> list[int]:
    """Positions of the queries people rated at least one document of."""
    return [i for i, q in enumerate(queries) if human.get(q)]


def complete_queries(rows: Sequence[Row], queries: Sequence[str],
                     human: Mapping[str, Mapping[str, float]], k: int
                     ) -> dict[str, dict[str, float]]:
    """The part of ``human`` a merged list (a ``FILLED_JUDGMENT``: people's ratings and a
    judge's) can give as PPI's gold sample: the queries whose top-``k`` hits, in every row, all
    have a human rating. On the other queries people rated only part of what the
    configurations retrieved (the judge filled the rest), so their human-judged metric would
    count the judge's documents as irrelevant: the very bias the fill removed."""
    out: dict[str, dict[str, float]] = {}
    for i, query in enumerate(queries):
        rated = human.get(query)
        if rated and all(doc in rated for row in rows for doc in row.hits[i][:k]):
            out[query] = dict(rated)
    return out


def human_values(row: Row, queries: Sequence[str], labelled: Sequence[int],
                 human: Mapping[str, Mapping[str, float]], k: int,
                 metrics: Sequence[str]) -> dict[str, list[float]]:
    """Metric -> the human-judged value of each labelled query (0 for a query without hits,
    as the judge-judged values count it)."""
    out = {name: [0.0] * len(labelled) for name in metrics}
    with_hits = [j for j, i in enumerate(labelled) if row.hits[i]]
    scored = evaluate_many([(row.hits[labelled[j]], human[queries[labelled[j]]])
                            for j in with_hits], k)
    for j, values in zip(with_hits, scored, strict=True):
        for name, value in values:
            if name in out:
                out[name][j] = float(value)
    return out


def _interval(interval: Interval) -> dict[str, Any]:
    return {"estimate": interval.estimate, "ci": [interval.low, interval.high],
            "standardError": interval.standard_error, "lambda": interval.lam}


def _pearson(y: np.ndarray, f: np.ndarray) -> float | None:
    if y.size < 2 or float(np.std(y)) == 0.0 or float(np.std(f)) == 0.0:
        return None
    return float(np.corrcoef(y, f)[0, 1])


def figures(judge_all: Sequence[float], labelled: Sequence[int], y: Sequence[float],
            alpha: float, kind: str) -> tuple[dict[str, Any], Interval]:
    """Every figure of one metric (or one paired difference): ``judge_all`` are the judge's
    values of every query, ``y`` the human values of the ``labelled`` positions. Also the PPI
    interval itself, for a comparison's test."""
    judged = np.asarray(judge_all, dtype=np.float64)
    humans = np.asarray(y, dtype=np.float64)
    mask = np.zeros(judged.size, dtype=bool)
    mask[list(labelled)] = True
    f = judged[list(labelled)]
    unlabelled = judged[~mask]
    alone = classical_interval(humans, alpha, kind)
    ppi = ppi_interval(humans, f, unlabelled, alpha, kind=kind)
    effective = (humans.size * (alone.standard_error / ppi.standard_error) ** 2
                 if ppi.standard_error > 0 else None)
    return {
        "judge": {"mean": float(judged.mean()), "n": int(judged.size)},
        "judgeOnLabelled": {"mean": float(f.mean()), "n": int(f.size)},
        "humans": {"mean": alone.estimate, "n": int(humans.size),
                   "ci": [alone.low, alone.high] if humans.size >= 2 else None},
        "ppi": _interval(ppi) if humans.size >= 2 else None,
        "bias": float(humans.mean() - f.mean()),
        "agreement": {"pearson": _pearson(humans, f)},
        "effectiveLabelledQueries": effective if humans.size >= 2 else None,
    }, ppi


def build(rows: Sequence[Row], names: Mapping[str, str], queries: Sequence[str],
          human: Mapping[str, Mapping[str, float]], judgment_id: str, k: int, baseline: str,
          metrics: Sequence[str], alpha: float, kind: str = "t"
          ) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """(the summary's ``humanJudgments`` section, its warnings). ``human`` maps query text ->
    doc id -> rating and must label at least one query (the caller checks); ``kind`` is the
    interval (``ppi.INTERVALS``)."""
    labelled = labelled_positions(queries, human)
    n = len(labelled)
    warnings: list[dict[str, Any]] = []
    values = {row.config_id: human_values(row, queries, labelled, human, k, metrics)
              for row in rows}
    judged_docs = {q: set(human[q]) for q in (queries[i] for i in labelled)}
    labelled_queries = [queries[i] for i in labelled]
    configurations = []
    for row in rows:
        labelled_row = Row(row.config_id, hits=[row.hits[i] for i in labelled])
        cov = coverage(labelled_row, labelled_queries, judged_docs, k)
        if cov["hits"] and cov["share"] < LOW_COVERAGE:
            warnings.append({
                "level": "warning", "code": "low_human_coverage",
                "searchConfigurationId": row.config_id, "share": cov["share"],
                "message": f"people rated only {cov['share']:.0%} of the top-{k} hits of the "
                           f"labelled queries (below {LOW_COVERAGE:.0%}); unrated hits count as "
                           "irrelevant in the human-judged metric"})
        configurations.append({
            "searchConfigurationId": row.config_id, "name": names.get(row.config_id),
            "humanCoverage": cov,
            "metrics": {name: figures(row.values[name], labelled,
                                      values[row.config_id][name], alpha, kind)[0]
                        for name in metrics}})
    comparisons = []
    base = next((row for row in rows if row.config_id == baseline), None)
    for row in rows:
        if base is None or row is base:
            continue
        for name in metrics:
            judge_delta = np.asarray(row.values[name]) - np.asarray(base.values[name])
            human_delta = (np.asarray(values[row.config_id][name])
                           - np.asarray(values[baseline][name]))
            figs, interval = figures(judge_delta, labelled, human_delta, alpha, kind)
            p_value = interval.p_value() if n >= 2 else None
            if n >= 2 and p_value is None:  # no spread at all: every difference the same
                p_value = 1.0 if interval.estimate == 0.0 else 0.0
            changed = int(np.count_nonzero(np.abs(human_delta) > TIE))
            comparisons.append({
                "metric": name, "baseline": baseline, "candidate": row.config_id,
                **figs, "changedLabelledQueries": changed, "pValue": p_value,
                "significant": bool(n >= 2 and (interval.low > 0.0 or interval.high < 0.0))})
            if name == metrics[0] and 0 < changed < FEW_CHANGED:
                warnings.append({
                    "level": "warning", "code": "few_changed_queries",
                    "searchConfigurationId": row.config_id, "changed": changed,
                    "message": f"{name} of [{names.get(row.config_id) or row.config_id}] differs "
                               f"from the baseline's on only {changed} of the {n} labelled "
                               f"queries; an interval from fewer than {FEW_CHANGED} changed "
                               "queries is too narrow: label more queries before trusting it"})
    if n < FEW_LABELLED:
        warnings.append({
            "level": "warning", "code": "few_labelled_queries", "labelled": n,
            "message": f"people labelled {n} of the {len(queries)} queries; intervals from "
                       f"fewer than {FEW_LABELLED} cover the truth less often than they say"
                       + (" and are not given" if n < 2 else "")})
    if n == len(queries):
        warnings.append({
            "level": "info", "code": "all_queries_labelled",
            "message": "people labelled every query: the prediction-powered figures are the "
                       "humans' own (the judge adds nothing)"})
    section = {
        "judgmentId": judgment_id, "method": "PPI++", "interval": kind,
        "confidence": 1.0 - alpha,
        "queries": {"total": len(queries), "labelled": n, "unlabelled": len(queries) - n},
        "configurations": configurations, "comparisons": comparisons,
    }
    return section, warnings
