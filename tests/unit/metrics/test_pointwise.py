"""Pointwise metrics (docs/algorithms.md, "Pointwise metrics"): hand-worked lists and a loop
reference on random inputs."""

from __future__ import annotations

import math
import random
from collections.abc import Mapping, Sequence

import numpy as np
import pytest

from workbench.metrics import (
    MetricError,
    average_precision,
    coverage,
    dcg,
    evaluate,
    evaluate_many,
    hit_rate,
    ndcg,
    plugin_metric_names,
    pointwise_names,
    precision,
    recall,
    reciprocal_rank,
    relevance_threshold,
    round_metric,
    round_metrics,
    validate_ratings,
)

LOG2_3 = math.log2(3)

# --------------------------------------------------------------------------------------------
# A worked example (docs/algorithms.md, "Formulas")

EXAMPLE_J = {"a": 3.0, "b": 1.0, "c": 0.0, "x": 2.0}
EXAMPLE_DOCS = ["b", "a", "y"]


def test_worked_example_rounds_to_the_contract_values() -> None:
    rounded = round_metrics(evaluate(EXAMPLE_DOCS, EXAMPLE_J, 3))
    assert rounded == [
        ("Coverage@3", 0.67),
        ("Precision@3", 0.33),
        ("Recall@3", 1.0),
        ("MAP@3", 0.5),
        ("MRR", 0.5),
        ("DCG@3", 5.42),
        ("NDCG@3", 0.58),
        ("HitRate@3", 1.0),  # the workbench's own, after the plugin's seven: a (rank 2) is relevant
    ]


def test_worked_example_unrounded_values() -> None:
    # T = max(0.5 * 3, sorted[0, 1, 2, 3][ceil(3.6) - 1]) = 3, so only a is relevant and R = 1.
    values = dict(evaluate(EXAMPLE_DOCS, EXAMPLE_J, 3))
    dcg3 = 1 + 7 / LOG2_3
    idcg3 = 7 + 3 / LOG2_3 + 1 / 2
    expected = {
        "Coverage@3": 2 / 3,
        "Precision@3": 1 / 3,
        "Recall@3": 1.0,
        "MAP@3": 0.5,
        "MRR": 0.5,
        "DCG@3": dcg3,
        "NDCG@3": dcg3 / idcg3,
        "HitRate@3": 1.0,
    }
    assert values == pytest.approx(expected, rel=1e-12)
    assert values["DCG@3"] == pytest.approx(5.4165, abs=1e-4)
    assert idcg3 == pytest.approx(9.3928, abs=1e-4)


def test_ndcg_uses_the_unrounded_dcg() -> None:
    values = dict(evaluate(EXAMPLE_DOCS, EXAMPLE_J, 3))
    assert values["NDCG@3"] != pytest.approx(5.42 / 9.3928, abs=1e-6)


def test_metric_names_and_order_follow_the_registry() -> None:
    assert [name for name, _ in evaluate(EXAMPLE_DOCS, EXAMPLE_J, 7)] == pointwise_names(7)
    assert pointwise_names(7)[4] == "MRR"


def test_hit_rate_comes_after_the_plugins_seven() -> None:
    assert plugin_metric_names(7) == [
        "Coverage@7", "Precision@7", "Recall@7", "MAP@7", "MRR", "DCG@7", "NDCG@7"]
    assert pointwise_names(7) == [*plugin_metric_names(7), "HitRate@7"]


# --------------------------------------------------------------------------------------------
# Threshold


