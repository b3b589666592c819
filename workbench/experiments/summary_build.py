"""An experiment's summary, assembled from what its runs stored (no cluster calls here).

``build`` takes the experiment, its evaluation results (and those of its scheduled runs) and the
doc ids each query has a judgment for, and answers the ``_summary`` document:

* One row per search configuration (pointwise, pairwise) or per hybrid variant (configuration x
  normalisation/combination/weights). Every metric is summarised over **all queries run**: a
  query without hits has no evaluation result and counts as 0 for every metric (a variant that
  failed counts as 0 too, with a warning), so means match the per-query averages users compute
  from the full query set.
* Per-query values are the unrounded ``exactMetrics`` each evaluation result stores beside the
  plugin's two-decimal ``metrics``; results without them (written earlier, or by the plugin)
  fall back to the rounded values with a ``rounded_values`` warning.
* The condensed metrics (Judged@k, NDCG'@k, MAP'@k, Precision'@k) a pointwise or hybrid run
  stored in ``condensedMetrics`` are summarised after the standard ones in each row's ``metrics``
  (``summary_holes``, with its ``judged_spread`` and ``condensed_disagrees`` warnings); comparisons
  and best variants take one when it is the ``metric`` asked for. A run stored without them
  (earlier workbenches, the plugin) simply has none.
* ``judgmentCoverage``: of the top-k hits of every query, the share that has a judgment in the
  experiment's judgment lists. Below ``LOW_COVERAGE`` (50 %) a ``low_judgment_coverage``
  warning says the metrics undercount (unjudged hits count as irrelevant); when no query of the
  query set has any judgment the ``no_judgments_matched`` error says every metric is 0 because
  of it.
* Pointwise ``comparisons``: every other configuration against the baseline, every metric
  (``summary_stats.paired``). Hybrid ``best``: the best variant per metric against each other
  variant (paired t-test, Holm-adjusted over the family). Scheduled ``history``: the metric of
  each run and its change from the previous run, flagged when it dropped significantly.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from workbench.errors import BadRequest
from workbench.experiments import summary_holes
from workbench.experiments.hybrid_scoring import variant_grid, variant_parameters_string
from workbench.experiments.summary_stats import describe, holm, paired, paired_t_p
from workbench.metrics import format_name, pairwise_names, pointwise_names

POINTWISE = "POINTWISE_EVALUATION"
PAIRWISE = "PAIRWISE_COMPARISON"
HYBRID = "HYBRID_OPTIMIZER"
LOW_COVERAGE = 0.5


@dataclass
class Run:
    """What one run stored: the experiment's own (``run_id`` None) or a scheduled one."""

    results: list[dict[str, Any]]
    evaluations: list[dict[str, Any]] = field(default_factory=list)
    run_id: str | None = None
    timestamp: str | None = None
    variant_errors: int = 0


@dataclass
class Row:
    """One configuration or hybrid variant: per-query metric values and top-k hits."""

    config_id: str
    parameters: dict[str, Any] | None = None
    variant_id: str | None = None
    values: dict[str, list[float]] = field(default_factory=dict)
    hits: list[list[str]] = field(default_factory=list)


def metric_names(experiment: Mapping[str, Any], run: Run | None = None) -> list[str]:
    """The standard metrics of the experiment's type, then, for a ``run`` whose results stored
    them, the condensed ones."""
    if experiment.get("type") == PAIRWISE:
        return pairwise_names()
    names = pointwise_names(int(experiment.get("size") or 10))
    if run is not None and summary_holes.stored(run.evaluations):
        names += _condensed_names(experiment)
    return names


def metric_choices(experiment: Mapping[str, Any]) -> list[str]:
    """Every metric a summary of the experiment may be asked for (``metric``): the standard
    ones and the condensed ones its results may hold."""
    return metric_names(experiment) + _condensed_names(experiment)


def _condensed_names(experiment: Mapping[str, Any]) -> list[str]:
    return summary_holes.condensed_names(str(experiment.get("type")),
                                         int(experiment.get("size") or 10))


def default_metric(experiment: Mapping[str, Any]) -> str:
    if experiment.get("type") == PAIRWISE:
        return "jaccard"
    return f"NDCG@{int(experiment.get('size') or 10)}"


def query_texts(results: Iterable[Mapping[str, Any]]) -> list[str]:
    """The queries of a run, in query-set order, each once."""
    seen: dict[str, None] = {}
    for result in results:
        text = result.get("queryText", result.get("query_text"))
        if isinstance(text, str):
            seen.setdefault(text, None)
    return list(seen)


