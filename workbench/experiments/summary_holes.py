"""What an experiment's summary says about the holes of its judgment lists: the condensed metrics
its results stored (``condensedMetrics``: Judged@k, NDCG'@k, MAP'@k, Precision'@k;
docs/algorithms.md, "Condensed metrics and Judged@k") and two warnings.

* ``judged_spread``: the rows' mean Judged@k differ by more than ``JUDGED_SPREAD`` (absolute).
  The standard metrics count an unjudged hit as irrelevant, so they favour the row whose hits
  were judged: typically the configuration the judgment list was made for.
* ``condensed_disagrees``: the row that wins the summary's main metric (NDCG@k, or the metric
  asked for when it has a condensed twin) is not one that wins its condensed twin.

A row is a configuration (pointwise) or a hybrid variant; a winner is every row whose mean is
within ``TIE_TOLERANCE`` of the best, and the rankings disagree only when no row wins both.
Results stored before the workbench computed condensed metrics have none: the summary then
lists none and warns of neither.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Protocol

import numpy as np

from workbench.experiments.summary_stats import TIE_TOLERANCE
from workbench.metrics import format_name, opt_in_names, parse

JUDGED_SPREAD = 0.10
# A standard metric -> its condensed twin (base names).
TWINS = {"NDCG": "NDCG'", "MAP": "MAP'", "Precision": "Precision'"}
FIELD = "condensedMetrics"


class Row(Protocol):
    """A summary row (``summary_build.Row``) as far as the warnings read it."""

    config_id: str
    variant_id: str | None
    values: dict[str, list[float]]


def condensed_names(kind: str, k: int) -> list[str]:
    """The condensed names a pointwise or hybrid experiment's results store (none otherwise)."""
    return opt_in_names(k) if kind in ("POINTWISE_EVALUATION", "HYBRID_OPTIMIZER") else []


def stored(evaluations: Iterable[Mapping[str, Any]]) -> bool:
    """Whether a run's evaluation results hold condensed values (written since they exist)."""
    return any(isinstance(doc.get(FIELD), list) for doc in evaluations)


def values(doc: Mapping[str, Any]) -> dict[str, float]:
    """Metric -> value of the condensed metrics one evaluation result stored (none: empty)."""
    found = doc.get(FIELD)
    return {str(m.get("metric")): float(m.get("value") or 0.0)
            for m in found if isinstance(m, Mapping)} if isinstance(found, list) else {}


def twins(metric: str, k: int) -> tuple[str, str]:
    """(standard, condensed) pair the disagreement is checked on: the asked metric and its twin
    when it has one (``NDCG@10`` or ``NDCG'@10`` -> both), else NDCG@k and NDCG'@k."""
    try:
        base, cut = parse(metric)
    except ValueError:
        base, cut = "NDCG", k
    standard = next((s for s, c in TWINS.items() if base in (s, c)), "NDCG")
    cut = k if cut is None else cut
    return format_name(standard, cut), format_name(TWINS[standard], cut)


def _label(row: Row, names: Mapping[str, str]) -> str:
    name = names.get(row.config_id) or row.config_id
    return f"{name} ({row.variant_id})" if row.variant_id else name


def _means(rows: Sequence[Row], metric: str) -> np.ndarray:
    return np.array([float(np.mean(row.values[metric])) if row.values[metric] else 0.0
                     for row in rows])


def _who(row: Row, names: Mapping[str, str], value: float) -> dict[str, Any]:
    return {"searchConfigurationId": row.config_id, "variantId": row.variant_id,
            "name": names.get(row.config_id), "mean": value}


def warnings(rows: Sequence[Row], names: Mapping[str, str], k: int,
             metric: str) -> list[dict[str, Any]]:
    """The ``judged_spread`` and ``condensed_disagrees`` warnings of a summary's rows (each row
    holding the condensed values), in that order; none for fewer than two rows."""
    judged = format_name("Judged", k)
    if len(rows) < 2 or any(judged not in row.values for row in rows):
        return []
    out: list[dict[str, Any]] = []
    shares = _means(rows, judged)
    most, least = int(np.argmax(shares)), int(np.argmin(shares))
    spread = float(shares[most] - shares[least])
    if spread > JUDGED_SPREAD + TIE_TOLERANCE:
        high, low = rows[most], rows[least]
        out.append({
            "level": "warning", "code": "judged_spread", "metric": judged,
            "spread": spread, "margin": JUDGED_SPREAD,
            "mostJudged": _who(high, names, float(shares[most])),
            "leastJudged": _who(low, names, float(shares[least])),
            "message": f"mean {judged} differs by {spread:.2f} between [{_label(high, names)}] "
                       f"({shares[most]:.2f}) and [{_label(low, names)}] ({shares[least]:.2f}), "
                       f"more than {JUDGED_SPREAD:.2f}: the standard metrics count unjudged "
                       f"hits as irrelevant and so favour [{_label(high, names)}]; compare on "
                       f"NDCG'@{k}, or fill the holes by judging the unjudged hits"})
    standard, condensed = twins(metric, k)
    if standard not in rows[0].values or condensed not in rows[0].values:
        return out
    plain, primed = _means(rows, standard), _means(rows, condensed)
    plain_wins = plain >= plain.max() - TIE_TOLERANCE
    primed_wins = primed >= primed.max() - TIE_TOLERANCE
    if not np.any(plain_wins & primed_wins):
        a, b = int(np.argmax(plain_wins)), int(np.argmax(primed_wins))
        out.append({
            "level": "warning", "code": "condensed_disagrees",
            "metric": standard, "condensedMetric": condensed,
            "standardWinner": _who(rows[a], names, float(plain[a])),
            "condensedWinner": _who(rows[b], names, float(primed[b])),
            "message": f"[{_label(rows[a], names)}] wins on {standard} ({plain[a]:.4f}) but "
                       f"[{_label(rows[b], names)}] wins on {condensed} ({primed[b]:.4f}), "
                       f"which leaves unjudged hits out: the ranking on {standard} may come "
                       "from the holes of the judgment list rather than from the search"})
    return out
