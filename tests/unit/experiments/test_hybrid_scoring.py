"""HYBRID_OPTIMIZER fusion (docs/algorithms.md, "Hybrid optimizer") against hand-worked numbers.

Expected values are worked by hand in the comments. Where a test pins exact float32 bits, the
hex literal is what a Java transcription of the neural-search formulas printed on JDK 17 and 25
for the same input (``Float.floatToIntBits``), so those tests also pin Java's float arithmetic.
"""

from __future__ import annotations

import json
from collections import Counter

import numpy as np
import pytest

from workbench.experiments.hybrid_scoring import (
    COMBINATIONS,
    NORMALIZATIONS,
    RRF_RANK_CONSTANTS,
    hybrid_scores,
    pipeline_body,
    variant_grid,
    variant_parameters_string,
)


def f32(x: float) -> float:
    """The float32 value nearest x, as a Python float (what Java's float would hold)."""
    return float(np.float32(x))


def scores(result: list[tuple[str, float]]) -> dict[str, float]:
    return dict(result)


def order(result: list[tuple[str, float]]) -> list[str]:
    return [doc for doc, _ in result]


ONLY_FIRST = [1.0, 0.0]  # arithmetic mean with these weights returns sub-query 0's normalised score

# --------------------------------------------------------------------------------------------
# The shared example for min_max and the three means.
#
#   sub-query 0 (e.g. BM25): a 4.0, b 3.0, c 2.0, d 1.0      min 1, max 4
#   sub-query 1 (e.g. kNN):  c 0.9, e 0.5, a 0.1             min 0.1, max 0.9
#
# min_max:  q0: a (4-1)/3 = 1.0, b 2/3, c 1/3, d 0 -> 0.001 (an exact 0 becomes 0.001)
#           q1: c 1.0, e (0.5-0.1)/0.8 = 0.5, a 0 -> 0.001
# A document a sub-query did not return has 0.0 there: b, d have q1 = 0; e has q0 = 0.
Q0 = [("a", 4.0), ("b", 3.0), ("c", 2.0), ("d", 1.0)]
Q1 = [("c", 0.9), ("e", 0.5), ("a", 0.1)]
W = [0.3, 0.7]


def test_min_max_normalises_each_subquery_between_its_min_and_max() -> None:
    # weights [1, 0]: combined = q0's normalised score (q1's slot has weight 0).
    result = scores(hybrid_scores([Q0, Q1], {"normalization": "min_max",
                                             "combination": "arithmetic_mean",
                                             "weights": ONLY_FIRST}, 10))
    assert result["a"] == 1.0
    assert result["b"] == float(np.float32(2.0) / np.float32(3.0))  # (3-1)/(4-1) in float
    assert result["c"] == pytest.approx(1 / 3, rel=1e-6)
    assert result["d"] == f32(0.001)  # the minimum maps to 0, floored to 0.001
    assert result["e"] == 0.0  # not returned by q0: 0.0 * 1 / 1


def test_arithmetic_mean_counts_a_missing_subquery_as_zero_with_its_weight() -> None:
    # sum(w * s) / sum(w), every slot >= 0 counts (sum(w) = 1):
    #   c: 0.3 * 1/3   + 0.7 * 1.0   = 0.8
    #   e: 0.3 * 0     + 0.7 * 0.5   = 0.35     (missing from q0 -> 0, weight still counted)
    #   a: 0.3 * 1.0   + 0.7 * 0.001 = 0.3007
    #   b: 0.3 * 2/3   + 0.7 * 0     = 0.2
    #   d: 0.3 * 0.001 + 0.7 * 0     = 0.0003
    result = hybrid_scores([Q0, Q1], {"normalization": "min_max",
                                      "combination": "arithmetic_mean", "weights": W}, 10)
    assert order(result) == ["c", "e", "a", "b", "d"]
    assert [s for _, s in result] == pytest.approx([0.8, 0.35, 0.3007, 0.2, 0.0003], rel=1e-6)
    assert result[0][1] == float.fromhex("0x1.99999ap-1")  # 0.8f exactly as Java computes it
    assert result[2][1] == float.fromhex("0x1.33eab4p-2")


