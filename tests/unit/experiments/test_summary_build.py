"""The summary assembled from stored results, on small experiments worked by hand."""

from __future__ import annotations

from typing import Any

import pytest

from workbench.experiments import report
from workbench.experiments.hybrid_scoring import variant_grid, variant_parameters_string
from workbench.experiments.summary_build import LOW_COVERAGE, Run, build


def evaluation(config: str, text: str, docs: list[str], ndcg: float,
               params: str | None = None, *, mrr: float = 0.0,
               hit_rate: float | None = None, exact: bool = True) -> dict[str, Any]:
    """A stored result with the plugin's seven metrics, and HitRate@3 when ``hit_rate`` is
    given (without it, as the plugin or an earlier workbench wrote it); ``exactMetrics`` the
    same values unless ``exact`` is False (a result written before they were stored)."""
    metrics = [{"metric": name, "value": 0.0} for name in
               ("Coverage@3", "Precision@3", "Recall@3", "MAP@3")]
    metrics += [{"metric": "MRR", "value": mrr}, {"metric": "DCG@3", "value": 0.0},
                {"metric": "NDCG@3", "value": ndcg}]
    if hit_rate is not None:
        metrics.append({"metric": "HitRate@3", "value": hit_rate})
    doc: dict[str, Any] = {"searchConfigurationId": config, "searchText": text,
                           "documentIds": docs, "metrics": metrics}
    if exact:
        doc["exactMetrics"] = [dict(m) for m in metrics]
    if params:
        doc["experimentVariantParameters"] = params
    return doc


POINTWISE = {"id": "e1", "type": "POINTWISE_EVALUATION", "status": "COMPLETED",
             "querySetId": "qs", "judgmentList": ["j"], "size": 3,
             "searchConfigurationList": ["a", "b"]}
RESULTS = [{"queryText": q} for q in ("q1", "q1", "q2", "q2", "q3", "q3")]


def pointwise(judged: dict[str, set[str]]) -> dict[str, Any]:
    own = Run(results=RESULTS, evaluations=[
        evaluation("a", "q1", ["d1", "d2", "d3", "d4"], 0.5),
        evaluation("b", "q1", ["d1", "d9"], 0.75),
        evaluation("a", "q2", ["d5"], 1.0),
        evaluation("b", "q2", ["d5"], 1.0),
        evaluation("b", "q3", ["d7"], 0.25),  # a found nothing for q3: it counts as 0
    ])
    return build(POINTWISE, {"a": "A", "b": "B"}, own, judged, [], baseline="a",
                 metric="NDCG@3", alpha=0.05, permutations=1000)


def test_exact_values_are_used_and_rounded_ones_are_flagged() -> None:
    """A result's ``exactMetrics`` win over its rounded ``metrics``; one without them is read
    rounded, and the summary says how many were."""
    exact = evaluation("a", "q1", ["d1"], 0.33)
    exact["exactMetrics"][-1]["value"] = 1 / 3
    old = evaluation("b", "q1", ["d1"], 0.67, exact=False)
    own = Run(results=[{"queryText": "q1"}] * 2, evaluations=[exact, old])
    summary = build(POINTWISE, {}, own, {"q1": {"d1"}}, [], baseline="a", metric="NDCG@3",
                    alpha=0.05, permutations=10)
    a, b = summary["configurations"]
    assert a["metrics"]["NDCG@3"]["mean"] == 1 / 3
    assert b["metrics"]["NDCG@3"]["mean"] == 0.67
    assert summary["comparisons"][0]["meanDelta"] == pytest.approx(0.67 - 1 / 3)
    rounded = [w for w in summary["warnings"] if w["code"] == "rounded_values"]
    assert rounded == [{
        "level": "warning", "code": "rounded_values", "results": 1,
        "message": "1 of 2 per-query results were written without exact metric values "
                   "(before the workbench stored them, or by the plugin); their values are "
                   "rounded to two decimals, which turns small differences into ties and moves "
                   "every p-value: run the experiment again for exact figures"}]


