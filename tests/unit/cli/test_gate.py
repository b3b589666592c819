"""The gate's decision from a summary: a drop beyond the margin that the queries support fails."""

from __future__ import annotations

from typing import Any

import pytest

from workbench.cli.gate import PASS, REGRESSION, GateError, decide, explain


def summary(delta: float, p_value: float, metric: str = "NDCG@10",
            warnings: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    return {"warnings": warnings or [], "comparisons": [{
        "metric": metric, "baseline": "base", "candidate": "cand", "n": 3,
        "baselineMean": 0.5, "candidateMean": 0.5 + delta, "meanDelta": delta,
        "wins": 0, "losses": 2, "ties": 1, "tTest": {"statistic": -3.0, "pValue": p_value},
        "perQuery": [{"query": "tv", "baseline": 0.5, "candidate": 0.2, "delta": -0.3}]}]}


@pytest.mark.parametrize(("delta", "p_value", "code"), [
    (-0.2, 0.001, REGRESSION),   # a significant drop beyond the margin
    (-0.2, 0.2, PASS),           # a drop the queries do not support
    (-0.005, 0.001, PASS),       # significant but within the margin
    (0.2, 0.001, PASS),          # significantly better
    (0.0, 1.0, PASS),            # a tie
])
def test_verdicts(delta: float, p_value: float, code: int) -> None:
    assert decide(summary(delta, p_value), "cand", "NDCG@10", 0.01, 0.05).code == code


def test_metric_names_match_case_insensitively_and_unknown_ones_are_errors() -> None:
    assert decide(summary(-0.2, 0.001), "cand", "ndcg@10", 0.01, 0.05).code == REGRESSION
    with pytest.raises(GateError, match=r"no metric MAP@10 in this experiment \(it has NDCG@10\)"):
        decide(summary(-0.2, 0.001), "cand", "MAP@10", 0.01, 0.05)


def test_an_error_warning_gives_no_verdict() -> None:
    bad = summary(0.0, 1.0, warnings=[{"level": "error", "code": "no_judgments_matched",
                                       "message": "no judgment matched any query"}])
    with pytest.raises(GateError, match="no judgment matched"):
        decide(bad, "cand", "NDCG@10", 0.01, 0.05)


def test_explanation_names_the_figures_and_the_worst_query() -> None:
    verdict = decide(summary(-0.2, 0.001), "cand", "NDCG@10", 0.01, 0.05)
    text = "\n".join(explain(verdict, {"base": "title", "cand": "brand"}, "exp-1"))
    assert text.startswith("workbench gate FAIL: NDCG@10 dropped by 0.2000 (> margin 0.01)")
    assert "'tv': 0.500 -> 0.200" in text and "experiment exp-1" in text


def test_summary_tables_show_names_with_brackets_as_written() -> None:
    from rich.console import Console

    from workbench.cli.output import summary_tables

    configs = [{"searchConfigurationId": i, "name": name, "queries": {"run": 2},
                "metrics": {"NDCG@10": {"n": 2, "mean": mean, "ci95": [mean - 0.1, mean + 0.1]}}}
               for i, name, mean in (("a", "[red] base", 0.5), ("b", "cand [v2]", 1234.5))]
    answer = {"experimentId": "e", "type": "POINTWISE_EVALUATION", "configurations": configs,
              "comparisons": [dict(summary(-0.2, 0.001)["comparisons"][0],
                                   baseline="a", candidate="b")]}
    console = Console(record=True, width=200)
    for table in summary_tables(answer):
        console.print(table)
    text = console.export_text()
    assert "[red] base" in text and "cand [v2] vs [red] base" in text
    assert "0.500 ±0.100" in text and "1234 ±0.100" in text  # 4 significant digits when big


def human_summary(estimate: float, ci: tuple[float, float], p_value: float) -> dict[str, Any]:
    """A summary whose judge says nothing changed but whose human-corrected comparison says
    ``estimate`` with interval ``ci``."""
    answer = summary(0.0, 1.0)
    answer["humanJudgments"] = {"queries": {"labelled": 30}, "comparisons": [{
        "metric": "NDCG@10", "baseline": "base", "candidate": "cand", "pValue": p_value,
        "ppi": {"estimate": estimate, "ci": list(ci)}, "humans": {"mean": estimate, "n": 30},
        "bias": -0.01, "significant": ci[1] < 0 or ci[0] > 0}]}
    return answer


@pytest.mark.parametrize(("estimate", "ci", "code"), [
    (-0.1, (-0.15, -0.05), REGRESSION),  # the interval lies below 0, beyond the margin
    (-0.1, (-0.25, 0.05), PASS),         # the interval reaches 0
    (-0.005, (-0.008, -0.002), PASS),    # below 0 but within the margin
    (0.0, (0.0, 0.0), PASS),             # a tie
])
def test_verdicts_on_human_labels(estimate: float, ci: tuple[float, float], code: int) -> None:
    verdict = decide(human_summary(estimate, ci, 0.01), "cand", "NDCG@10", 0.01, 0.05,
                     human=True)
    assert verdict.code == code and verdict.delta == estimate
    text = "\n".join(explain(verdict, {}, "exp-1"))
    assert "humans     PPI++ delta" in text and "on 30 labelled queries" in text
    # the judge alone (no human labels) saw no change: it passes whatever the humans say
    assert decide(human_summary(estimate, ci, 0.01), "cand", "NDCG@10", 0.01, 0.05).code == PASS


def test_human_verdict_needs_the_section_and_an_interval() -> None:
    with pytest.raises(GateError, match="no humanJudgments section"):
        decide(summary(0.0, 1.0), "cand", "NDCG@10", 0.01, 0.05, human=True)
    one = human_summary(0.0, (0.0, 0.0), 1.0)
    one["humanJudgments"]["comparisons"][0]["ppi"] = None
    one["humanJudgments"]["queries"]["labelled"] = 1
    with pytest.raises(GateError, match=r"no interval for NDCG@10 \(labelled queries: 1; at "
                                        "least 2 are needed\\)"):
        decide(one, "cand", "NDCG@10", 0.01, 0.05, human=True)
