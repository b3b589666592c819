"""Agreement between two judgment lists (workbench.judgments.agreement).

The figures are checked against scikit-learn on generated labels with fixed seeds; the tests
align the two lists themselves (plain dict loops) so the module's merging is checked too.
Kendall's tau-b is checked against a direct O(n^2) count and a hand-worked example.
"""

from __future__ import annotations

import ast
import json
import math
import random
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from sklearn.metrics import (
    accuracy_score,
    cohen_kappa_score,
    confusion_matrix,
    f1_score,
    precision_score,
    recall_score,
)

from workbench.judgments import agreement
from workbench.judgments.agreement import compare, ordinal_levels, query_key

ESCI: list[float] = [0, 1, 10, 100]
LLM = [round(0.1 * i, 1) for i in range(11)]


def entry(query: str, *ratings: tuple[str, Any]) -> dict[str, Any]:
    return {"query": query, "ratings": [{"docId": d, "rating": r} for d, r in ratings]}


def generate(seed: int, reference_scale: Sequence[float], candidate_scale: Sequence[float],
             queries: int = 12, docs: int = 9) -> tuple[list[dict], list[dict]]:
    """A reference and a noisy candidate on other scales, with docs and queries only in one.

    Ratings are written as strings (as stored), candidate keys sometimes carry custom fields.
    """
    rng = random.Random(seed)
    reference: list[dict] = []
    candidate: list[dict] = []
    for q in range(queries):
        in_ref, in_cand = rng.random() > 0.1, rng.random() > 0.1
        ref_ratings, cand_ratings = [], []
        for d in range(docs):
            grade = rng.random()
            noisy = min(max(grade + rng.gauss(0, 0.3), 0.0), 0.999)
            doc = f"d{q}-{d}"
            if rng.random() > 0.15:
                ref_ratings.append((doc, str(reference_scale[int(grade * len(reference_scale))])))
            if rng.random() > 0.15:
                value = candidate_scale[int(noisy * len(candidate_scale))]
                cand_ratings.append((doc, str(value) if rng.random() > 0.3 else value))
        if in_ref:
            reference.append(entry(f"query {q}", *ref_ratings))
        if in_cand:
            key = f"query {q}" if q % 3 else f'query {q}#{{"referenceAnswer":"answer {q}"}}'
            candidate.append(entry(key, *cand_ratings))
    return reference, candidate


def aligned(reference: list[dict], candidate: list[dict]
            ) -> tuple[list[float], list[float], list[str]]:
    """Ratings of the pairs both lists rated, straightforwardly (no duplicates generated)."""
    cand = {}
    for e in candidate:
        for r in e["ratings"]:
            cand[(e["query"].split("#")[0], r["docId"])] = float(r["rating"])
    ref_values, cand_values, queries = [], [], []
    for e in reference:
        for r in e["ratings"]:
            key = (e["query"], r["docId"])
            if key in cand:
                ref_values.append(float(r["rating"]))
                cand_values.append(cand[key])
                queries.append(e["query"])
    return ref_values, cand_values, queries


def same(ours: float | None, theirs: float) -> bool:
    """sklearn's NaN (zero_division=np.nan, undefined kappa) is our None."""
    if math.isnan(theirs):
        return ours is None
    return ours is not None and math.isclose(ours, theirs, rel_tol=1e-9, abs_tol=1e-12)


def tau_b_direct(x: list[float], y: list[float]) -> float:
    """Kendall's tau-b by counting every pair."""
    concordant = discordant = ties_x = ties_y = 0
    for i in range(len(x)):
        for j in range(i + 1, len(x)):
            dx, dy = x[i] - x[j], y[i] - y[j]
            ties_x += dx == 0
            ties_y += dy == 0
            if dx * dy > 0:
                concordant += 1
            elif dx * dy < 0:
                discordant += 1
    n0 = len(x) * (len(x) - 1) / 2
    return (concordant - discordant) / math.sqrt((n0 - ties_x) * (n0 - ties_y))


CASES = [  # seed, reference scale, candidate scale, reference threshold, candidate threshold
    (1, ESCI, LLM, 10, 0.5),
    (2, ESCI, LLM, 100, 0.3),
    (3, [0, 1, 2, 3], ESCI, 2, 10),
    (4, LLM, [0, 1], 0.5, 1),
]


