"""Checks of ``_summary`` and ``_report`` on the ESCI experiments of test_esci_end_to_end: every
figure recomputed here from the stored evaluation results with numpy, and every p-value with
``scipy.stats`` (Holm's adjustment and the randomization test written out independently).

With ``WORKBENCH_REPORT_DIR`` set, the HTML reports and their Chromium screenshots are kept there
(the pictures in docs/guide.md are made by its own run, with scripts/doc_pictures.py).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from opensearchpy import OpenSearch
from opensearchpy.helpers import scan
from scipy import stats

from tests.support import browser
from tests.support.api import Api

K = 10
METRICS = [f"Coverage@{K}", f"Precision@{K}", f"Recall@{K}", f"MAP@{K}", "MRR", f"DCG@{K}",
           f"NDCG@{K}", f"HitRate@{K}"]
EVALUATIONS = "search-relevance-evaluation-result"


def summary_of(api: Api, experiment_id: str, **params: str) -> dict[str, Any]:
    reply = api.srw("GET", f"/experiments/{experiment_id}/_summary", params=params or None)
    assert reply.status == 200, reply.data[:1000]
    return reply.json  # type: ignore[no-any-return]


def check_describe(figures: dict[str, Any], values: np.ndarray) -> None:
    n = values.size
    assert figures["n"] == n
    assert figures["mean"] == pytest.approx(values.mean(), abs=1e-12)
    assert figures["median"] == pytest.approx(np.median(values), abs=1e-12)
    assert figures["sd"] == pytest.approx(values.std(ddof=1), abs=1e-12)
    low, high = stats.t.interval(0.95, n - 1, loc=values.mean(), scale=stats.sem(values))
    assert figures["ci95"] == pytest.approx([low, high], abs=1e-12)


def check_tie(comparison: dict[str, Any]) -> None:
    """No difference on any query: every test says so without a statistic that needs variance
    (scipy answers NaN there; the summary None, and p = 1)."""
    assert comparison["tTest"] == {"statistic": None, "pValue": 1.0}
    assert comparison["wilcoxon"]["pValue"] == 1.0
    assert comparison["randomization"]["pValue"] == 1.0
    assert comparison["effectSize"]["cohensD"] is None and comparison["significant"] is False
    assert all(p["delta"] == 0 for p in comparison["perQuery"])


def sign_flip_p(deltas: np.ndarray, rounds: int = 20_000) -> float:
    """An independent paired randomization test (another seed, one flip at a time)."""
    rng = np.random.default_rng(12345)
    observed = abs(deltas.mean())
    flips = rng.integers(0, 2, size=(rounds, deltas.size)) * 2 - 1
    return float((np.abs((flips * deltas).mean(axis=1)) >= observed - 1e-12).mean())


def holm_reference(pvalues: list[float]) -> list[float]:
    """Holm by its definition: the i-th smallest p (1-based) times (m - i + 1), then the running
    maximum in that order, capped at 1."""
    m = len(pvalues)
    order = np.argsort(pvalues, kind="stable")
    adjusted = np.empty(m)
    running = 0.0
    for i, index in enumerate(order, start=1):
        running = max(running, (m - i + 1) * pvalues[index])
        adjusted[index] = min(1.0, running)
    return adjusted.tolist()


def per_query(evaluations: list[dict[str, Any]], queries: list[str],
              key: Any) -> dict[Any, dict[str, np.ndarray]]:
    """key(evaluation) -> metric -> values over ``queries`` (0 where a query has no result),
    from the exact values stored beside the rounded ones (what the summary reads)."""
    position = {q: i for i, q in enumerate(queries)}
    out: dict[Any, dict[str, np.ndarray]] = {}
    for doc in evaluations:
        values = out.setdefault(key(doc), {m: np.zeros(len(queries)) for m in METRICS})
        for metric in doc["exactMetrics"]:
            values[metric["metric"]][position[doc["searchText"]]] = metric["value"]
    return out


def keep_report(api: Api, experiment_id: str, name: str, plots: int) -> None:
    """Open the HTML report in headless Chromium: every plot decoded, the page not blank."""
    reply = api.srw("GET", f"/experiments/{experiment_id}/_report", params={"format": "html"})
    assert reply.status == 200, reply.data[:500]
    folder = Path(os.environ.get("WORKBENCH_REPORT_DIR") or "/tmp")
    folder.mkdir(parents=True, exist_ok=True)
    page = folder / f"esci-{name}-report.html"
    page.write_bytes(reply.data)
    rendered = browser.render(page)
    assert len(rendered.images) == plots, rendered.images
    assert all(int(i["naturalWidth"]) > 300 and int(i["naturalHeight"]) > 100
               for i in rendered.images), rendered.images
    assert browser.colours(rendered.screenshot) > 100
    (folder / f"esci-{name}-report.png").write_bytes(rendered.screenshot)


def check_pointwise_summary(api: Api, experiment_id: str, esci: dict[str, Any],
                            evaluations: list[dict[str, Any]]) -> None:
    queries: list[str] = esci["queries"]
    summary = summary_of(api, experiment_id)
    assert summary["queries"] == {"total": 150} and summary["baseline"] == esci["title"]
    values = per_query(evaluations, queries, lambda e: e["searchConfigurationId"])
    judged = [q for q in queries if esci["ratings"].get(q)]
    rows = {r["searchConfigurationId"]: r for r in summary["configurations"]}
    assert list(rows) == [esci["title"], esci["multi"]]
    for config_id, row in rows.items():
        mine = [e for e in evaluations if e["searchConfigurationId"] == config_id]
        assert row["queries"]["run"] == 150 and row["queries"]["withHits"] == len(mine)
        assert row["queries"]["judged"] == len(judged)
        top = [(e["searchText"], d) for e in mine for d in e["documentIds"][:K]]
        rated = sum(1 for q, d in top if d in esci["ratings"].get(q, {}))
        assert row["judgmentCoverage"] == {"k": K, "judgedHits": rated, "hits": len(top),
                                           "share": rated / len(top)}
        for metric in METRICS:
            check_describe(row["metrics"][metric], values[config_id][metric])
    low = {w["searchConfigurationId"] for w in summary["warnings"]
           if w["code"] == "low_judgment_coverage"}
    assert low == {c for c, r in rows.items() if r["judgmentCoverage"]["share"] < 0.5}
    assert not [w for w in summary["warnings"] if w["level"] == "error"]

    assert [c["metric"] for c in summary["comparisons"]] == [f"NDCG@{K}"] + [
        m for m in METRICS if m != f"NDCG@{K}"]
    for comparison in summary["comparisons"]:
        base = values[esci["title"]][comparison["metric"]]
        cand = values[esci["multi"]][comparison["metric"]]
        deltas = np.round(cand - base, 10)
        assert comparison["meanDelta"] == pytest.approx(deltas.mean(), abs=1e-12)
        assert (comparison["wins"], comparison["losses"], comparison["ties"]) == (
            int((deltas > 0).sum()), int((deltas < 0).sum()), int((deltas == 0).sum()))
        if not deltas.any():  # the same on every query (HitRate@10 here): a tie, p = 1
            check_tie(comparison)
            continue
        t = stats.ttest_rel(cand, base)
        assert comparison["tTest"]["statistic"] == pytest.approx(t.statistic, rel=1e-6)
        assert comparison["tTest"]["pValue"] == pytest.approx(t.pvalue, rel=1e-6)
        w = stats.wilcoxon(deltas)
        assert comparison["wilcoxon"]["statistic"] == pytest.approx(w.statistic)
        assert comparison["wilcoxon"]["pValue"] == pytest.approx(w.pvalue, rel=1e-6)
        assert comparison["randomization"]["pValue"] == pytest.approx(sign_flip_p(deltas),
                                                                      abs=0.02)
        assert comparison["effectSize"]["cohensD"] == pytest.approx(
            deltas.mean() / deltas.std(ddof=1))
        assert comparison["significant"] == (t.pvalue < 0.05)
        assert [p["delta"] for p in comparison["perQuery"]] == pytest.approx(cand - base)
    ndcg = summary["comparisons"][0]
    print(f"\nsummary NDCG@{K}: " + "; ".join(
        f"{r['name']} mean {r['metrics'][f'NDCG@{K}']['mean']:.4f} "
        f"CI [{r['metrics'][f'NDCG@{K}']['ci95'][0]:.4f}, "
        f"{r['metrics'][f'NDCG@{K}']['ci95'][1]:.4f}] coverage "
        f"{r['judgmentCoverage']['share']:.3f}" for r in rows.values())
        + f"; delta {ndcg['meanDelta']:+.4f} W/L/T {ndcg['wins']}/{ndcg['losses']}/"
          f"{ndcg['ties']} t p {ndcg['tTest']['pValue']:.4g} Wilcoxon p "
          f"{ndcg['wilcoxon']['pValue']:.4g} randomization p "
          f"{ndcg['randomization']['pValue']:.4g} d {ndcg['effectSize']['cohensD']:.3f}")
    keep_report(api, experiment_id, "pointwise", plots=2)


def check_pairwise_summary(api: Api, experiment_id: str, done: dict[str, Any]) -> None:
    summary = summary_of(api, experiment_id)
    assert summary["metric"] == "jaccard" and summary["comparisons"] == []
    for metric in ("jaccard", "rbo50", "rbo90", "frequencyWeighted"):
        values = np.array([next(m["value"] for m in r["exactMetrics"] if m["metric"] == metric)
                           for r in done["results"]])
        for row in summary["configurations"]:
            check_describe(row["metrics"][metric], values)
    for offset, row in enumerate(summary["configurations"]):
        assert row["judgmentCoverage"] is None
        assert row["queries"]["withHits"] == sum(
            1 for r in done["results"] if r["snapshots"][offset]["docIds"])


def check_hybrid_summary(api: Api, experiment_id: str, esci: dict[str, Any],
                         direct: OpenSearch) -> None:
    queries: list[str] = esci["queries"]
    evaluations = [h["_source"] for h in scan(
        direct, index=EVALUATIONS, query={"query": {"term": {"experimentId": experiment_id}}},
        _source=["searchText", "exactMetrics", "experimentVariantParameters"])]
    values = per_query(evaluations, queries, lambda e: e["experimentVariantParameters"])
    summary = summary_of(api, experiment_id)
    rows = summary["configurations"]
    assert len(rows) == 82 and {r["variantId"] for r in rows} == set(values)
    for row in rows:
        for metric in METRICS:
            check_describe(row["metrics"][metric], values[row["variantId"]][metric])
    for metric in METRICS:
        means = [values[r["variantId"]][metric].mean() for r in rows]
        best_at = int(np.argmax(means))  # the first of equal means, in the summary's order
        best = summary["best"][metric]
        assert best["variantId"] == rows[best_at]["variantId"]
        assert best["mean"] == pytest.approx(means[best_at], abs=1e-12)
        others = [r for i, r in enumerate(rows) if i != best_at]
        assert [o["variantId"] for o in best["others"]] == [r["variantId"] for r in others]
        top = values[best["variantId"]][metric]
        raw = []
        for other, row in zip(best["others"], others, strict=True):
            deltas = top - values[row["variantId"]][metric]
            p = 1.0 if not np.any(np.abs(deltas) > 1e-9) else float(
                stats.ttest_rel(top, values[row["variantId"]][metric]).pvalue)
            assert other["pValue"] == pytest.approx(p, rel=1e-6, abs=1e-300), row["variantId"]
            raw.append(p)
        assert [o["pHolm"] for o in best["others"]] == pytest.approx(holm_reference(raw),
                                                                     rel=1e-6, abs=1e-300)
    ndcg = summary["best"][f"NDCG@{K}"]
    print(f"\nhybrid best NDCG@{K}: {ndcg['variantId']} mean {ndcg['mean']:.4f}; "
          f"significantly better than {sum(o['significant'] for o in ndcg['others'])} of 81 "
          "(Holm)")
    keep_report(api, experiment_id, "hybrid", plots=2)
