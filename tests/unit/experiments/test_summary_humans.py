"""The judge-aware summary section and the label sampler, on small experiments: human-judged
values recomputed by hand, intervals checked against ``ppi-python``."""

from __future__ import annotations

import math

import numpy as np
import pytest
from ppi_py import classical_mean_ci, ppi_mean_ci
from scipy import stats

from workbench.experiments import label_sample, summary_humans
from workbench.experiments.summary_build import Row

K = 3


def ndcg(docs: list[str], ratings: dict[str, float]) -> float:
    """NDCG@3, exponential gain, by hand (docs/algorithms.md, "Pointwise metrics")."""
    dcg = sum((2 ** ratings.get(d, 0.0) - 1) / math.log2(i + 2) for i, d in enumerate(docs[:K]))
    ideal = sorted(ratings.values(), reverse=True)[:K]
    idcg = sum((2 ** r - 1) / math.log2(i + 2) for i, r in enumerate(ideal))
    return dcg / idcg if idcg > 0 else 0.0


def experiment() -> tuple[list[str], list[Row], dict[str, dict[str, float]]]:
    """Eight queries, two configurations; the judge's NDCG@3 of each query is made up (what a
    run stored), people rated the documents of five queries."""
    rng = np.random.default_rng(3)
    queries = [f"q{i}" for i in range(8)]
    rows = []
    for config in ("base", "cand"):
        hits = [[f"{q}-d{j}" for j in rng.permutation(4)[:3]] for q in queries]
        hits[7] = []  # no hits for q7: every metric 0
        values = {"NDCG@3": [float(v) for v in rng.random(8)]}
        values["NDCG@3"][7] = 0.0
        rows.append(Row(config, values=values, hits=hits))
    human = {q: {f"{q}-d{j}": float(rng.integers(0, 3)) for j in range(4)}
             for q in ("q0", "q2", "q3", "q5", "q7")}
    return queries, rows, human


def test_figures_of_each_configuration_equal_the_reference() -> None:
    queries, rows, human = experiment()
    section, warnings = summary_humans.build(rows, {"base": "Base"}, queries, human, "h1", K,
                                             "base", ["NDCG@3"], 0.05, "normal")
    labelled = [0, 2, 3, 5, 7]
    assert section["queries"] == {"total": 8, "labelled": 5, "unlabelled": 3}
    assert section["method"] == "PPI++" and section["confidence"] == 0.95
    assert section["interval"] == "normal"
    for row, config in zip(rows, section["configurations"], strict=True):
        y = np.array([ndcg(row.hits[i], human[queries[i]]) for i in labelled])
        f = np.array(row.values["NDCG@3"])[labelled]
        unl = np.array(row.values["NDCG@3"])[[1, 4, 6]]
        figs = config["metrics"]["NDCG@3"]
        low, high = ppi_mean_ci(y, f, unl, alpha=0.05)
        assert figs["ppi"]["ci"] == pytest.approx([float(low[0]), float(high[0])], abs=1e-9)
        assert figs["humans"]["mean"] == pytest.approx(y.mean(), abs=1e-12)
        alone = classical_mean_ci(y, alpha=0.05)
        assert figs["humans"]["ci"] == pytest.approx([float(alone[0]), float(alone[1])])
        assert figs["judge"] == {"mean": pytest.approx(np.mean(row.values["NDCG@3"])), "n": 8}
        assert figs["judgeOnLabelled"]["mean"] == pytest.approx(f.mean())
        assert figs["bias"] == pytest.approx(y.mean() - f.mean())
        assert figs["agreement"]["pearson"] == pytest.approx(np.corrcoef(y, f)[0, 1])
        se_alone = y.std() / math.sqrt(5)
        assert figs["effectiveLabelledQueries"] == pytest.approx(
            5 * (se_alone / figs["ppi"]["standardError"]) ** 2)
    assert section["configurations"][0]["name"] == "Base"
    # every top-3 hit of a labelled query is rated: full coverage, no coverage warning
    assert section["configurations"][0]["humanCoverage"] == {
        "k": 3, "judgedHits": 12, "hits": 12, "share": 1.0}
    assert [w["code"] for w in warnings] == ["few_changed_queries", "few_labelled_queries"]
    changed = section["comparisons"][0]["changedLabelledQueries"]
    assert 0 < changed < 5
    assert warnings[0]["message"] == (
        f"NDCG@3 of [cand] differs from the baseline's on only {changed} of the 5 labelled "
        "queries; an interval from fewer than 5 changed queries is too narrow: label more "
        "queries before trusting it")
    assert warnings[1]["message"] == ("people labelled 5 of the 8 queries; intervals from fewer "
                                      "than 20 cover the truth less often than they say")