@pytest.mark.parametrize(("seed", "ref_scale", "cand_scale", "ref_t", "cand_t"), CASES)
def test_binary_figures_match_sklearn(seed: int, ref_scale: list[float], cand_scale: list[float],
                                      ref_t: float, cand_t: float) -> None:
    reference, candidate = generate(seed, ref_scale, cand_scale)
    ref_values, cand_values, _ = aligned(reference, candidate)
    truth = [v >= ref_t for v in ref_values]
    predicted = [v >= cand_t for v in cand_values]
    assert len(truth) > 30 and 0 < sum(truth) < len(truth) and sum(predicted) > 0

    binary = compare(reference, candidate, ref_t, cand_t)["binary"]

    tn, fp, fn, tp = (int(v) for v in confusion_matrix(truth, predicted,
                                                       labels=[False, True]).ravel())
    assert binary["confusion_matrix"] == {"true_positive": tp, "false_positive": fp,
                                          "true_negative": tn, "false_negative": fn}
    assert same(binary["accuracy"], accuracy_score(truth, predicted))
    assert same(binary["cohen_kappa"], cohen_kappa_score(truth, predicted))
    assert same(binary["precision"], precision_score(truth, predicted, zero_division=np.nan))
    assert same(binary["recall"], recall_score(truth, predicted, zero_division=np.nan))
    assert same(binary["f1"], f1_score(truth, predicted, zero_division=np.nan))
    assert same(binary["false_positive_rate"], fp / (fp + tn))
    assert same(binary["false_negative_rate"], fn / (fn + tp))


@pytest.mark.parametrize(("seed", "ref_scale", "cand_scale", "ref_t", "cand_t"), CASES[:3])
def test_weighted_kappas_match_sklearn_on_the_levels(
        seed: int, ref_scale: list[float], cand_scale: list[float], ref_t: float,
        cand_t: float) -> None:
    reference, candidate = generate(seed, ref_scale, cand_scale)
    ref_values, cand_values, _ = aligned(reference, candidate)
    ref_levels, cand_levels, k, method = ordinal_levels(np.array(ref_values),
                                                        np.array(cand_values))

    graded = compare(reference, candidate, ref_t, cand_t)["graded"]

    assert graded is not None
    assert (graded["levels"], graded["method"]) == (k, method)
    for weights in ("linear", "quadratic"):
        expected = cohen_kappa_score(ref_levels, cand_levels, weights=weights,
                                     labels=list(range(k)))
        assert same(graded[f"weighted_kappa_{weights}"], expected)


def test_same_number_of_levels_is_dense_rank_and_matches_sklearn_on_mapped_grades() -> None:
    """ESCI 0/1/10/100 against 0..3: level i is the i-th value, so 10 ~ 2 and 100 ~ 3."""
    reference, candidate = generate(3, ESCI, [0, 1, 2, 3])
    ref_values, cand_values, _ = aligned(reference, candidate)
    esci_grade = {0.0: 0, 1.0: 1, 10.0: 2, 100.0: 3}

    graded = compare(reference, candidate, 10, 2)["graded"]

    assert graded is not None and graded["method"] == "dense_rank" and graded["levels"] == 4
    ref_grades = [esci_grade[v] for v in ref_values]
    for weights in ("linear", "quadratic"):
        expected = cohen_kappa_score(ref_grades, [int(v) for v in cand_values], weights=weights)
        assert same(graded[f"weighted_kappa_{weights}"], expected)
    assert graded["weighted_kappa_linear"] != graded["weighted_kappa_quadratic"]


def quantile_levels_direct(values: list[float], target: list[int], k: int) -> list[int]:
    """Level = number of the target's cumulative proportions strictly below the mid-rank."""
    n = len(values)
    cuts = [sum(1 for t in target if t <= j) / n for j in range(k - 1)]
    out = []
    for v in values:
        mid = (sum(1 for w in values if w < v) + sum(1 for w in values if w == v) / 2) / n
        out.append(sum(1 for c in cuts if c < mid))
    return out


def test_quantile_matching_against_a_direct_computation() -> None:
    rng = np.random.default_rng(7)
    reference = rng.choice(ESCI, size=60, p=[0.4, 0.3, 0.2, 0.1]).astype(float)
    candidate = np.round(rng.random(60), 1)
    ref_levels, cand_levels, k, method = ordinal_levels(reference, candidate)
    assert (k, method) == (4, "quantile_matched_candidate")
    assert ref_levels.tolist() == [ESCI.index(int(v)) for v in reference]
    assert cand_levels.tolist() == quantile_levels_direct(candidate.tolist(),
                                                          ref_levels.tolist(), 4)
    # The other way round: the reference is the finer list.
    ref_levels, cand_levels, k, method = ordinal_levels(candidate, reference)
    assert (k, method) == (4, "quantile_matched_reference")
    assert ref_levels.tolist() == quantile_levels_direct(candidate.tolist(),
                                                         cand_levels.tolist(), 4)