@pytest.mark.parametrize(
    ("ratings", "expected"),
    [
        ([], 0.0),
        ([0, 0, 0], 0.0),
        ([3, 1, 0, 2], 3.0),  # the worked example: P90 = sorted[3] = 3 beats 1.5
        ([2, 2, 2], 2.0),  # constant: T = max, every doc relevant
        ([1] * 9 + [10], 5.0),  # m = 10: P90 = sorted[8] = 1, half of the max wins
        ([1] * 8 + [8, 10], 8.0),  # P90 = sorted[8] = 8 beats 5
        ([0.2, 0.9, 0.4], 0.9),  # m = 3: ceil(2.7) - 1 = 2
        ([5], 5.0),
        ([-3, -1], -0.5),  # max < 0 is not max = 0: 0.5 * -1 beats P90 = -1; nothing is > 0
        ([0, 1, 10, 100], 100.0),
    ],
)
def test_relevance_threshold(ratings: list[float], expected: float) -> None:
    assert relevance_threshold(np.array(ratings, dtype=float)) == expected


def test_threshold_p90_index_is_nearest_rank() -> None:
    # m = 20: ceil(18) - 1 = 17, the 18th smallest.
    ratings = np.arange(1, 21, dtype=float)
    assert relevance_threshold(ratings) == 18.0
    # m = 21: ceil(18.9) - 1 = 18.
    assert relevance_threshold(np.arange(1, 22, dtype=float)) == 19.0


# --------------------------------------------------------------------------------------------
# Hand-worked lists


def metrics(doc_ids: Sequence[str], judgments: Mapping[str, float], k: int) -> dict[str, float]:
    return {name.split("@")[0]: value for name, value in evaluate(doc_ids, judgments, k)}


def test_no_judgments_gives_zero_everywhere() -> None:
    assert set(metrics(["a", "b"], {}, 10).values()) == {0.0}


def test_no_results_gives_zero_everywhere() -> None:
    assert set(metrics([], {"a": 2.0}, 10).values()) == {0.0}


def test_all_zero_ratings_nothing_relevant_but_coverage_counts() -> None:
    values = metrics(["a", "b", "c"], {"a": 0.0, "b": 0.0}, 3)
    assert values["Coverage"] == pytest.approx(2 / 3)
    assert [values[m] for m in ("Precision", "Recall", "MAP", "MRR", "DCG", "NDCG", "HitRate")
            ] == [0.0] * 7


def test_duplicate_results_count_at_every_rank() -> None:
    # J = {a: 2, b: 0}: P90 = sorted[0, 2][ceil(1.8) - 1] = 2, T = 2, R = 1. a is relevant twice,
    # as the plugin counts it, so Recall and MAP exceed 1.
    values = metrics(["a", "a", "b"], {"a": 2.0, "b": 0.0}, 3)
    assert values == pytest.approx(
        {
            "Coverage": 1.0,
            "Precision": 2 / 3,
            "Recall": 2.0,
            "MAP": (1 / 1 + 2 / 2) / 1,
            "MRR": 1.0,
            "DCG": 3 + 3 / LOG2_3,
            "NDCG": (3 + 3 / LOG2_3) / 3,
            "HitRate": 1.0,
        }
    )


def test_more_results_than_k_only_coverage_sees_them_all() -> None:
    judgments = {"a": 1.0, "b": 1.0, "c": 1.0, "d": 1.0}  # T = 1, all relevant, R = 4
    values = metrics(["x", "a", "b", "c", "d"], judgments, 2)
    assert values == pytest.approx(
        {
            "Coverage": 4 / 5,
            "Precision": 1 / 2,
            "Recall": 1 / 4,
            "MAP": (1 / 2) / 4,
            "MRR": 1 / 2,
            "DCG": 1 / LOG2_3,
            "NDCG": (1 / LOG2_3) / (1 + 1 / LOG2_3),
            "HitRate": 1.0,
        }
    )