def test_the_difference_is_paired_per_query() -> None:
    queries, rows, human = experiment()
    section, _ = summary_humans.build(rows, {}, queries, human, "h1", K, "base", ["NDCG@3"],
                                      0.1, "normal")
    (comparison,) = section["comparisons"]
    labelled = [0, 2, 3, 5, 7]
    y = np.array([ndcg(rows[1].hits[i], human[queries[i]])
                  - ndcg(rows[0].hits[i], human[queries[i]]) for i in labelled])
    judged = np.array(rows[1].values["NDCG@3"]) - np.array(rows[0].values["NDCG@3"])
    low, high = ppi_mean_ci(y, judged[labelled], judged[[1, 4, 6]], alpha=0.1)
    assert comparison["ppi"]["ci"] == pytest.approx([float(low[0]), float(high[0])], abs=1e-9)
    assert (comparison["metric"], comparison["baseline"], comparison["candidate"]) == (
        "NDCG@3", "base", "cand")
    z = comparison["ppi"]["estimate"] / comparison["ppi"]["standardError"]
    assert comparison["pValue"] == pytest.approx(math.erfc(abs(z) / math.sqrt(2)))
    assert comparison["significant"] == (low[0] > 0 or high[0] < 0)


def test_the_default_interval_is_t() -> None:
    queries, rows, human = experiment()
    section, _ = summary_humans.build(rows, {}, queries, human, "h1", K, "base", ["NDCG@3"],
                                      0.05)
    assert section["interval"] == "t"
    figs = section["configurations"][0]["metrics"]["NDCG@3"]
    labelled = [0, 2, 3, 5, 7]
    y = np.array([ndcg(rows[0].hits[i], human[queries[i]]) for i in labelled])
    f = np.array(rows[0].values["NDCG@3"])
    lam = figs["ppi"]["lambda"]
    se = math.sqrt(np.var(lam * f[[1, 4, 6]], ddof=1) / 3
                   + np.var(y - lam * f[labelled], ddof=1) / 5)
    half = stats.t.ppf(0.975, 4) * se
    assert figs["ppi"]["ci"] == pytest.approx(
        [figs["ppi"]["estimate"] - half, figs["ppi"]["estimate"] + half], abs=1e-12)
    assert figs["humans"]["ci"] == pytest.approx(
        list(stats.t.interval(0.95, 4, loc=y.mean(), scale=stats.sem(y))), abs=1e-12)


def test_unrated_hits_and_one_labelled_query() -> None:
    queries, rows, _ = experiment()
    human = {"q1": {rows[0].hits[1][0]: 2.0}}
    section, warnings = summary_humans.build(rows, {}, queries, human, "h1", K, "base",
                                             ["NDCG@3"], 0.05)
    base = section["configurations"][0]
    assert base["humanCoverage"]["judgedHits"] == 1 and base["humanCoverage"]["hits"] == 3
    figs = base["metrics"]["NDCG@3"]
    assert figs["ppi"] is None and figs["humans"]["ci"] is None
    assert figs["humans"]["mean"] == 1.0  # the one rated document is base's first hit
    assert section["comparisons"][0]["pValue"] is None
    assert section["comparisons"][0]["significant"] is False
    assert [w["code"] for w in warnings] == ["low_human_coverage", "low_human_coverage",
                                             "few_changed_queries", "few_labelled_queries"]
    assert warnings[-1]["message"].endswith("and are not given")