def test_geometric_mean_skips_zero_and_missing_scores_with_their_weights() -> None:
    # exp(sum(w ln s) / sum(w)) over s > 0 only:
    #   c: (1/3)^0.3 * 1.0^0.7       = exp(0.3 * -1.098612) = 0.719223
    #   b: q0 only: (2/3)^(0.3/0.3)  = 0.666667
    #   e: q1 only: 0.5
    #   a: 1.0^0.3 * 0.001^0.7       = 10^-2.1 = 0.00794328
    #   d: q0 only: 0.001
    result = hybrid_scores([Q0, Q1], {"normalization": "min_max",
                                      "combination": "geometric_mean", "weights": W}, 10)
    assert order(result) == ["c", "b", "e", "a", "d"]
    assert [s for _, s in result] == pytest.approx(
        [0.719223, 2 / 3, 0.5, 0.00794328, 0.001], rel=1e-5)
    assert result[0][1] == float.fromhex("0x1.703e02p-1")
    # exp(ln(0.001f)) comes back one float below 0.001f, as in Java.
    assert result[4][1] == float.fromhex("0x1.0624dcp-10") < f32(0.001)


def test_harmonic_mean_skips_zero_and_missing_scores_with_their_weights() -> None:
    # sum(w) / sum(w / s) over s > 0 only:
    #   b: 0.3 / (0.3 / (2/3))             = 0.666667
    #   c: 1.0 / (0.3 / (1/3) + 0.7 / 1.0) = 1 / 1.6 = 0.625
    #   e: 0.5;  d: 0.001
    #   a: 1.0 / (0.3 / 1.0 + 0.7 / 0.001) = 1 / 700.3 = 0.00142796
    result = hybrid_scores([Q0, Q1], {"normalization": "min_max",
                                      "combination": "harmonic_mean", "weights": W}, 10)
    assert order(result) == ["b", "c", "e", "a", "d"]
    assert [s for _, s in result] == pytest.approx(
        [2 / 3, 0.625, 0.5, 0.00142796, 0.001], rel=1e-5)
    assert result[1][1] == 0.625


def test_zero_weight_means_only_the_other_subquery_counts() -> None:
    # weights [1, 0], e only in q1: geometric/harmonic skip q0's 0.0 and q1 has weight 0,
    # so no weight is counted -> 0.0. a is in both: q1's weight 0 leaves q0's 1.0.
    for combination in ("geometric_mean", "harmonic_mean"):
        result = scores(hybrid_scores([Q0, Q1], {"normalization": "min_max",
                                                 "combination": combination,
                                                 "weights": ONLY_FIRST}, 10))
        assert result["e"] == 0.0
        assert result["a"] == 1.0


def test_without_weights_each_subquery_weighs_one() -> None:
    # Plain mean including the 0.0 of a missing sub-query: e = (0 + 0.5) / 2 = 0.25.
    result = scores(hybrid_scores([Q0, Q1], {"normalization": "min_max",
                                             "combination": "arithmetic_mean"}, 10))
    assert result["e"] == pytest.approx(0.25, rel=1e-6)
    assert result["c"] == pytest.approx((1 / 3 + 1.0) / 2, rel=1e-6)


# --------------------------------------------------------------------------------------------
# min_max edge cases (MinMaxScoreNormalizationTechnique)

MIN_MAX_FIRST = {"normalization": "min_max", "combination": "arithmetic_mean",
                 "weights": ONLY_FIRST}


def test_min_max_single_hit_scores_one() -> None:
    # One hit: min == max == score -> 1.0.
    assert hybrid_scores([[("a", 7.5)], []], MIN_MAX_FIRST, 10) == [("a", 1.0)]


def test_min_max_equal_scores_all_score_one() -> None:
    # min == max -> every hit 1.0; the tie keeps the hit order (first-seen).
    result = hybrid_scores([[("a", 2.0), ("b", 2.0), ("c", 2.0)], []], MIN_MAX_FIRST, 10)
    assert result == [("a", 1.0), ("b", 1.0), ("c", 1.0)]


def test_min_max_all_zero_scores_floor_at_0_001_because_max_is_seeded_with_min_value() -> None:
    # The maximum starts at Float.MIN_VALUE (1.4e-45), so for scores all 0: max = 1.4e-45,
    # min = 0, (0 - 0) / 1.4e-45 = 0 -> 0.001 each (not the 1.0 of the equal-scores case).
    result = hybrid_scores([[("a", 0.0), ("b", 0.0)], []], MIN_MAX_FIRST, 10)
    assert result == [("a", f32(0.001)), ("b", f32(0.001))]