def test_pointwise_rows_counts_and_coverage() -> None:
    summary = pointwise({"q1": {"d1", "d2"}, "q2": {"d6"}})
    a, b = summary["configurations"]
    assert summary["queries"] == {"total": 3}
    assert a["name"] == "A" and a["variantId"] is None and a["parameters"] is None
    assert a["queries"] == {"run": 3, "withHits": 2, "judged": 2, "withJudgedHits": 1}
    assert b["queries"] == {"run": 3, "withHits": 3, "judged": 2, "withJudgedHits": 1}
    # a: top-3 of q1 (d1, d2, d3: two judged) and q2 (d5: none) -> 2 of 4
    assert a["judgmentCoverage"] == {"k": 3, "judgedHits": 2, "hits": 4, "share": 0.5}
    assert b["judgmentCoverage"] == {"k": 3, "judgedHits": 1, "hits": 4, "share": 0.25}
    assert a["metrics"]["NDCG@3"]["mean"] == pytest.approx(0.5)  # (0.5 + 1 + 0) / 3
    assert a["metrics"]["NDCG@3"]["median"] == 0.5
    assert b["metrics"]["NDCG@3"]["mean"] == pytest.approx(2 / 3)
    warnings = summary["warnings"]
    assert [(w["level"], w["code"], w.get("searchConfigurationId")) for w in warnings] == [
        ("warning", "low_judgment_coverage", "b")]  # a is at the threshold, not below it
    assert LOW_COVERAGE == 0.5
    [comparison] = [c for c in summary["comparisons"] if c["metric"] == "NDCG@3"]
    assert summary["comparisons"][0]["metric"] == "NDCG@3"  # the chosen metric first
    assert comparison["baseline"] == "a" and comparison["candidate"] == "b"
    assert (comparison["wins"], comparison["losses"], comparison["ties"]) == (2, 0, 1)
    assert [p["delta"] for p in comparison["perQuery"]] == pytest.approx([0.25, 0.0, 0.25])
    assert "best" not in summary and "history" not in summary


def test_no_judgment_matched_is_an_error() -> None:
    summary = pointwise({"another query": {"d1"}})
    assert [(w["level"], w["code"]) for w in summary["warnings"]] == [
        ("error", "no_judgments_matched")]


def test_hit_rate_is_summarised_and_compared_like_the_others() -> None:
    own = Run(results=RESULTS, evaluations=[
        evaluation("a", "q1", ["d1"], 0.5, mrr=0.5, hit_rate=1.0),
        evaluation("b", "q1", ["d1"], 0.0, hit_rate=0.0),
        evaluation("a", "q2", ["d5"], 1.0, mrr=1.0, hit_rate=1.0),
        evaluation("b", "q2", ["d5"], 1.0, mrr=1.0, hit_rate=1.0),
        evaluation("b", "q3", ["d7"], 0.3, mrr=0.33, hit_rate=1.0),  # a found nothing: 0
    ])
    summary = build(POINTWISE, {"a": "A", "b": "B"}, own, {"q1": {"d1"}}, [], baseline="a",
                    metric="HitRate@3", alpha=0.05, permutations=1000)
    a, b = summary["configurations"]
    assert list(a["metrics"]) == ["Coverage@3", "Precision@3", "Recall@3", "MAP@3", "MRR",
                                  "DCG@3", "NDCG@3", "HitRate@3"]
    assert a["metrics"]["HitRate@3"]["mean"] == pytest.approx(2 / 3)
    assert b["metrics"]["HitRate@3"]["mean"] == pytest.approx(2 / 3)
    first = summary["comparisons"][0]
    assert first["metric"] == "HitRate@3"
    assert (first["wins"], first["losses"], first["ties"]) == (1, 1, 1)
    assert [c["metric"] for c in summary["comparisons"]][1:] == [
        "Coverage@3", "Precision@3", "Recall@3", "MAP@3", "MRR", "DCG@3", "NDCG@3"]
    assert "| HitRate@3 |" in report.markdown(summary)


def test_hit_rate_of_results_stored_without_it_comes_from_their_mrr() -> None:
    """The plugin (and the workbench before HitRate@k) wrote seven metrics; a hit is MRR > 0."""
    own = Run(results=RESULTS, evaluations=[
        evaluation("a", "q1", ["d1", "d2", "d3"], 0.4, mrr=0.33),  # first relevant at rank 3
        evaluation("a", "q2", ["d5"], 0.0),  # no relevant hit
        evaluation("b", "q1", ["d1"], 0.0),
        evaluation("b", "q2", ["d5"], 0.0, hit_rate=0.0),
        evaluation("b", "q3", ["d7"], 0.7, mrr=1.0, hit_rate=1.0),
    ])
    summary = build(POINTWISE, {"a": "A", "b": "B"}, own, {"q1": {"d1"}}, [], baseline="a",
                    metric="NDCG@3", alpha=0.05, permutations=1000)
    a, b = summary["configurations"]
    assert a["metrics"]["HitRate@3"]["mean"] == pytest.approx(1 / 3)  # q3 found nothing
    assert b["metrics"]["HitRate@3"]["mean"] == pytest.approx(1 / 3)


