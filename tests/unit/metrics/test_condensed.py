"""Condensed-list metrics and Judged@k (docs/algorithms.md, "Condensed metrics and Judged@k"):
hand-worked lists, the standard metrics where everything is judged, batches, the registry, and
agreement with ir_measures on random queries."""

from __future__ import annotations

import math
from collections import defaultdict

import ir_measures
import numpy as np
import pytest
from ir_measures import AP, Judged, P, nDCG

from workbench.metrics import (
    METRICS,
    OPT_IN,
    POINTWISE,
    condense,
    condensed_average_precision,
    condensed_metric_names,
    condensed_ndcg,
    condensed_precision,
    coverage,
    evaluate,
    evaluate_condensed,
    format_name,
    judged_at_k,
    metric_names,
    opt_in_names,
    parse,
    pointwise_names,
)
from workbench.metrics.registry import function

LOG2_3 = math.log2(3)


def ours(doc_ids: list[str], judgments: dict[str, float], k: int) -> dict[str, float]:
    return {name.split("@")[0]: value for name, value in evaluate_condensed(doc_ids, judgments, k)}


def standard(doc_ids: list[str], judgments: dict[str, float], k: int) -> dict[str, float]:
    return {name.split("@")[0]: value for name, value in evaluate(doc_ids, judgments, k)}


# --------------------------------------------------------------------------------------------
# Hand-worked lists


def test_unjudged_documents_at_the_top_are_dropped_and_judged_ones_move_up() -> None:
    # Ratings of the query: a=3, b=2, c=0, x=1 (sorted 0,1,2,3; m = 4).
    # Threshold T = max(0.5 * 3, P90) with P90 = sorted[ceil(3.6) - 1] = sorted[3] = 3, so T = 3:
    # only a is relevant, R = 1. Ideal at k = 3: [3, 2, 1] -> 7 + 3/log2(3) + 1/2.
    judgments = {"a": 3.0, "b": 2.0, "c": 0.0, "x": 1.0}
    # Results: u1, u2 unjudged at ranks 1-2, then b, a, c.
    doc_ids = ["u1", "u2", "b", "a", "c"]
    got = ours(doc_ids, judgments, 3)
    # Judged@3: of u1, u2, b one is judged -> 1/3.
    assert got["Judged"] == pytest.approx(1 / 3)
    # Condensed list: b, a, c (cut at 3: all three).
    # NDCG'@3: DCG = 3/1 + 7/log2(3) + 0 over IDCG 7 + 3/log2(3) + 0.5.
    assert got["NDCG'"] == pytest.approx((3 + 7 / LOG2_3) / (7 + 3 / LOG2_3 + 0.5), rel=1e-15)
    # MAP'@3: a is relevant at condensed rank 2, hits(2) = 1 -> (1/2) / R = 0.5.
    assert got["MAP'"] == 0.5
    # Precision'@3: 1 relevant of min(3, 3) -> 1/3.
    assert got["Precision'"] == pytest.approx(1 / 3)

    # The standard metrics see u1, u2, b only: a is below the cut, nothing relevant.
    std = standard(doc_ids, judgments, 3)
    assert std["MAP"] == std["Precision"] == 0.0
    assert std["NDCG"] == pytest.approx(3 / 2 / (7 + 3 / LOG2_3 + 0.5))  # b's gain 3 at rank 3


def test_unjudged_documents_in_the_middle() -> None:
    # a=2, b=1, c=1 (sorted 1,1,2): P90 = sorted[ceil(2.7) - 1] = 2, T = max(1, 2) = 2 -> a only.
    judgments = {"a": 2.0, "b": 1.0, "c": 1.0}
    doc_ids = ["b", "u", "a", "v", "c"]
    got = ours(doc_ids, judgments, 2)
    # Judged@2: b judged, u not -> 1/2.
    assert got["Judged"] == 0.5
    # Condensed b, a, c; cut at 2: b, a. DCG = 1/1 + 3/log2(3); IDCG@2 = 3/1 + 1/log2(3).
    assert got["NDCG'"] == pytest.approx((1 + 3 / LOG2_3) / (3 + 1 / LOG2_3), rel=1e-15)
    # MAP'@2: a at condensed rank 2 -> (1/2) / 1.
    assert got["MAP'"] == 0.5
    # Precision'@2: 1 of 2.
    assert got["Precision'"] == 0.5