def test_fewer_results_than_k_precision_divides_by_n() -> None:
    # Precision divides by min(k, n) (docs/algorithms.md, "Formulas"): two results, both relevant:
    # Precision@10 = 1; R = 3 keeps Recall below 1. Ratings [1, 2, 2]: P90 = sorted[ceil(2.7) - 1] =
    # 2, T = 2, relevant {a, b}; c (1) is not.
    values = metrics(["a", "b"], {"a": 2.0, "b": 2.0, "c": 1.0, "d": 2.0}, 10)
    assert values["Precision"] == 1.0
    assert values["Recall"] == pytest.approx(2 / 3)
    assert values["MAP"] == pytest.approx((1 + 1) / 3)
    # The ideal list holds every judged rating, cut at k = 10, not at n = 2.
    idcg = 3 + 3 / LOG2_3 + 3 / 2 + 1 / math.log2(5)
    assert values["NDCG"] == pytest.approx((3 + 3 / LOG2_3) / idcg)


def test_ideal_is_cut_at_k() -> None:
    judgments = {"a": 1.0, "b": 3.0, "c": 2.0}
    values = metrics(["a"], judgments, 2)
    assert values["NDCG"] == pytest.approx(1 / (7 + 3 / LOG2_3))


def test_unjudged_results_gain_nothing_and_are_not_relevant() -> None:
    values = metrics(["u", "v", "a"], {"a": 1.0}, 3)
    assert values["MRR"] == pytest.approx(1 / 3)
    assert values["DCG"] == pytest.approx(1 / 2)
    assert values["Coverage"] == pytest.approx(1 / 3)


def test_k_zero_looks_at_nothing_but_coverage() -> None:
    values = metrics(["a", "b"], {"a": 1.0}, 0)
    assert values["Coverage"] == 0.5
    assert [values[m] for m in ("Precision", "Recall", "MAP", "MRR", "DCG", "NDCG", "HitRate")
            ] == [0.0] * 7


@pytest.mark.parametrize("k", [-1, 2.0, True])
def test_bad_k_is_refused(k: object) -> None:
    with pytest.raises(ValueError, match="k must be"):
        evaluate(["a"], {"a": 1.0}, k)  # type: ignore[arg-type]


def test_esci_ratings_stay_finite_and_huge_dcg_is_kept() -> None:
    # Ratings are raw, 2^100 is finite. T = max(50, P90 = 100) = 100 -> only a.
    judgments = validate_ratings({"a": "100.000", "b": "10.000", "c": "1.000", "d": "0.000"})
    values = dict(evaluate(["b", "a", "e"], judgments, 3))
    assert all(math.isfinite(v) for v in values.values())
    assert values["DCG@3"] == pytest.approx(1023 + (2.0**100 - 1) / LOG2_3)
    assert values["NDCG@3"] == pytest.approx(values["DCG@3"] / (2.0**100 - 1 + 1023 / LOG2_3 + 0.5))
    assert values["Precision@3"] == pytest.approx(1 / 3)
    assert values["MAP@3"] == 0.5
    # 2^100 / log2(3) is far above 2^63 / 100: the plugin would fail the evaluation; the
    # workbench keeps the (integral) value, so ESCI judgments can be evaluated.
    assert round_metric(values["NDCG@3"]) == 0.63  # about 1 / log2(3)
    rounded = dict(round_metrics(evaluate(["b", "a", "e"], judgments, 3)))
    assert rounded["DCG@3"] == values["DCG@3"] and rounded["Precision@3"] == 0.33


def test_overflowing_ratings_fail_at_rounding() -> None:
    values = dict(evaluate(["a"], {"a": 2000.0}, 1))
    assert values["DCG@1"] == math.inf
    assert math.isnan(values["NDCG@1"])  # inf / inf, as in Java
    with pytest.raises(MetricError, match=r"^Metric value \[Infinity\]"):
        round_metrics(evaluate(["a"], {"a": 2000.0}, 1))


def test_non_finite_float_ratings_are_refused_by_evaluate() -> None:
    with pytest.raises(MetricError, match=r"^Invalid judgment rating \[NaN\] for document \[b\]"):
        evaluate(["a"], {"a": 1.0, "b": math.nan}, 3)
    with pytest.raises(MetricError, match=r"\[-Infinity\] for document \[c\]"):
        evaluate_many([(["a"], {"a": 1.0}), (["a"], {"c": -math.inf})], 3)