def test_min_max_negative_scores_use_the_min_value_seeded_maximum() -> None:
    # a -1, b -2: min -2, max stays Float.MIN_VALUE (> every score):
    #   a: (-1 + 2) / (1.4e-45 + 2) = 0.5 (not 1.0);  b: 0 -> 0.001
    result = hybrid_scores([[("a", -1.0), ("b", -2.0)], []], MIN_MAX_FIRST, 10)
    assert result == [("a", 0.5), ("b", f32(0.001))]


# --------------------------------------------------------------------------------------------
# l2 (L2ScoreNormalizationTechnique)
#
#   q0: b 4.0, a 3.0          norm sqrt(16 + 9) = 5      -> b 0.8, a 0.6
#   q1: c 2.0, d 2.0, a 1.0   norm sqrt(4 + 4 + 1) = 3   -> c 2/3, d 2/3, a 1/3
# arithmetic mean [0.5, 0.5]:
#   a: 0.5 * 0.6 + 0.5 * 1/3 = 0.466667;  b: 0.5 * 0.8 = 0.4;  c = d: 0.5 * 2/3 = 0.333333
L2_Q0 = [("b", 4.0), ("a", 3.0)]
L2_Q1 = [("c", 2.0), ("d", 2.0), ("a", 1.0)]
L2_HALF = {"normalization": "l2", "combination": "arithmetic_mean", "weights": [0.5, 0.5]}


def test_l2_divides_by_the_root_of_the_sum_of_squares() -> None:
    result = hybrid_scores([L2_Q0, L2_Q1], L2_HALF, 10)
    assert order(result) == ["a", "b", "c", "d"]  # c, d tie: first-seen order
    assert [s for _, s in result] == pytest.approx([0.466667, 0.4, 1 / 3, 1 / 3], rel=1e-6)
    assert result[0][1] == float.fromhex("0x1.dddde0p-2")


def test_l2_all_zero_scores_normalise_to_zero() -> None:
    # norm 0 -> 0.0 (not a division by zero); 0.0 still counts in the arithmetic mean.
    result = hybrid_scores([[("a", 0.0), ("b", 0.0)], []], {**L2_HALF, "weights": ONLY_FIRST}, 10)
    assert result == [("a", 0.0), ("b", 0.0)]


def test_l2_negative_normalised_score_is_left_out_of_the_mean_with_its_weight() -> None:
    # q0: a 3, b -4 -> norm 5 -> a 0.6, b -0.8. q1: b 1.0 -> 1.0.
    # b: q0's -0.8 fails "score >= 0" and its weight drops out: (0.5 * 1.0) / 0.5 = 1.0.
    # a: (0.5 * 0.6 + 0.5 * 0) / 1.0 = 0.3.
    result = scores(hybrid_scores([[("a", 3.0), ("b", -4.0)], [("b", 1.0)]], L2_HALF, 10))
    assert result == {"a": pytest.approx(0.3, rel=1e-6), "b": 1.0}


# --------------------------------------------------------------------------------------------
# z_score (ZScoreNormalizationTechnique, commons-math3 DescriptiveStatistics)
#
#   q0: a 4, b 3, c 2, d 1: mean 2.5, sample std sqrt((2.25 + .25 + .25 + 2.25) / 3) = 1.290994
#       a 1.5 / 1.290994 = 1.161895, b 0.387298, c and d <= 0 -> 0.001
#   q1: e 7.0 alone: score == mean -> the sub-query's raw maximum, 7.0
# arithmetic mean [0.5, 0.5]:
#   e 0.5 * 7 = 3.5, a 0.580948, b 0.193649, c = d = 0.0005
Z_HALF = {"normalization": "z_score", "combination": "arithmetic_mean", "weights": [0.5, 0.5]}


def test_z_score_uses_mean_and_sample_standard_deviation() -> None:
    result = hybrid_scores([Q0, [("e", 7.0)]], Z_HALF, 10)
    assert order(result) == ["e", "a", "b", "c", "d"]
    assert [s for _, s in result] == pytest.approx(
        [3.5, 0.580948, 0.193649, 0.0005, 0.0005], rel=1e-5)
    assert result[1][1] == float.fromhex("0x1.2971f4p-1")