def test_all_judged_equals_the_standard_metrics_exactly() -> None:
    judgments = {"a": 3.0, "b": 1.0, "c": 0.0, "x": 2.0, "y": 2.0}
    doc_ids = ["b", "a", "c", "y"]
    for k in (0, 1, 2, 3, 4, 10):
        got, std = ours(doc_ids, judgments, k), standard(doc_ids, judgments, k)
        assert got["NDCG'"] == std["NDCG"]  # bit for bit, not approximately
        assert got["MAP'"] == std["MAP"]
        assert got["Precision'"] == std["Precision"]
        assert got["Judged"] == (1.0 if k else 0.0)


def test_none_judged_gives_zero() -> None:
    judgments = {"a": 3.0, "b": 1.0}
    got = ours(["u", "v", "w"], judgments, 2)
    assert got == {"Judged": 0.0, "NDCG'": 0.0, "MAP'": 0.0, "Precision'": 0.0}


def test_empty_list_and_empty_judgments_give_zero() -> None:
    assert set(ours([], {"a": 3.0}, 5).values()) == {0.0}
    assert set(ours(["a", "b"], {}, 5).values()) == {0.0}


def test_k_larger_than_the_list() -> None:
    # a=1, b=0 (sorted 0,1): P90 = sorted[ceil(1.8) - 1] = 1, T = max(0.5, 1) = 1 -> a, R = 1.
    judgments = {"a": 1.0, "b": 0.0}
    doc_ids = ["u", "a", "b"]  # n = 3 < k = 10
    got = ours(doc_ids, judgments, 10)
    # Judged@10: 2 judged of min(10, 3) = 3 -> 2/3 (not 2/10).
    assert got["Judged"] == pytest.approx(2 / 3)
    # Condensed a, b: n' = 2. Precision'@10 = 1 / min(10, 2) = 1/2 (not 1/10).
    assert got["Precision'"] == 0.5
    # MAP'@10: a at condensed rank 1 -> 1/1 / R = 1.
    assert got["MAP'"] == 1.0
    # NDCG'@10: DCG = 1/1; ideal [1, 0] -> 1: NDCG' = 1 (the standard NDCG@10 is 1/log2(3)).
    assert got["NDCG'"] == 1.0
    assert standard(doc_ids, judgments, 10)["NDCG"] == pytest.approx(1 / LOG2_3)


def test_judged_at_k_cuts_at_k_where_coverage_does_not() -> None:
    # Coverage@k counts all n results; Judged@k only the first min(k, n).
    judged = np.array([False, True, True, True])
    assert judged_at_k(judged, 2) == 0.5  # 1 of u, a
    assert coverage(judged) == 0.75  # 3 of 4, whatever k
    # n <= k (an experiment's lists): the two agree.
    assert judged_at_k(judged, 4) == coverage(judged) == judged_at_k(judged, 40)


def test_condense_keeps_the_order_of_judged_results_and_pads() -> None:
    values = np.array([[5.0, 1.0, 2.0, 3.0], [4.0, 6.0, 0.0, 0.0]])
    judged = np.array([[False, True, False, True], [True, True, False, False]])
    condensed, depth = condense(values, judged, 3)
    assert condensed.tolist() == [[1.0, 3.0, 0.0], [4.0, 6.0, 0.0]]
    assert depth.tolist() == [2, 2]
    flags, depth = condense(np.array([True, True, False]), np.array([False, True, True]), 1)
    assert flags.tolist() == [True] and depth.tolist() == 1


