"""``workbench gate``: does a candidate search configuration make a metric significantly worse?

The decision reads the comparison the experiment summary makes (paired over the query set's
queries). A candidate fails when its mean is lower than the baseline's by more than ``margin``
*and* the paired t-test's two-sided p-value is below ``alpha``: a drop that is small, or that the
queries do not support, passes. Exit codes: 0 pass, 1 regression, 2 usage or infrastructure error
(including a run whose judgments match no query, where no verdict is possible).

With human labels (``--human-judgments``: a judgment list people made for part of the query
set) the decision reads the prediction-powered comparison instead (the summary's
``humanJudgments``): the candidate fails when the PPI estimate of the difference of the
human-judged metric is below ``-margin`` *and* its (1 - alpha) interval lies below zero, so the
judge's own error is part of the verdict.
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
    human: dict[str, Any] | None = None  # the PPI comparison, when deciding on human labels

    @property
    def p_value(self) -> float:
        if self.human is not None:
            value = self.human.get("pValue")
            return 1.0 if value is None else float(value)
        return _t_p(self.comparison)

    @property
    def delta(self) -> float:
        if self.human is not None:
            return float((self.human.get("ppi") or {}).get("estimate") or 0.0)
        return float(self.comparison["meanDelta"])


class GateError(Exception):
    """No verdict is possible (missing metric or comparison, no judgment matched)."""


def decide(summary: dict[str, Any], candidate: str, metric: str, margin: float,
           alpha: float, human: bool = False) -> GateDecision:
    """The verdict for ``candidate`` on ``metric`` from a ``_summary`` answer (``human``: from
    its prediction-powered comparison)."""
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
    if human:
        return _decide_human(summary, comparison, margin, alpha)
    p_value = (comparison.get("tTest") or {}).get("pValue")
    dropped = float(comparison["meanDelta"]) < -margin
    significant = p_value is not None and float(p_value) < alpha
    return GateDecision(REGRESSION if dropped and significant else PASS, str(comparison["metric"]),
                   comparison, margin, alpha)


def _decide_human(summary: dict[str, Any], comparison: dict[str, Any], margin: float,
                  alpha: float) -> GateDecision:
    section = summary.get("humanJudgments")
    if not section:
        raise GateError("the summary has no humanJudgments section")
    found = [c for c in section.get("comparisons") or []
             if c.get("candidate") == comparison["candidate"]
             and c.get("metric") == comparison["metric"]]
    if not found or not (found[0].get("ppi") or {}).get("ci"):
        raise GateError(f"the human labels give no interval for {comparison['metric']} "
                        f"(labelled queries: {(section.get('queries') or {}).get('labelled')}; "
                        "at least 2 are needed)")
    human = found[0]
    estimate = float(human["ppi"]["estimate"])
    high = float(human["ppi"]["ci"][1])
    code = REGRESSION if estimate < -margin and high < 0.0 else PASS
    return GateDecision(code, str(comparison["metric"]), comparison, margin, alpha, human)


def explain(verdict: GateDecision, names: dict[str, str], experiment_id: str, worst: int = 5
            ) -> list[str]:
    """A one-screen explanation of the verdict, for a CI log."""
    c = verdict.comparison
    failed = verdict.code == REGRESSION
    head = (f"FAIL: {verdict.metric} dropped by {-verdict.delta:.4f} (> margin {verdict.margin})"
            + (f" with p = {verdict.p_value:.3g} < alpha {verdict.alpha}"
               if verdict.human is None else
               f", its {1 - verdict.alpha:.0%} interval below 0 after correcting with human "
               "labels") if failed else
            f"PASS: {verdict.metric} {_why_pass(verdict)}")
    lines = [
        f"workbench gate {head}",
        f"  baseline   {names.get(c['baseline'], c['baseline'])}: "
        f"mean {c['baselineMean']:.4f}",
        f"  candidate  {names.get(c['candidate'], c['candidate'])}: "
        f"mean {c['candidateMean']:.4f}",
        f"  delta      {float(c['meanDelta']):+.4f} over {c['n']} queries "
        f"(wins {c['wins']}, losses {c['losses']}, ties {c['ties']})",
        f"  tests      paired t p = {_t_p(c):.3g}"
        + _other_test(c, "wilcoxon", "Wilcoxon") + _other_test(c, "randomization", "randomization")
        + (f"; Cohen's d {c['effectSize']['cohensD']:+.2f}"
           if (c.get("effectSize") or {}).get("cohensD") is not None else ""),
    ]
    if verdict.human is not None:
        lines += _human_lines(verdict)
    per_query = sorted(c.get("perQuery") or [], key=lambda q: q["delta"])
    losers = [q for q in per_query if q["delta"] < 0][:worst]
    if losers:
        lines.append("  worst queries (baseline -> candidate):")
        lines += [f"    {q['query'][:50]!r}: {q['baseline']:.3f} -> {q['candidate']:.3f}"
                  for q in losers]
    lines.append(f"  experiment {experiment_id}")
    return lines


def _human_lines(verdict: GateDecision) -> list[str]:
    """What the human labels say: the PPI estimate of the difference and its interval."""
    h = verdict.human or {}
    ppi = h.get("ppi") or {}
    low, high = ppi.get("ci") or (None, None)
    humans = h.get("humans") or {}
    return [
        f"  humans     PPI++ delta {float(ppi.get('estimate') or 0.0):+.4f}, "
        f"{1 - verdict.alpha:.0%} CI [{float(low or 0.0):+.4f}, {float(high or 0.0):+.4f}], "
        f"p = {verdict.p_value:.3g}; humans alone {float(humans.get('mean') or 0.0):+.4f} on "
        f"{humans.get('n')} labelled queries; judge bias {float(h.get('bias') or 0.0):+.4f}",
    ]


def _why_pass(verdict: GateDecision) -> str:
    if verdict.delta >= 0:
        return f"did not drop (delta {verdict.delta:+.4f})"
    if verdict.delta >= -verdict.margin:
        return f"dropped by {-verdict.delta:.4f}, within the margin {verdict.margin}"
    if verdict.human is not None:
        return (f"dropped by {-verdict.delta:.4f} (PPI estimate) but its interval reaches 0 "
                f"(p = {verdict.p_value:.3g})")
    return (f"dropped by {-verdict.delta:.4f} but not significantly "
            f"(p = {verdict.p_value:.3g} >= alpha {verdict.alpha})")


def _t_p(comparison: dict[str, Any]) -> float:
    value = (comparison.get("tTest") or {}).get("pValue")
    return 1.0 if value is None else float(value)


def _other_test(comparison: dict[str, Any], key: str, label: str) -> str:
    p_value = (comparison.get(key) or {}).get("pValue")
    return "" if p_value is None else f"; {label} p = {p_value:.3g}"