# --------------------------------------------------------------------------------------------
# Per-metric functions: one list (1-D) and a padded batch (2-D)


def test_metric_functions_on_one_list() -> None:
    relevant = np.array([False, True, False, True])
    assert float(precision(relevant)) == 0.5
    assert float(recall(relevant, 4)) == 0.5
    assert float(average_precision(relevant, 4)) == pytest.approx((1 / 2 + 2 / 4) / 4)
    assert float(reciprocal_rank(relevant)) == 0.5
    assert float(coverage(np.array([True, False, True]))) == pytest.approx(2 / 3)
    assert float(dcg(np.array([0.0, 1.0, 2.0]))) == pytest.approx(1 / LOG2_3 + 3 / 2)
    assert float(ndcg(np.array([1.0, 1.0]), np.array([1.0, 1.0]))) == 1.0
    assert float(ndcg(np.array([1.0]), np.array([1.0, 1.0]))) == pytest.approx(1 / (1 + 1 / LOG2_3))
    assert float(ndcg(np.array([1.0]), np.array([0.0]))) == 0.0
    assert float(hit_rate(relevant)) == 1.0


def test_metric_functions_on_a_padded_batch() -> None:
    relevant = np.array([[True, False, False], [False, True, False], [False, False, False]])
    depth = np.array([1, 3, 0])
    assert precision(relevant, depth).tolist() == [1.0, 1 / 3, 0.0]
    assert reciprocal_rank(relevant).tolist() == [1.0, 0.5, 0.0]
    assert hit_rate(relevant).tolist() == [1.0, 1.0, 0.0]
    assert recall(relevant, np.array([2, 1, 0])).tolist() == [0.5, 1.0, 0.0]
    assert coverage(relevant, np.array([2, 2, 0])).tolist() == [0.5, 0.5, 0.0]
    ratings = np.array([[2.0, 0.0], [1.0, 1.0]])
    assert dcg(ratings).tolist() == pytest.approx([3.0, 1.0 + 1 / LOG2_3], rel=1e-15)
    assert ndcg(ratings, np.array([[2.0, 0.0], [1.0, 1.0]])).tolist() == [1.0, 1.0]


def test_empty_lists() -> None:
    empty = np.zeros(0, dtype=bool)
    assert float(precision(empty)) == 0.0
    assert float(reciprocal_rank(empty)) == 0.0
    assert float(average_precision(empty, 3)) == 0.0
    assert float(dcg(np.zeros(0))) == 0.0
    assert float(hit_rate(empty)) == 0.0
    assert hit_rate(np.zeros((2, 0), dtype=bool)).tolist() == [0.0, 0.0]


# --------------------------------------------------------------------------------------------
# HitRate@k: 1 when one of the top k is relevant, by the rule Precision@k and MAP@k use

# T = max(0.5 * 3, sorted[0, 1, 3][ceil(2.7) - 1] = 3) = 3: only a is relevant. b (rating 1) is
# judged and positive but below T, so it is no hit; a is first at rank 3.
HIT_J = {"a": 3.0, "b": 1.0, "c": 0.0}
HIT_DOCS = ["u", "b", "a", "c"]


@pytest.mark.parametrize(("k", "expected"), [(1, 0.0), (2, 0.0), (3, 1.0), (4, 1.0), (10, 1.0)])
def test_hit_rate_of_a_list_whose_first_relevant_is_at_rank_3(k: int, expected: float) -> None:
    values = dict(evaluate(HIT_DOCS, HIT_J, k))
    assert values[f"HitRate@{k}"] == expected
    assert (values[f"HitRate@{k}"] > 0) == (values["MRR"] > 0) == (values[f"Precision@{k}"] > 0)
    assert evaluate_many([(HIT_DOCS, HIT_J)], k) == [evaluate(HIT_DOCS, HIT_J, k)]