def _metric_map(doc: Mapping[str, Any]) -> dict[str, float]:
    """Metric -> value of one stored result: the unrounded ``exactMetrics`` the workbench adds,
    else the plugin's two-decimal ``metrics`` (results written before exact values were kept,
    or by the plugin; ``rounded_results`` counts them)."""
    stored = doc.get("exactMetrics")
    if not isinstance(stored, list):
        stored = doc.get("metrics")
    values = {str(m.get("metric")): float(m.get("value") or 0.0) for m in stored or []
              if isinstance(m, Mapping)}
    values.update(summary_holes.values(doc))
    return values


def rounded_results(experiment: Mapping[str, Any], run: Run) -> tuple[int, int]:
    """(how many of a run's per-query results hold only the rounded metric values, of how
    many): its evaluation results, or a pairwise run's ``results`` entries."""
    docs = run.results if experiment.get("type") == PAIRWISE else run.evaluations
    return sum(1 for doc in docs if not isinstance(doc.get("exactMetrics"), list)), len(docs)


def _with_hit_rate(values: dict[str, float], k: int) -> dict[str, float]:
    """A result stored without ``HitRate@k`` (written by the plugin, or before the workbench wrote
    it) gets it from its MRR, so its summary does not read as no hits at all.

    Both look at the same relevant flags, and HitRate@k is 1 exactly when MRR is above 0; the
    stored MRR of a hit is at least 1/k rounded to two decimals, so this is exact for k <= 200.
    """
    name, mrr = format_name("HitRate", k), format_name("MRR")
    if name not in values and mrr in values:
        values[name] = 1.0 if values[mrr] > 0 else 0.0
    return values


def rows_of(experiment: Mapping[str, Any], run: Run) -> tuple[list[str], list[Row]]:
    """(queries, rows) of one run: every row has one value per query and metric."""
    queries = query_texts(run.results)
    position = {q: i for i, q in enumerate(queries)}
    names = metric_names(experiment, run)
    configs = [str(c) for c in experiment.get("searchConfigurationList") or []]
    rows: list[Row] = []
    if experiment.get("type") == PAIRWISE:
        values = {name: [0.0] * len(queries) for name in names}
        hits: dict[str, list[list[str]]] = {c: [[] for _ in queries] for c in configs}
        for result in run.results:
            i = position.get(str(result.get("query_text", result.get("queryText"))))
            if i is None:
                continue
            for name, value in _metric_map(result).items():
                if name in values:
                    values[name][i] = value
            for snapshot in result.get("snapshots") or []:
                config = str(snapshot.get("searchConfigurationId"))
                if config in hits:
                    hits[config][i] = [str(d) for d in snapshot.get("docIds") or []]
        return queries, [Row(c, values=values, hits=hits[c]) for c in configs]
    if experiment.get("type") == HYBRID:
        for config in configs:
            for params in variant_grid():
                label = variant_parameters_string(params)
                rows.append(Row(config, parameters=params, variant_id=label))
    else:
        rows = [Row(c) for c in configs]
    index = {(row.config_id, row.variant_id): row for row in rows}
    for row in rows:
        row.values = {name: [0.0] * len(queries) for name in names}
        row.hits = [[] for _ in queries]
    k = int(experiment.get("size") or 10)
    for doc in run.evaluations:
        key = (str(doc.get("searchConfigurationId")),
               doc.get("experimentVariantParameters") if experiment.get("type") == HYBRID
               else None)
        found = index.get(key)
        i = position.get(str(doc.get("searchText")))
        if found is None or i is None:
            continue
        found.hits[i] = [str(d) for d in doc.get("documentIds") or []]
        for name, value in _with_hit_rate(_metric_map(doc), k).items():
            if name in found.values:
                found.values[name][i] = value
    return queries, rows


def coverage(row: Row, queries: Sequence[str], judged: Mapping[str, set[str]],
             k: int) -> dict[str, Any]:
    """Of the top-k hits over every query, how many have a judgment."""
    hits = judged_hits = 0
    for text, docs in zip(queries, row.hits, strict=True):
        top = docs[:k]
        hits += len(top)
        rated = judged.get(text) or set()
        judged_hits += sum(1 for d in top if d in rated)
    return {"k": k, "judgedHits": judged_hits, "hits": hits,
            "share": judged_hits / hits if hits else None}