def test_z_score_value_equal_to_the_mean_returns_the_raw_maximum() -> None:
    # 3, 2, 1: mean 2, std 1. b == mean -> max = 3.0; a: (3 - 2) / 1 = 1.0; c: -1 -> 0.001.
    # So the middle document outranks the top one, as in neural-search.
    result = hybrid_scores([[("a", 3.0), ("b", 2.0), ("c", 1.0)], []],
                           {**Z_HALF, "weights": ONLY_FIRST}, 10)
    assert result == [("b", 3.0), ("a", 1.0), ("c", f32(0.001))]


def test_z_score_negative_scores() -> None:
    # -1, -2, -3: mean -2, std 1. a: (-1 + 2) / 1 = 1.0; c: -1 -> 0.001;
    # b == mean -> raw max -1.0, which the arithmetic mean skips with its weight; b's other
    # slot (q1, missing) has weight 0, so no weight is counted -> 0.0.
    result = hybrid_scores([[("a", -1.0), ("b", -2.0), ("c", -3.0)], []],
                           {**Z_HALF, "weights": ONLY_FIRST}, 10)
    assert result == [("a", 1.0), ("c", f32(0.001)), ("b", 0.0)]


def test_z_score_equal_scores_keep_their_raw_value() -> None:
    # All equal: every score == mean -> raw max (2.5), not 1.0.
    result = hybrid_scores([[("a", 2.5), ("b", 2.5)], []], {**Z_HALF, "weights": ONLY_FIRST}, 10)
    assert result == [("a", 2.5), ("b", 2.5)]


# --------------------------------------------------------------------------------------------
# RRF (RRFNormalizationTechnique + RRFScoreCombinationTechnique): raw scores are ignored.
#
#   q0: a, b, c      q1: c, d      rank constant 60, ranks from 1:
#   c: 1/63 + 1/61 = 0.015873016 + 0.016393443 = 0.032266459
#   a: 1/61 = 0.016393443;  b: 1/62 = 0.016129032;  d: 1/62 = 0.016129032 (tie with b)
RRF_Q0 = [("a", 0.2), ("b", 0.1), ("c", 0.05)]
RRF_Q1 = [("c", 50.0), ("d", 40.0)]


def test_rrf_sums_reciprocal_ranks() -> None:
    result = hybrid_scores([RRF_Q0, RRF_Q1], {"combination": "rrf", "rank_constant": 60}, 10)
    assert order(result) == ["c", "a", "b", "d"]
    assert [s for _, s in result] == pytest.approx(
        [0.032266459, 1 / 61, 1 / 62, 1 / 62], rel=1e-6)
    # Each rank score is 1/(k + rank) rounded HALF_UP to 10 decimals, then narrowed to float.
    assert result[1][1] == f32(0.0163934426)
    assert result[0][1] == float.fromhex("0x1.0853acp-5")


def test_rrf_rank_constant_changes_the_scores() -> None:
    # k = 1: c 1/4 + 1/2 = 0.75, a 1/2, b = d = 1/3.
    result = hybrid_scores([RRF_Q0, RRF_Q1], {"combination": "rrf", "rank_constant": 1}, 10)
    assert result == [("c", 0.75), ("a", 0.5), ("b", f32(1 / 3)), ("d", f32(1 / 3))]


def test_size_keeps_the_top_documents_and_empty_input_gives_nothing() -> None:
    rrf = {"combination": "rrf", "rank_constant": 60}
    assert order(hybrid_scores([RRF_Q0, RRF_Q1], rrf, 2)) == ["c", "a"]
    assert hybrid_scores([RRF_Q0, RRF_Q1], rrf, 0) == []
    assert hybrid_scores([[], []], rrf, 10) == []


# --------------------------------------------------------------------------------------------
# Ties: Java HashMap order of Lucene doc ids when they are known


def test_lucene_doc_ids_reorder_ties_as_javas_hashmap_does() -> None:
    # The l2 example has c and d tied at 1/3. With Lucene ids a=1, b=2, c=20, d=3 a 16-bucket
    # HashMap iterates buckets 1, 2, 3, 4 -> a, b, d, c, and the stable sort keeps d before c.
    result = hybrid_scores([L2_Q0, L2_Q1], L2_HALF, 10,
                           lucene_doc_ids={"a": 1, "b": 2, "c": 20, "d": 3})
    assert order(result) == ["a", "b", "d", "c"]