def test_hit_rate_of_flags() -> None:
    flags = np.array([False, False, True, False])
    assert float(hit_rate(flags[:2])) == 0.0
    assert float(hit_rate(flags[:3])) == 1.0
    assert float(hit_rate(np.array([True]))) == 1.0


def test_hit_rate_of_an_empty_list() -> None:
    assert float(hit_rate(np.zeros(0, dtype=bool))) == 0.0
    assert dict(evaluate([], HIT_J, 3))["HitRate@3"] == 0.0
    assert dict(evaluate(["a"], {}, 3))["HitRate@3"] == 0.0  # nothing judged, nothing relevant


def test_hit_rate_of_a_padded_batch_equals_each_list() -> None:
    lists = [[False, False, True], [True], [], [False, False], [False, True]]
    width = max(map(len, lists))
    batch = np.array([row + [False] * (width - len(row)) for row in lists])
    assert hit_rate(batch).tolist() == [float(hit_rate(np.array(row, dtype=bool)))
                                        for row in lists] == [1.0, 1.0, 0.0, 0.0, 1.0]


def test_hit_rate_in_evaluate_many_equals_evaluate() -> None:
    queries = [(HIT_DOCS, HIT_J), (["a"], HIT_J), ([], HIT_J), (["b", "c"], HIT_J),
               (["x", "y", "z", "w", "a"], HIT_J)]
    rows = evaluate_many(queries, 3)
    assert rows == [evaluate(ids, j, 3) for ids, j in queries]
    assert [dict(row)["HitRate@3"] for row in rows] == [1.0, 1.0, 0.0, 0.0, 0.0]


# --------------------------------------------------------------------------------------------
# validate_ratings


def test_validate_ratings_parses_strings_and_numbers() -> None:
    parsed = validate_ratings(
        {"a": "0.7", "b": "100.000", "c": 3, "d": 0.25, "e": " 1e2 ", "f": "-2", "g": "4d"}
    )
    assert parsed == {"a": 0.7, "b": 100.0, "c": 3.0, "d": 0.25, "e": 100.0, "f": -2.0, "g": 4.0}
    assert all(type(v) is float for v in parsed.values())


@pytest.mark.parametrize(
    ("rating", "shown"),
    [
        ("abc", "abc"),
        ("NaN", "NaN"),
        ("Infinity", "Infinity"),
        ("inf", "inf"),
        ("1e400", "1e400"),
        ("", ""),
        ("1_0", "1_0"),  # Python's float() takes it; Java's parseDouble does not
        (math.nan, "NaN"),
        (math.inf, "Infinity"),
        (None, "null"),
        (True, "true"),
        (10**400, str(10**400)),
    ],
)
def test_validate_ratings_error_message(rating: object, shown: str) -> None:
    with pytest.raises(MetricError) as caught:
        validate_ratings({"ok": "1", "doc-7": rating})
    assert str(caught.value) == (
        f"Invalid judgment rating [{shown}] for document [doc-7]: rating must be a finite number"
    )


def test_metric_error_is_a_value_error() -> None:
    assert issubclass(MetricError, ValueError)


# --------------------------------------------------------------------------------------------
# Loop reference, written here from docs/algorithms.md ("Formulas") independently of the module


def ref_threshold(ratings: list[float]) -> float:
    if not ratings or max(ratings) == 0:
        return 0.0
    ordered = sorted(ratings)
    p90 = ordered[math.ceil(0.9 * len(ordered)) - 1]
    return max(0.5 * ordered[-1], p90)