def _row_summary(experiment: Mapping[str, Any], names: Mapping[str, str], row: Row,
                 queries: Sequence[str], judged: Mapping[str, set[str]] | None,
                 k: int) -> dict[str, Any]:
    with_hits = sum(1 for docs in row.hits if docs)
    counts: dict[str, Any] = {"run": len(queries), "withHits": with_hits}
    out: dict[str, Any] = {
        "searchConfigurationId": row.config_id, "name": names.get(row.config_id),
        "variantId": row.variant_id, "parameters": row.parameters, "queries": counts,
        "judgmentCoverage": None,
        "metrics": {name: describe(values) for name, values in row.values.items()},
    }
    if judged is not None:
        counts["judged"] = sum(1 for q in queries if judged.get(q))
        counts["withJudgedHits"] = sum(
            1 for q, docs in zip(queries, row.hits, strict=True)
            if any(d in (judged.get(q) or set()) for d in docs[:k]))
        out["judgmentCoverage"] = coverage(row, queries, judged, k)
    return out


def _coverage_warnings(experiment: Mapping[str, Any], rows: Sequence[Row],
                       queries: Sequence[str], judged: Mapping[str, set[str]],
                       k: int) -> list[dict[str, Any]]:
    warnings: list[dict[str, Any]] = []
    if queries and not any(judged.get(q) for q in queries):
        lists = ", ".join(str(j) for j in experiment.get("judgmentList") or []) or "none"
        warnings.append({
            "level": "error", "code": "no_judgments_matched",
            "message": f"no judgment matched any query of the query set "
                       f"[{experiment.get('querySetId')}] (judgment lists: {lists}): every "
                       "metric is 0 because nothing was judged, not because search is bad"})
        return warnings
    by_config: dict[str, list[int]] = {}
    for row in rows:  # hybrid: pooled over the configuration's variants
        cov = coverage(row, queries, judged, k)
        pooled = by_config.setdefault(row.config_id, [0, 0])
        pooled[0] += cov["judgedHits"]
        pooled[1] += cov["hits"]
    for config_id, (judged_hits, hits) in by_config.items():
        if hits and judged_hits / hits < LOW_COVERAGE:
            warnings.append({
                "level": "warning", "code": "low_judgment_coverage",
                "searchConfigurationId": config_id, "share": judged_hits / hits,
                "message": f"only {judged_hits / hits:.0%} of the top-{k} hits have a judgment "
                           f"(below {LOW_COVERAGE:.0%}); metrics count unjudged hits as "
                           "irrelevant"})
    return warnings


def _comparisons(rows: Sequence[Row], baseline: str, queries: Sequence[str], alpha: float,
                 permutations: int, metrics: Sequence[str]) -> list[dict[str, Any]]:
    base = next(row for row in rows if row.config_id == baseline)
    out = []
    for row in rows:
        if row is base:
            continue
        for name in metrics:
            b, c = base.values[name], row.values[name]
            result = paired(b, c, alpha, permutations)
            out.append({"metric": name, "baseline": baseline, "candidate": row.config_id,
                        **result,
                        "perQuery": [{"query": q, "baseline": x, "candidate": y, "delta": y - x}
                                     for q, x, y in zip(queries, b, c, strict=True)]})
    return out


def _best(rows: Sequence[Row], metrics: Sequence[str], alpha: float) -> dict[str, Any]:
    """Per metric: the variant with the highest mean (the first in grid order on a tie) and a
    paired t-test against every other variant, Holm-adjusted over those comparisons."""
    out: dict[str, Any] = {}
    for name in metrics:
        means = [float(np.mean(row.values[name])) if row.values[name] else 0.0 for row in rows]
        best_at = int(np.argmax(means))
        best = rows[best_at]
        others = [(row, means[i]) for i, row in enumerate(rows) if i != best_at]
        raw = [paired_t_p(row.values[name], best.values[name]) for row, _ in others]
        adjusted = holm(raw)
        out[name] = {
            "searchConfigurationId": best.config_id, "variantId": best.variant_id,
            "parameters": best.parameters, "mean": means[best_at],
            "others": [{"searchConfigurationId": row.config_id, "variantId": row.variant_id,
                        "parameters": row.parameters, "mean": mean, "pValue": p, "pHolm": ph,
                        "significant": ph is not None and ph < alpha}
                       for (row, mean), p, ph in zip(others, raw, adjusted, strict=True)],
        }
    return out


def _emphasised(experiment: Mapping[str, Any], rows: Sequence[Row], baseline: str,
                best_key: tuple[str, str | None] | None) -> Row | None:
    """The row a scheduled run's history follows: the baseline configuration, or for the
    hybrid optimizer the variant that is best in the experiment's own run."""
    for row in rows:
        if best_key is not None:
            if (row.config_id, row.variant_id) == best_key:
                return row
        elif row.config_id == baseline:
            return row
    return None