@pytest.mark.parametrize(
    ("lucene_ids", "java_order"),
    [
        # Orders printed by java.util.HashMap (JDK 17 and 25) for the same computeIfAbsent
        # sequence followed by Collectors.toMap:
        # one bucket: computeIfAbsent inserts at the head of the bin
        ([0, 16, 32], [32, 16, 0]),
        # the 14th key resizes to 32 buckets before it is inserted; 33 then shares 1's bucket
        ([17, *range(1, 14), 33], [33, *range(1, 14), 17]),
        # 8 keys in one bin of a table under 64 buckets double the table
        ([0, 32, 64, 96, 128, 160, 192, 224, 256], [256, 192, 128, 64, 0, 224, 160, 96, 32]),
    ],
)
def test_tie_order_matches_java_hashmap(lucene_ids: list[int], java_order: list[int]) -> None:
    # Equal raw scores -> every document normalises to 1.0, so the order is the map order.
    hits = [(f"doc{i}", 1.0) for i in lucene_ids]
    ids = {f"doc{i}": i for i in lucene_ids}
    result = hybrid_scores([hits, []], MIN_MAX_FIRST, 100, lucene_doc_ids=ids)
    assert order(result) == [f"doc{i}" for i in java_order]


def test_lucene_doc_ids_must_cover_every_document() -> None:
    with pytest.raises(ValueError, match="no Lucene doc id"):
        hybrid_scores([L2_Q0, L2_Q1], L2_HALF, 10, lucene_doc_ids={"a": 1, "b": 2})