def test_quantile_matching_hand_worked() -> None:
    # Reference: three levels, a third each; cuts at 1/3 and 2/3.
    ref = np.array([0.0, 0.0, 1.0, 1.0, 2.0, 2.0])
    cand = np.array([0.1, 0.2, 0.2, 0.2, 0.5, 0.9])  # mid-ranks 1/12, 5/12, 9/12, 11/12
    ref_levels, cand_levels, k, _ = ordinal_levels(ref, cand)
    assert k == 3 and ref_levels.tolist() == [0, 0, 1, 1, 2, 2]
    assert cand_levels.tolist() == [0, 1, 1, 1, 2, 2]
    # Two levels, cut at 1/2; 0.2 has mid-rank (1 + 2/2)/4 = 1/2, on the cut: the lower level.
    ref = np.array([0.0, 0.0, 5.0, 5.0])
    _, cand_levels, _, _ = ordinal_levels(ref, np.array([0.1, 0.2, 0.2, 0.7]))
    assert cand_levels.tolist() == [0, 0, 0, 1]


def test_kendall_tau_per_query_matches_direct_count() -> None:
    reference, candidate = generate(5, ESCI, LLM, queries=8, docs=12)
    ref_values, cand_values, queries = aligned(reference, candidate)

    report = compare(reference, candidate, 10, 0.5)["rank_correlation"]

    expected = {}
    for query in dict.fromkeys(queries):
        xs = [r for r, q in zip(ref_values, queries, strict=True) if q == query]
        ys = [c for c, q in zip(cand_values, queries, strict=True) if q == query]
        expected[query] = (tau_b_direct(xs, ys), len(xs))
    got = {q["query"]: (q["kendall_tau"], q["pairs"]) for q in report["per_query"]
           if q["pairs"]}
    assert got.keys() == expected.keys() and len(got) >= 5
    for query, (tau, pairs) in expected.items():
        assert got[query][1] == pairs
        assert got[query][0] is not None and math.isclose(got[query][0], tau, abs_tol=1e-12)
    assert report["queries"] == len(expected)
    assert math.isclose(report["kendall_tau_mean"], float(np.mean([t for t, _ in
                                                                   expected.values()])))


def test_kendall_tau_hand_worked() -> None:
    # 6 pairs: 5 concordant, c-d discordant -> (5 - 1) / 6.
    reference = [entry("q", ("a", "3"), ("b", "2"), ("c", "1"), ("d", "0"))]
    candidate = [entry("q", ("a", "0.9"), ("b", "0.8"), ("c", "0.1"), ("d", "0.2"))]
    # Ties: (x,y) tied in the reference, (y,z) in the candidate, (x,z) concordant:
    # tau-b = 1 / sqrt((3 - 1) * (3 - 1)) = 0.5.
    reference.append(entry("t", ("x", "1"), ("y", "1"), ("z", "0")))
    candidate.append(entry("t", ("x", "1"), ("y", "0"), ("z", "0")))
    report = compare(reference, candidate, 1, 0.5)["rank_correlation"]
    assert [(q["query"], q["pairs"]) for q in report["per_query"]] == [("q", 4), ("t", 3)]
    assert math.isclose(report["per_query"][0]["kendall_tau"], 2 / 3)
    assert math.isclose(report["per_query"][1]["kendall_tau"], 0.5)
    assert math.isclose(report["kendall_tau_mean"], (2 / 3 + 0.5) / 2)


def test_pair_accounting_counts_what_only_one_list_rated() -> None:
    reference = [
        entry("q1", ("a", "1"), ("b", "0"), ("c", "1")),
        entry("q2", ("d", "1")),                      # query only in the reference
        entry("q1", ("e", "0"), ("c", "0")),          # repeated query: adds e, c is rated again
    ]
    candidate = [
        entry("q1", ("a", "1"), ("b", "1"), ("x", "0")),
        entry("q3", ("y", "1"), ("z", "0")),          # query only in the candidate
        entry("q4"),                                   # a query with no ratings still counts
    ]
    report = compare(reference, candidate, 1, 1)
    assert report["pairs"] == {
        "both": 2,             # q1/a, q1/b
        "reference_only": 3,   # q1/c, q1/e, q2/d
        "candidate_only": 3,   # q1/x, q3/y, q3/z
        "queries_both": 1, "queries_reference_only": 1, "queries_candidate_only": 2,
    }
    assert report["binary"]["confusion_matrix"] == {"true_positive": 1, "false_positive": 1,
                                                    "true_negative": 0, "false_negative": 0}