def test_reports_render() -> None:
    summary = pointwise({"q1": {"d1", "d2"}, "q2": {"d6"}})
    md = report.markdown(summary)
    assert "| A | 3 | 2 | 2 | 50.0% | 0.5000 |" in md
    assert "low_judgment_coverage" in md
    own = Run(results=RESULTS, evaluations=[evaluation("b", "q3", ["d7"], 0.25)])
    rows = report.csv_rows(POINTWISE, own, summary).splitlines()
    assert rows[0] == "query,searchConfigurationId,configuration,variant,metric,value,hits"
    assert len(rows) == 1 + 2 * 3 * 8  # the plugin's seven metrics and HitRate@3
    assert "q3,b,B,,NDCG@3,0.25,1" in rows
    page = report.html(POINTWISE, own, summary)
    assert page.count('<img class="plot"') == 2  # delta bars, distributions
    assert "data:image/png;base64,iVBOR" in page


def test_hybrid_best_with_holm() -> None:
    grid = [variant_parameters_string(p) for p in variant_grid()]
    experiment = {"id": "h", "type": "HYBRID_OPTIMIZER", "status": "COMPLETED", "size": 3,
                  "querySetId": "qs", "judgmentList": ["j"], "searchConfigurationList": ["c"]}
    queries = [f"q{i}" for i in range(6)]
    evaluations = []
    for number, params in enumerate(grid):
        for i, text in enumerate(queries):
            value = 0.9 if number == 7 else round(0.1 * (i % 3) + 0.01 * (number % 5), 2)
            evaluations.append(evaluation("c", text, ["d"], value, params))
    own = Run(results=[{"query_text": q, "searchConfigurationId": "c"} for q in queries],
              evaluations=evaluations)
    summary = build(experiment, {"c": "C"}, own, {q: {"d"} for q in queries}, [],
                    baseline="c", metric="NDCG@3", alpha=0.05, permutations=100)
    assert len(summary["configurations"]) == 82 and summary["comparisons"] == []
    best = summary["best"]["NDCG@3"]
    assert best["variantId"] == grid[7] and best["mean"] == pytest.approx(0.9)
    assert best["parameters"] == variant_grid()[7]
    assert len(best["others"]) == 81
    raw = [o["pValue"] for o in best["others"]]
    order = sorted(range(81), key=lambda i: raw[i])
    # Holm: the smallest p is multiplied by 81, and adjusted p-values never decrease.
    assert best["others"][order[0]]["pHolm"] == pytest.approx(min(1.0, 81 * raw[order[0]]))
    adjusted = [best["others"][i]["pHolm"] for i in order]
    assert adjusted == sorted(adjusted)
    assert all(o["significant"] == (o["pHolm"] < 0.05) for o in best["others"])
    # Every variant counts every query, so coverage is pooled without a warning.
    assert summary["warnings"] == []
    page = report.html(experiment, own, summary)
    assert page.count('<img class="plot"') == 2  # distributions, heat map


def test_history_flags_a_significant_drop() -> None:
    def run(run_id: str, values: list[float]) -> Run:
        return Run(results=[{"queryText": f"q{i}"} for i in range(len(values))],
                   evaluations=[evaluation("a", f"q{i}", ["d"], v)
                                for i, v in enumerate(values)],
                   run_id=run_id, timestamp=f"2026-01-0{run_id}T00:00:00.000Z")
    experiment = {**POINTWISE, "searchConfigurationList": ["a"]}
    good = [0.8, 0.7, 0.9, 0.6, 0.8, 0.7, 0.9, 0.8]
    history = [run("1", good), run("2", good), run("3", [v - 0.3 + 0.01 * i
                                                         for i, v in enumerate(good)])]
    summary = build(experiment, {}, history[0], {}, history, baseline="a", metric="NDCG@3",
                    alpha=0.05, permutations=100)
    first, same, dropped = summary["history"]
    assert first["change"] is None and first["metrics"]["NDCG@3"]["mean"] == pytest.approx(0.775)
    assert same["change"]["meanDelta"] == 0.0 and not same["change"]["droppedSignificantly"]
    assert dropped["change"]["meanDelta"] == pytest.approx(-0.265)
    assert dropped["change"]["droppedSignificantly"] is True
    assert dropped["change"]["pValue"] < 0.001
    page = report.html(experiment, history[0], summary)
    assert "Scheduled runs: mean NDCG@3 over time" in page