def ref_evaluate(doc_ids: list[str], judgments: dict[str, float], k: int) -> list[float]:
    t = ref_threshold(list(judgments.values()))

    def is_relevant(d: str) -> bool:
        return d in judgments and judgments[d] >= t and judgments[d] > 0

    n = len(doc_ids)
    top = doc_ids[: min(k, n)]
    total_relevant = sum(1 for d in judgments if is_relevant(d))
    cover = sum(1 for d in doc_ids if d in judgments) / n if n else 0.0
    hits = sum(1 for d in top if is_relevant(d))
    prec = hits / len(top) if top else 0.0
    rec = hits / total_relevant if total_relevant else 0.0
    ap_sum, seen, first = 0.0, 0, 0.0
    for i, d in enumerate(top, start=1):
        if is_relevant(d):
            seen += 1
            ap_sum += seen / i
            if first == 0.0:
                first = 1.0 / i
    ap = ap_sum / total_relevant if seen else 0.0
    gain = 0.0
    for i, d in enumerate(top, start=1):
        if d in judgments:
            gain += (2.0 ** judgments[d] - 1) / (math.log(i + 1) / math.log(2))
    best = 0.0
    for i, r in enumerate(sorted(judgments.values(), reverse=True)[:k], start=1):
        best += (2.0**r - 1) / (math.log(i + 1) / math.log(2))
    hit = 1.0 if any(is_relevant(d) for d in top) else 0.0
    return [cover, prec, rec, ap, first, gain, gain / best if best > 0 else 0.0, hit]


RATING_SCALES = {
    "binary": lambda rng: float(rng.randint(0, 1)),
    "graded": lambda rng: float(rng.randint(0, 3)),
    "score0_1": lambda rng: round(rng.random(), rng.choice([1, 2, 3])),
    "esci": lambda rng: rng.choice([0.0, 1.0, 10.0, 100.0]),
    "coec": lambda rng: round(rng.expovariate(1.0), 3),
    "zeros": lambda rng: 0.0,
}


def random_query(rng: random.Random, scale: str) -> tuple[list[str], dict[str, float]]:
    pool = [f"doc{i}" for i in range(rng.randint(1, 25))]
    judged = rng.sample(pool, rng.randint(0, len(pool)))
    judgments = {d: RATING_SCALES[scale](rng) for d in judged}
    n = rng.randint(0, 15)
    if rng.random() < 0.2:  # with repeats, as a multi-index search could return
        doc_ids = [rng.choice(pool) for _ in range(n)]
    else:
        doc_ids = rng.sample(pool, min(n, len(pool)))
    return doc_ids, judgments


@pytest.mark.parametrize("scale", sorted(RATING_SCALES))
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_evaluate_matches_the_loop_reference(scale: str, seed: int) -> None:
    rng = random.Random(seed * 1000 + len(scale))
    for _ in range(300):
        doc_ids, judgments = random_query(rng, scale)
        k = rng.randint(1, 12)
        got = [value for _, value in evaluate(doc_ids, judgments, k)]
        want = ref_evaluate(doc_ids, judgments, k)
        # Same operations in the same order as the reference loops: equal to the last bit.
        assert got == want, (doc_ids, judgments, k)


@pytest.mark.parametrize("seed", [11, 12, 13])
def test_evaluate_many_equals_evaluate(seed: int) -> None:
    rng = random.Random(seed)
    scales = sorted(RATING_SCALES)
    for k in (1, 3, 10, 50):
        queries = [random_query(rng, rng.choice(scales)) for _ in range(400)]
        assert evaluate_many(queries, k) == [evaluate(ids, j, k) for ids, j in queries]


def test_evaluate_many_splits_large_batches_without_changing_results(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import workbench.metrics.pointwise as pointwise

    rng = random.Random(5)
    queries = [random_query(rng, "graded") for _ in range(200)]
    whole = evaluate_many(queries, 10)
    monkeypatch.setattr(pointwise, "_BATCH_CELLS", 40)
    assert evaluate_many(queries, 10) == whole


def test_evaluate_many_edge_batches() -> None:
    assert evaluate_many([], 10) == []
    only_empty = evaluate_many([([], {}), ([], {})], 5)
    assert only_empty == [evaluate([], {}, 5)] * 2
    assert evaluate_many([(["a"], {})], 5) == [evaluate(["a"], {}, 5)]