def test_batches_equal_rows() -> None:
    # Two queries padded to width 4 (the second has n = 2): each row as if alone.
    relevant = np.array([[True, False, True, False], [False, True, False, False]])
    judged = np.array([[False, True, True, True], [True, True, False, False]])
    ratings = np.array([[3.0, 0.0, 2.0, 1.0], [0.0, 2.0, 0.0, 0.0]])
    ideal = np.array([[3.0, 2.0, 1.0], [2.0, 0.0, 0.0]])
    n = np.array([4, 2])
    k = 3
    rows = [(relevant[i, : n[i]], judged[i, : n[i]], ratings[i, : n[i]], ideal[i]) for i in (0, 1)]
    assert judged_at_k(judged, k, n).tolist() == [judged_at_k(r[1], k) for r in rows]
    assert condensed_precision(relevant, judged, k).tolist() == [
        condensed_precision(r[0], r[1], k) for r in rows
    ]
    assert condensed_average_precision(relevant, judged, k, [1, 1]).tolist() == [
        condensed_average_precision(r[0], r[1], k, 1) for r in rows
    ]
    assert condensed_ndcg(ratings, judged, k, ideal).tolist() == [
        condensed_ndcg(r[2], r[1], k, r[3]) for r in rows
    ]


# --------------------------------------------------------------------------------------------
# Names: registered, parsed, and not in the default list


def test_opt_in_names_parse_and_resolve() -> None:
    assert opt_in_names(10) == ["Judged@10", "NDCG'@10", "MAP'@10", "Precision'@10"]
    assert condensed_metric_names(10) == opt_in_names(10)
    for name in opt_in_names(7):
        base, k = parse(name)
        assert k == 7 and format_name(base, k) == name
        assert METRICS[base].family == "pointwise"
    assert function("NDCG'@10") is condensed_ndcg
    assert function("MAP'@5") is condensed_average_precision
    assert function("Precision'@5") is condensed_precision
    assert function("Judged@5") is judged_at_k
    for bad in ("NDCG'", "NDCG''@10", "MRR'", "'NDCG@10", "Judged", "Coverage'@10"):
        with pytest.raises(ValueError, match="unknown metric"):
            parse(bad)


def test_the_default_metric_list_is_unchanged() -> None:
    # The condensed metrics are opt-in: what every experiment writes, and every stored result and
    # recorded doc output holds, stays the plugin's seven and HitRate@k.
    default = [
        "Coverage@10",
        "Precision@10",
        "Recall@10",
        "MAP@10",
        "MRR",
        "DCG@10",
        "NDCG@10",
        "HitRate@10",
    ]
    assert pointwise_names(10) == metric_names(10) == default
    assert [name for name, _ in evaluate(["a"], {"a": 1.0}, 10)] == default
    assert not set(OPT_IN) & set(POINTWISE)


# --------------------------------------------------------------------------------------------
# Against ir_measures (trec_eval's -J "judged docs only", and its Judged@k)


def random_queries(seed: int, count: int) -> dict[str, tuple[list[str], dict[str, int]]]:
    """Result lists (distinct ids, rank order) and integer ratings 0..3, with unjudged results
    anywhere, often at the top."""
    rng = np.random.default_rng(seed)
    queries = {}
    for q in range(count):
        pool = [f"D{i}" for i in range(int(rng.integers(2, 25)))]
        judged_ids = list(rng.choice(pool, size=int(rng.integers(1, len(pool) + 1)), replace=False))
        weights = rng.random(4)
        grades = rng.choice(4, size=len(judged_ids), p=weights / weights.sum())
        judgments = {str(d): int(g) for d, g in zip(judged_ids, grades, strict=True)}
        n = int(rng.integers(1, 21))
        candidates = pool + [f"U{i}" for i in range(n)]  # never judged
        doc_ids = [str(d) for d in rng.choice(candidates, size=n, replace=False)]
        queries[f"q{q}"] = (doc_ids, judgments)
    return queries


def as_run(doc_ids: list[str]) -> dict[str, float]:
    return {d: float(len(doc_ids) - i) for i, d in enumerate(doc_ids)}  # distinct, descending


def level(judgments: dict[str, int]) -> int:
    """The trec_eval relevance level equal to the threshold rule, for integer ratings:
    rating >= T and rating > 0  <=>  rating >= max(1, ceil(T))."""
    ratings = sorted(judgments.values())
    if not ratings or ratings[-1] == 0:
        return 1
    t = max(0.5 * ratings[-1], ratings[math.ceil(0.9 * len(ratings)) - 1])
    return max(1, math.ceil(t))


