"""``workbench gate``: does a candidate search configuration make a metric significantly worse?

The decision reads the comparison the experiment summary makes (paired over the query set's
queries). A candidate fails when its mean is lower than the baseline's by more than ``margin``
*and* the paired t-test's two-sided p-value is below ``alpha``: a drop that is small, or that the
queries do not support, passes. Exit codes: 0 pass, 1 regression, 2 usage or infrastructure error
(including a run whose judgments match no query, where no verdict is possible).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

PASS, REGRESSION, ERROR = 0, 1, 2


@dataclass(frozen=True)
class GateDecision:
    """The gate's decision and the figures behind it."""

    code: int
    metric: str
    comparison: dict[str, Any]
    margin: float
    alpha: float

    @property
    def p_value(self) -> float:
        return float((self.comparison.get("tTest") or {}).get("pValue", 1.0))

    @property
    def delta(self) -> float:
        return float(self.comparison["meanDelta"])


class GateError(Exception):
    """No verdict is possible (missing metric or comparison, no judgment matched)."""


def decide(summary: dict[str, Any], candidate: str, metric: str, margin: float,
           alpha: float) -> GateDecision:
    """The verdict for ``candidate`` on ``metric`` from a ``_summary`` answer."""
    errors = [w for w in summary.get("warnings") or [] if w.get("level") == "error"]
    if errors:
        raise GateError("; ".join(str(w.get("message")) for w in errors))
    comparisons = [c for c in summary.get("comparisons") or [] if c.get("candidate") == candidate]
    if not comparisons:
        raise GateError(f"the summary compares nothing with candidate {candidate}")
    chosen = [c for c in comparisons if str(c.get("metric")).lower() == metric.lower()]
    if not chosen:
        known = ", ".join(sorted({str(c.get("metric")) for c in comparisons}))
        raise GateError(f"no metric {metric} in this experiment (it has {known})")
    comparison = chosen[0]
    p_value = (comparison.get("tTest") or {}).get("pValue")
    dropped = float(comparison["meanDelta"]) < -margin
    significant = p_value is not None and float(p_value) < alpha
    return GateDecision(REGRESSION if dropped and significant else PASS, str(comparison["metric"]),
                   comparison, margin, alpha)


def explain(verdict: GateDecision, names: dict[str, str], experiment_id: str, worst: int = 5
            ) -> list[str]:
    """A one-screen explanation of the verdict, for a CI log."""
    c = verdict.comparison
    failed = verdict.code == REGRESSION
    head = (f"FAIL: {verdict.metric} dropped by {-verdict.delta:.4f} (> margin {verdict.margin})"
            f" with p = {verdict.p_value:.3g} < alpha {verdict.alpha}" if failed else
            f"PASS: {verdict.metric} {_why_pass(verdict)}")
    lines = [
        f"workbench gate {head}",
        f"  baseline   {names.get(c['baseline'], c['baseline'])}: "
        f"mean {c['baselineMean']:.4f}",
        f"  candidate  {names.get(c['candidate'], c['candidate'])}: "
        f"mean {c['candidateMean']:.4f}",
        f"  delta      {verdict.delta:+.4f} over {c['n']} queries "
        f"(wins {c['wins']}, losses {c['losses']}, ties {c['ties']})",
        f"  tests      paired t p = {verdict.p_value:.3g}"
        + _other_test(c, "wilcoxon", "Wilcoxon") + _other_test(c, "randomization", "randomization")
        + (f"; Cohen's d {c['effectSize']['cohensD']:+.2f}"
           if (c.get("effectSize") or {}).get("cohensD") is not None else ""),
    ]
    per_query = sorted(c.get("perQuery") or [], key=lambda q: q["delta"])
    losers = [q for q in per_query if q["delta"] < 0][:worst]
    if losers:
        lines.append("  worst queries (baseline -> candidate):")
        lines += [f"    {q['query'][:50]!r}: {q['baseline']:.3f} -> {q['candidate']:.3f}"
                  for q in losers]
    lines.append(f"  experiment {experiment_id}")
    return lines


def _why_pass(verdict: GateDecision) -> str:
    if verdict.delta >= 0:
        return f"did not drop (delta {verdict.delta:+.4f})"
    if verdict.delta >= -verdict.margin:
        return f"dropped by {-verdict.delta:.4f}, within the margin {verdict.margin}"
    return (f"dropped by {-verdict.delta:.4f} but not significantly "
            f"(p = {verdict.p_value:.3g} >= alpha {verdict.alpha})")


def _other_test(comparison: dict[str, Any], key: str, label: str) -> str:
    p_value = (comparison.get(key) or {}).get("pValue")
    return "" if p_value is None else f"; {label} p = {p_value:.3g}"