def test_duplicates_merge_last_rating_wins() -> None:
    reference = [
        entry("q", ("a", "0"), ("a", "1")),               # within an entry: 1 wins
        entry("q", ("b", "1")),
        entry('q#{"referenceAnswer":"r"}', ("b", "0")),   # same key once stripped: 0 wins
    ]
    candidate = [entry("q", ("a", "1"), ("b", "0"))]
    report = compare(reference, candidate, 1, 1)
    assert report["pairs"]["both"] == 2 and report["pairs"]["reference_only"] == 0
    assert report["binary"]["accuracy"] == 1.0
    # Had the first ratings won, both pairs would disagree.
    flipped = [entry("q", ("a", "0"), ("b", "1"))]
    assert compare(flipped, candidate, 1, 1)["binary"]["accuracy"] == 0.0


@pytest.mark.parametrize(("text", "key"), [
    ('tv#{"referenceAnswer":"a television"}', "tv"),
    ('tv#{"referenceAnswer":"a television","category":"electronics"}', "tv"),
    ('c# tutorial#{"referenceAnswer":"x#{y}"}', "c# tutorial"),
    ('a#{b} c#{"k":"v"}', "a#{b} c"),
    ("c#", "c#"),
    ("tv#a television", "tv#a television"),      # 3.1's query#reference is not stripped
    ("q#{not json}", "q#{not json}"),
    ('q#{"k":"v"} trailing', 'q#{"k":"v"} trailing'),
    ('q#["list"]', 'q#["list"]'),
    ("red shoes", "red shoes"),
])
def test_query_key_strips_only_a_json_object_suffix(text: str, key: str) -> None:
    assert query_key(text) == key


def test_llm_keys_match_plain_queries_and_exact_otherwise() -> None:
    reference = [entry("tv", ("a", "1")), entry("TV ", ("b", "1")), entry("c#", ("c", "1"))]
    candidate = [entry('tv#{"referenceAnswer":"a television"}', ("a", "1"), ("b", "1")),
                 entry('c##{"referenceAnswer":"C sharp"}', ("c", "0"))]
    pairs = compare(reference, candidate, 1, 1)["pairs"]
    assert pairs["both"] == 2                  # tv/a and c#/c
    assert pairs["queries_both"] == 2 and pairs["queries_reference_only"] == 1  # "TV " differs
    assert pairs["candidate_only"] == 1        # tv/b: "TV " is another query


def test_each_list_uses_its_own_threshold() -> None:
    reference = [entry("q", ("a", "100"), ("b", "10"), ("c", "1"), ("d", "0"))]
    candidate = [entry("q", ("a", "0.9"), ("b", "0.6"), ("c", "0.4"), ("d", "0.1"))]
    strict = compare(reference, candidate, 100, 0.5)["binary"]["confusion_matrix"]
    assert strict == {"true_positive": 1, "false_positive": 1, "true_negative": 2,
                      "false_negative": 0}
    loose = compare(reference, candidate, 1, 0.5)["binary"]["confusion_matrix"]
    assert loose == {"true_positive": 2, "false_positive": 0, "true_negative": 1,
                     "false_negative": 1}
    swapped = compare(reference, candidate, 0.5, 100)["binary"]["confusion_matrix"]
    assert swapped == {"true_positive": 0, "false_positive": 0, "true_negative": 1,
                       "false_negative": 3}


def test_no_pairs_in_common_gives_none_not_nan() -> None:
    report = compare([entry("q", ("a", "1"))], [entry("r", ("a", "1"))], 1, 1)
    binary = report["binary"]
    assert all(binary[k] is None for k in binary if k != "confusion_matrix")
    assert set(binary["confusion_matrix"].values()) == {0}
    assert report["graded"] is None
    assert report["rank_correlation"] == {"kendall_tau_mean": None, "queries": 0,
                                          "per_query": []}
    json.dumps(report, allow_nan=False)