def test_every_query_labelled_gives_the_humans_alone() -> None:
    queries, rows, _ = experiment()
    human = {q: {f"{q}-d0": 1.0, f"{q}-d1": 0.0} for q in queries}
    section, warnings = summary_humans.build(rows, {}, queries, human, "h1", K, "base",
                                             ["NDCG@3"], 0.05)
    figs = section["configurations"][0]["metrics"]["NDCG@3"]
    assert figs["ppi"]["lambda"] == 0.0
    assert figs["ppi"]["ci"] == pytest.approx(figs["humans"]["ci"])
    assert "all_queries_labelled" in [w["code"] for w in warnings]


def test_draw_is_uniform_seeded_and_in_query_set_order() -> None:
    queries = [f"q{i}" for i in range(20)]
    first = label_sample.draw(queries, 5, seed=11)
    assert first == label_sample.draw(queries, 5, seed=11)
    assert len(set(first)) == 5 and first == sorted(first, key=queries.index)
    assert label_sample.draw(queries, 50, seed=1) == queries
    # uniform: over many seeds every query is drawn about budget / N of the time
    counts = np.zeros(20)
    for seed in range(2000):
        for q in label_sample.draw(queries, 5, seed):
            counts[queries.index(q)] += 1
    assert np.all(np.abs(counts / 2000 - 0.25) < 0.04)


def test_pool_is_the_union_of_the_top_k_in_rank_order() -> None:
    """Rank 1 of every configuration, then rank 2, ...; each document once, credited to the
    configuration that reached it first."""
    rows = [Row("a", hits=[["d1", "d2", "d3", "d4"], ["x"]]),
            Row("b", hits=[["d2", "d5"], []])]
    assert label_sample.pool(rows, ["q1", "q2"], ["q1"], 3) == [
        ("q1", "d1", "a"), ("q1", "d2", "b"), ("q1", "d5", "b"), ("q1", "d3", "a")]


def test_the_report_shows_the_corrected_figures() -> None:
    from workbench.experiments import report

    queries, rows, human = experiment()
    section, warnings = summary_humans.build(rows, {"base": "Base", "cand": "Cand"}, queries,
                                             human, "h1", K, "base", ["NDCG@3"], 0.05)
    section["name"] = "people"
    summary = {"experimentId": "e", "type": "POINTWISE_EVALUATION", "querySetId": "qs",
               "judgmentList": ["j"], "size": K, "queries": {"total": 8}, "baseline": "base",
               "metric": "NDCG@3", "alpha": 0.05, "warnings": warnings, "comparisons": [],
               "configurations": [{"searchConfigurationId": c, "name": c.title(),
                                   "queries": {"run": 8, "withHits": 7},
                                   "metrics": {"NDCG@3": {"mean": 0.5, "median": 0.5,
                                                          "sd": 0.1, "ci95": [0.4, 0.6]}}}
                                  for c in ("base", "cand")],
               "humanJudgments": section}
    md = report.markdown(summary)
    assert ("## NDCG@3 corrected by human labels (PPI++, t intervals): 5 of 8 queries "
            "labelled in people") in md
    base = section["configurations"][0]["metrics"]["NDCG@3"]
    low, high = base["ppi"]["ci"]
    assert (f"| Base | {base['judge']['mean']:.4f} | {base['humans']['mean']:.4f} | "
            f"{base['ppi']['estimate']:.4f} | [{low:.4f}, {high:.4f}] |") in md
    assert "| Cand - Base |" in md and "few_labelled_queries" in md