# --------------------------------------------------------------------------------------------
# Refused input (the processor factories' rules)


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"normalization": "z_score", "combination": "geometric_mean"}, "Z Score supports only"),
        ({"normalization": "min_max", "combination": "max"}, "combination technique"),
        ({"normalization": "max", "combination": "arithmetic_mean"}, "normalization technique"),
        ({"combination": "rrf", "rank_constant": 0}, "rank constant must be"),
        ({"normalization": "l2", "combination": "arithmetic_mean", "weights": [0.5, 0.6]},
         "sum of weights"),
        ({"normalization": "l2", "combination": "arithmetic_mean", "weights": [1.5, -0.5]},
         "range"),
    ],
)
def test_invalid_parameters_are_refused(params: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        hybrid_scores([Q0, Q1], params, 10)
    with pytest.raises(ValueError, match=message):
        pipeline_body(params)


def test_weights_must_match_the_number_of_subqueries() -> None:
    with pytest.raises(ValueError, match=r"number of weights \[2\] must match .* \[3\]"):
        hybrid_scores([Q0, Q1, Q1], {"normalization": "l2", "combination": "arithmetic_mean",
                                     "weights": [0.5, 0.5]}, 10)


def test_a_document_twice_in_one_subquery_is_refused() -> None:
    with pytest.raises(ValueError, match="same document id twice"):
        hybrid_scores([[("a", 2.0), ("a", 1.0)], []], MIN_MAX_FIRST, 10)


# --------------------------------------------------------------------------------------------
# Variant grid (docs/algorithms.md, "Hybrid optimizer")


def test_variant_grid_has_82_distinct_variants() -> None:
    grid = variant_grid()
    assert len(grid) == 82
    assert len({json.dumps(v, sort_keys=True) for v in grid}) == 82
    assert grid is not variant_grid()  # callers may mutate their copy


def test_variant_grid_order_rrf_then_min_max_and_l2_then_z_score() -> None:
    grid = variant_grid()
    assert grid[:5] == [{"combination": "rrf", "rank_constant": k} for k in (1, 5, 10, 20, 60)]
    blocks = [(v["normalization"], v["combination"]) for v in grid[5::11]]
    assert blocks == [
        ("min_max", "arithmetic_mean"), ("min_max", "geometric_mean"),
        ("min_max", "harmonic_mean"), ("l2", "arithmetic_mean"), ("l2", "geometric_mean"),
        ("l2", "harmonic_mean"), ("z_score", "arithmetic_mean"),
    ]
    first_block = grid[5:16]
    assert [v["weights"] for v in first_block] == [
        [0.0, 1.0], [0.1, 0.9], [0.2, 0.8], [0.3, 0.7], [0.4, 0.6], [0.5, 0.5],
        [0.6, 0.4], [0.7, 0.3], [0.8, 0.2], [0.9, 0.1], [1.0, 0.0],
    ]
    assert all(len({(v["normalization"], v["combination"]) for v in grid[i:i + 11]}) == 1
               for i in range(5, 82, 11))


def test_variant_grid_weights_are_one_decimal_and_sum_to_exactly_one() -> None:
    for variant in (v for v in variant_grid() if v["combination"] != "rrf"):
        w1, w2 = variant["weights"]
        assert w1 + w2 == 1.0
        assert round(w1, 1) == w1 and round(w2, 1) == w2
        assert repr(w2) in {"0.0", "0.1", "0.2", "0.3", "0.4", "0.5", "0.6", "0.7", "0.8",
                            "0.9", "1.0"}


def test_variant_grid_pairs_z_score_only_with_arithmetic_mean() -> None:
    grid = variant_grid()
    kinds = Counter((v.get("normalization"), v["combination"]) for v in grid)
    assert kinds[("z_score", "arithmetic_mean")] == 11
    assert {c for n, c in kinds if n == "z_score"} == {"arithmetic_mean"}
    assert kinds[(None, "rrf")] == len(RRF_RANK_CONSTANTS) == 5
    assert {n for n, _ in kinds} - {None} == set(NORMALIZATIONS)
    assert {c for _, c in kinds} == set(COMBINATIONS)


def test_every_variant_runs_and_builds_a_pipeline() -> None:
    for variant in variant_grid():
        assert hybrid_scores([Q0, Q1], variant, 3)
        assert pipeline_body(variant)["phase_results_processors"]


# --------------------------------------------------------------------------------------------
# experimentVariantParameters strings (docs/contract.md, "Stored documents"; the plugin's
# ExperimentVariant.getTextualParameters)


@pytest.mark.parametrize(
    ("params", "text"),
    [
        ({"normalization": "min_max", "combination": "arithmetic_mean", "weights": [0.3, 0.7]},
         "combination=arithmetic_mean, normalization=min_max, weights=0.3;0.7"),
        # NumberFormat with 0..2 fraction digits: 0.0 -> "0", 1.0 -> "1"
        ({"normalization": "l2", "combination": "geometric_mean", "weights": [0.0, 1.0]},
         "combination=geometric_mean, normalization=l2, weights=0;1"),
        ({"normalization": "z_score", "combination": "arithmetic_mean", "weights": [1.0, 0.0]},
         "combination=arithmetic_mean, normalization=z_score, weights=1;0"),
        ({"normalization": "min_max", "combination": "harmonic_mean", "weights": [0.5, 0.5]},
         "combination=harmonic_mean, normalization=min_max, weights=0.5;0.5"),
        # float drift of 3.1-era weights still prints as one decimal
        ({"normalization": "l2", "combination": "arithmetic_mean",
          "weights": [0.70000005, 0.29999995]},
         "combination=arithmetic_mean, normalization=l2, weights=0.7;0.3"),
        ({"combination": "rrf", "rank_constant": 60}, "combination=rrf, rank_constant=60"),
    ],
)
def test_variant_parameters_string(params: dict[str, object], text: str) -> None:
    assert variant_parameters_string(params) == text


def test_variant_parameter_strings_are_unique_across_the_grid() -> None:
    strings = [variant_parameters_string(v) for v in variant_grid()]
    assert len(set(strings)) == 82
    assert strings[0] == "combination=rrf, rank_constant=1"
    assert strings[-1] == "combination=arithmetic_mean, normalization=z_score, weights=1;0"


# --------------------------------------------------------------------------------------------
# Temporary search pipelines (docs/algorithms.md, "Hybrid optimizer")


def test_rrf_pipeline_body() -> None:
    assert pipeline_body({"combination": "rrf", "rank_constant": 5}) == {
        "phase_results_processors": [{"score-ranker-processor": {
            "combination": {"technique": "rrf", "rank_constant": 5}}}]}


def test_score_based_pipeline_body() -> None:
    body = pipeline_body({"normalization": "l2", "combination": "geometric_mean",
                          "weights": [0.7, 0.3]})
    assert body == {"phase_results_processors": [{"normalization-processor": {
        "normalization": {"technique": "l2"},
        "combination": {"technique": "geometric_mean", "parameters": {"weights": [0.7, 0.3]}},
    }}]}
    assert json.dumps(body).count("0.30000000000000004") == 0