def _history(experiment: Mapping[str, Any], history: Sequence[Run], baseline: str,
             best_key: tuple[str, str | None] | None, metric: str, alpha: float,
             permutations: int) -> list[dict[str, Any]]:
    """Each scheduled run (oldest first): every metric's mean of the followed row, and the
    change of ``metric`` from the previous run, paired over the queries both ran."""
    out: list[dict[str, Any]] = []
    previous: dict[str, float] | None = None
    for run in history:
        queries, rows = rows_of(experiment, run)
        row = _emphasised(experiment, rows, baseline, best_key)
        if row is None:
            continue
        entry: dict[str, Any] = {
            "scheduledRunId": run.run_id, "timestamp": run.timestamp,
            "searchConfigurationId": row.config_id, "variantId": row.variant_id,
            "metrics": {name: {"mean": describe(values)["mean"], "n": len(values)}
                        for name, values in row.values.items()},
            "change": None,
        }
        # A run stored before the condensed metrics has none: no change from or to it.
        current = dict(zip(queries, row.values[metric], strict=True)) \
            if metric in row.values else None
        if previous is not None and current is not None:
            common = [q for q in queries if q in previous]
            result = paired([previous[q] for q in common], [current[q] for q in common], alpha,
                            permutations)
            p = result["tTest"]["pValue"]
            delta = result["meanDelta"]
            entry["change"] = {
                "metric": metric, "n": result["n"], "meanDelta": delta, "pValue": p,
                "wilcoxonPValue": result["wilcoxon"]["pValue"],
                "droppedSignificantly": bool(delta is not None and delta < 0 and p is not None
                                             and p < alpha)}
        out.append(entry)
        previous = current
    return out


def build(experiment: Mapping[str, Any], names: Mapping[str, str], own: Run,
          judged: Mapping[str, set[str]] | None, history: Sequence[Run], *, baseline: str,
          metric: str, alpha: float, permutations: int) -> dict[str, Any]:
    """The ``_summary`` document (see the module docstring)."""
    kind = str(experiment.get("type"))
    k = int(experiment.get("size") or 10)
    metrics = metric_names(experiment, own)
    if metric not in metrics:
        raise BadRequest(f"metric [{metric}] is not stored in the results of experiment "
                         f"[{experiment.get('id')}]: they were written before the workbench "
                         "computed condensed metrics; run the experiment again to have them")
    # Comparisons and best variants: the metric asked for, then the standard ones (a condensed
    # metric only when asked for: the figures above list them all).
    ordered = [metric] + [m for m in metric_names(experiment) if m != metric]
    queries, rows = rows_of(experiment, own)
    uses_judgments = kind in (POINTWISE, HYBRID)
    judged_map = judged if uses_judgments else None
    summary: dict[str, Any] = {
        "experimentId": experiment.get("id"), "type": kind, "status": experiment.get("status"),
        "querySetId": experiment.get("querySetId"),
        "judgmentList": list(experiment.get("judgmentList") or []), "size": k,
        "queries": {"total": len(queries)},
        "baseline": baseline, "metric": metric, "alpha": alpha,
        "configurations": [_row_summary(experiment, names, row, queries, judged_map, k)
                           for row in rows],
        "warnings": [], "comparisons": [],
    }
    if kind == PAIRWISE and len(rows) == 2:
        summary["pairwise"] = {"searchConfigurationIds": [r.config_id for r in rows],
                               "metrics": summary["configurations"][0]["metrics"]}
    if judged_map is not None:
        summary["warnings"].extend(_coverage_warnings(experiment, rows, queries, judged_map, k))
    rounded, stored = rounded_results(experiment, own)
    if rounded:
        summary["warnings"].append({
            "level": "warning", "code": "rounded_values", "results": rounded,
            "message": f"{rounded} of {stored} per-query results were written "
                       "without exact metric values (before the workbench stored them, or by "
                       "the plugin); their values are rounded to two decimals, which turns small "
                       "differences into ties and moves every p-value: run the experiment again "
                       "for exact figures"})
    if uses_judgments:
        summary["warnings"].extend(summary_holes.warnings(rows, names, k, metric))
    if own.variant_errors:
        summary["warnings"].append({
            "level": "warning", "code": "variant_errors",
            "message": f"{own.variant_errors} (query, variant) searches failed; they count as 0"})
    if kind == POINTWISE and len(rows) >= 2:
        summary["comparisons"] = _comparisons(rows, baseline, queries, alpha, permutations,
                                              ordered)
    best_key = None
    if kind == HYBRID and rows:
        summary["best"] = _best(rows, ordered, alpha)
        top = summary["best"][metric]
        best_key = (top["searchConfigurationId"], top["variantId"])
    if history:
        summary["history"] = _history(experiment, history, baseline, best_key, metric, alpha,
                                      permutations)
    return summary