def test_degenerate_figures_are_none() -> None:
    # Both lists call everything irrelevant: accuracy 1, but kappa, precision, recall, F1 and the
    # false-negative rate have zero denominators; every query's ratings are all tied.
    reference = [entry("q", ("a", "0"), ("b", "0")), entry("r", ("c", "0"))]
    candidate = [entry("q", ("a", "0.1"), ("b", "0.2")), entry("r", ("c", "0.3"))]
    report = compare(reference, candidate, 1, 0.5)
    binary = report["binary"]
    assert binary["accuracy"] == 1.0 and binary["false_positive_rate"] == 0.0
    for name in ("cohen_kappa", "precision", "recall", "f1", "false_negative_rate"):
        assert binary[name] is None, name
    assert report["graded"] is None   # the reference has one value
    per_query = report["rank_correlation"]["per_query"]
    assert [(q["kendall_tau"], q["pairs"]) for q in per_query] == [(None, 2), (None, 1)]
    assert report["rank_correlation"]["kendall_tau_mean"] is None
    json.dumps(report, allow_nan=False)


def test_one_sided_classes_keep_kappa_defined() -> None:
    """Kappa is 0 (not None) when only the candidate varies; recall is None, precision 0."""
    reference = [entry("q", ("a", "0"), ("b", "0"), ("c", "0"), ("d", "0"))]
    candidate = [entry("q", ("a", "1"), ("b", "0"), ("c", "0"), ("d", "0"))]
    binary = compare(reference, candidate, 1, 1)["binary"]
    assert binary["cohen_kappa"] == 0.0 and binary["precision"] == 0.0
    assert binary["recall"] is None and binary["f1"] == 0.0
    assert binary["false_positive_rate"] == 0.25


def test_graded_is_none_unless_both_lists_have_more_than_two_values() -> None:
    reference = [entry("q", ("a", "0"), ("b", "1"), ("c", "10"), ("d", "100"))]
    binary_candidate = [entry("q", ("a", "0"), ("b", "1"), ("c", "1"), ("d", "1"))]
    assert compare(reference, binary_candidate, 10, 1)["graded"] is None
    graded_candidate = [entry("q", ("a", "0.0"), ("b", "0.5"), ("c", "0.7"), ("d", "1.0"))]
    graded = compare(reference, graded_candidate, 10, 0.5)["graded"]
    assert graded == {"weighted_kappa_linear": 1.0, "weighted_kappa_quadratic": 1.0,
                      "levels": 4, "method": "dense_rank"}


def test_graded_levels_with_identical_levels_are_none() -> None:
    """Weighted kappa has no chance disagreement to compare with when everything is level 0."""
    same_level = np.array([0, 0])
    assert agreement.kappa(same_level, same_level, 3, power=2) is None
    levels = np.array([0, 0, 1, 2])
    assert agreement.kappa(levels, levels, 3, power=2) == 1.0


@pytest.mark.parametrize("bad", ["high", "", "NaN", "Infinity", None, True, [1], "1,5",
                                 "\u0663", "\uff11", "\u00a01"])  # Java reads ASCII digits only
def test_non_numeric_rating_names_query_and_doc(bad: Any) -> None:
    reference = [entry("red shoes", ("B01", "1"), ("B02", bad))]
    with pytest.raises(ValueError, match=r"red shoes.*B02"):
        compare(reference, [entry("red shoes", ("B01", "1"))], 1, 1)
    with pytest.raises(ValueError, match=r"red shoes.*B02"):
        compare([entry("red shoes", ("B01", "1"))], reference, 1, 1)


def test_ratings_as_numbers_and_java_literals_are_read() -> None:
    reference = [entry("q", ("a", 1), ("b", " 0.5 "), ("c", "1.0f"), ("d", "1e1"))]
    candidate = [entry("q", ("a", "1"), ("b", 0.5), ("c", 1.0), ("d", "10"))]
    binary = compare(reference, candidate, 1, 1)["binary"]
    assert binary["accuracy"] == 1.0
    assert binary["confusion_matrix"]["true_positive"] == 3


@pytest.mark.parametrize("threshold", [float("nan"), float("inf"), "1", None])
def test_threshold_must_be_a_finite_number(threshold: Any) -> None:
    with pytest.raises(ValueError, match="threshold"):
        compare([], [], threshold, 1)


def test_module_stays_pure() -> None:
    source = Path(agreement.__file__).read_text()
    imported = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            imported |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            # workbench.schemas.javafmt: how Java reads a number, itself pure
            imported.add(node.module if node.module.startswith("workbench.")
                         else node.module.split(".")[0])
    assert imported <= {"__future__", "json", "math", "re", "collections", "typing", "numpy",
                        "scipy", "workbench.schemas.javafmt"}