@pytest.mark.parametrize("k", [1, 3, 5, 10, 20])
def test_agrees_with_ir_measures_judged_only(k: int) -> None:
    queries = random_queries(seed=4500 + k, count=300)
    run = {q: as_run(doc_ids) for q, (doc_ids, _) in queries.items()}
    got = {
        q: ours(doc_ids, {d: float(r) for d, r in j.items()}, k)
        for q, (doc_ids, j) in queries.items()
    }

    # NDCG': trec_eval's ndcg_cut with -J, gains 2^r - 1 (ir_measures remaps the qrels).
    qrels = {q: j for q, (_, j) in queries.items()}
    ndcg_measure = nDCG(gains={0: 0, 1: 1, 2: 3, 3: 7}, judged_only=True) @ k
    ndcg_ref = {
        m.query_id: m.value for m in ir_measures.pytrec_eval.iter_calc([ndcg_measure], qrels, run)
    }
    judged_ref = {m.query_id: m.value for m in ir_measures.iter_calc([Judged @ k], qrels, run)}
    assert set(ndcg_ref) == set(judged_ref) == set(queries)

    # MAP' and P': trec_eval's map_cut and P with -J at the query's relevance level; queries are
    # grouped by level, since one trec_eval run takes one level.
    by_level: dict[int, list[str]] = defaultdict(list)
    for q, (_, j) in queries.items():
        by_level[level(j)].append(q)
    binary_ref: dict[str, dict[str, float]] = defaultdict(dict)
    for rel, members in by_level.items():
        measures = [AP(rel=rel, judged_only=True) @ k, P(rel=rel, judged_only=True) @ k]
        for m in ir_measures.pytrec_eval.iter_calc(
            measures, {q: qrels[q] for q in members}, {q: run[q] for q in members}
        ):
            binary_ref[m.query_id][m.measure.NAME] = m.value
    assert set(binary_ref) == set(queries)

    condensed_nonzero = unjudged_on_top = 0
    for q, (doc_ids, judgments) in queries.items():
        mine = got[q]
        assert mine["NDCG'"] == pytest.approx(ndcg_ref[q], abs=1e-9), q
        assert mine["Judged"] == pytest.approx(judged_ref[q], abs=1e-9), q
        assert mine["MAP'"] == pytest.approx(binary_ref[q]["AP"], abs=1e-9), q
        # trec_eval's P@k divides by k; Precision'@k by min(k, n'), n' the judged results.
        depth = min(k, sum(d in judgments for d in doc_ids))
        assert mine["Precision'"] * depth / k == pytest.approx(binary_ref[q]["P"], abs=1e-9), q
        condensed_nonzero += mine["MAP'"] > 0
        unjudged_on_top += doc_ids[0] not in judgments
    # The comparison covers real cases: relevant hits found, unjudged results at rank 1.
    assert condensed_nonzero > 30
    assert unjudged_on_top > 30


def test_judged_only_is_what_makes_them_agree() -> None:
    # Guards the comparison above: without -J, trec_eval scores the unjudged result at rank 1 as
    # irrelevant, and the numbers differ.
    doc_ids, judgments = ["u", "a", "b"], {"a": 3, "b": 1, "c": 0}
    qrels, run = {"q": judgments}, {"q": as_run(doc_ids)}
    gains = {0: 0, 1: 1, 2: 3, 3: 7}
    (plain,) = ir_measures.pytrec_eval.iter_calc([nDCG(gains=gains) @ 2], qrels, run)
    (condensed,) = ir_measures.pytrec_eval.iter_calc(
        [nDCG(gains=gains, judged_only=True) @ 2], qrels, run
    )
    mine = ours(doc_ids, {d: float(r) for d, r in judgments.items()}, 2)["NDCG'"]
    # Condensed a, b: (7 + 1/log2(3)) / (7 + 1/log2(3)) = 1; plain: (7/log2(3)) / (7 + 1/log2(3)).
    assert mine == condensed.value == 1.0
    assert plain.value == pytest.approx((7 / LOG2_3) / (7 + 1 / LOG2_3))
