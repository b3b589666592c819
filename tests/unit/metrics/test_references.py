"""Pointwise metrics against independent IR evaluation tools, on random inputs with fixed seeds.

NDCG@k (docs/algorithms.md, "Formulas") is the "exponential-gain" nDCG of the TREC Web track and of
Burges et al.: gain 2^rel - 1 at rank i discounted by log2(i + 1), divided by the same sum over the
ideal ordering of ALL judged documents of the query (retrieved or not) cut at k, 0 when that is 0.
Two tools compute exactly this:

* ir_measures ``nDCG(dcg='exp-log2')@k``, answered by its gdeval provider (the TREC 2010 Web
  track's ``gdeval.pl``): gain ``2**rel - 1``, discount ``log(i + 1)`` relative to ``log 2``
  (the ratio is the same), ideal from every judged document sorted by grade and cut at k, unjudged
  results gain 0. It only takes integer grades 0..4 (``$MAX_JUDGMENT``) and prints 5 decimals.
* pytrec_eval (trec_eval 9) ``ndcg_cut.k``: DCG with gain = the qrels value and discount
  ``log2(rank + 1)``, ideal from all qrels sorted descending cut at k. Its gain is linear, so the
  qrels are given as 2^rel - 1 (ir_measures' ``nDCG(gains=...)`` does that remapping); trec_eval
  qrels are integers, which 2^rel - 1 is for integer ratings.

Both read a run as a scored set (no repeated ids) and order it by score, so the random runs have
distinct ids with descending scores. Ratings are random integers, as both tools require.

Precision, Recall, MAP and MRR of that page do NOT coincide with trec_eval's in general (the dynamic
threshold T, Precision dividing by min(k, n), Recall and MAP over R of the whole judgment set, MRR
cut at k). They coincide on a sub-domain: integer ratings, relevance level max(1, ceil(T)), and
exactly k results (then min(k, n) = k and trec_eval's uncut recip_rank sees the same k results).
The general case is checked against the loop reference in tests/unit/metrics/test_pointwise.py.
"""

from __future__ import annotations

import math
import random
import shutil

import ir_measures
import pytest
import pytrec_eval
from ir_measures import nDCG

from workbench.metrics import evaluate


def random_run(
    rng: random.Random, max_grade: int, exact_length: int | None = None
) -> tuple[list[str], dict[str, int]]:
    """Distinct result ids in rank order and integer ratings for part of a document pool."""
    pool = [f"D{i}" for i in range(rng.randint(3, 30))]
    judged = rng.sample(pool, rng.randint(1, len(pool)))
    weights = [rng.random() for _ in range(max_grade + 1)]  # skewed grades, like real qrels
    grades = rng.choices(range(max_grade + 1), weights=weights, k=len(judged))
    judgments = dict(zip(judged, grades, strict=True))
    n = exact_length if exact_length is not None else rng.randint(1, 20)
    doc_ids = rng.sample(pool + [f"U{i}" for i in range(n)], n)  # some never judged
    return doc_ids, judgments


def as_run(doc_ids: list[str]) -> dict[str, float]:
    return {d: float(len(doc_ids) - i) for i, d in enumerate(doc_ids)}


def our(doc_ids: list[str], judgments: dict[str, int], k: int) -> dict[str, float]:
    ratings = {d: float(r) for d, r in judgments.items()}
    return {name.split("@")[0]: value for name, value in evaluate(doc_ids, ratings, k)}


@pytest.mark.skipif(shutil.which("perl") is None, reason="ir_measures' gdeval provider runs perl")
@pytest.mark.parametrize("k", [1, 3, 5, 10, 20])
def test_ndcg_equals_ir_measures_exp_log2_ndcg(k: int) -> None:
    rng = random.Random(100 + k)
    queries = {str(q): random_run(rng, max_grade=4) for q in range(1, 201)}
    qrels = {q: judgments for q, (_, judgments) in queries.items()}
    run = {q: as_run(doc_ids) for q, (doc_ids, _) in queries.items()}

    measure = nDCG(dcg="exp-log2") @ k
    reference = {m.query_id: m.value for m in ir_measures.gdeval.iter_calc([measure], qrels, run)}

    assert set(reference) == set(queries)
    nonzero = 0
    for q, (doc_ids, judgments) in queries.items():
        got = our(doc_ids, judgments, k)["NDCG"]
        assert got == pytest.approx(reference[q], abs=5.1e-6), (q, doc_ids, judgments)
        nonzero += got > 0
    assert nonzero > 20  # the comparison is not all zeros


@pytest.mark.parametrize("k", [1, 2, 5, 10, 25])
def test_ndcg_equals_trec_eval_ndcg_cut_with_exponential_gains(k: int) -> None:
    rng = random.Random(200 + k)
    max_grade = 8
    queries = {f"q{q}": random_run(rng, max_grade=max_grade) for q in range(300)}
    qrels = {q: judgments for q, (_, judgments) in queries.items()}
    run = {q: as_run(doc_ids) for q, (doc_ids, _) in queries.items()}

    measure = nDCG(gains={g: 2**g - 1 for g in range(max_grade + 1)}) @ k
    reference = {
        m.query_id: m.value for m in ir_measures.pytrec_eval.iter_calc([measure], qrels, run)
    }

    assert set(reference) == set(queries)
    for q, (doc_ids, judgments) in queries.items():
        got = our(doc_ids, judgments, k)
        assert got["NDCG"] == pytest.approx(reference[q], rel=1e-12, abs=1e-15), q


def test_exponential_gain_is_what_makes_them_agree() -> None:
    # Guards the comparison above: with trec_eval's own linear gain the numbers differ.
    doc_ids, judgments = ["b", "a", "y"], {"a": 3, "b": 1, "c": 0, "x": 2}
    linear = pytrec_eval.RelevanceEvaluator({"q": judgments}, {"ndcg_cut.3"})
    value = linear.evaluate({"q": as_run(doc_ids)})["q"]["ndcg_cut_3"]
    assert value == pytest.approx((1 + 3 / math.log2(3)) / (3 + 2 / math.log2(3) + 1 / 2))
    assert our(doc_ids, judgments, 3)["NDCG"] != pytest.approx(value, abs=1e-3)


def ref_threshold(ratings: list[int]) -> float:
    if not ratings or max(ratings) == 0:
        return 0.0
    ordered = sorted(ratings)
    return max(0.5 * ordered[-1], ordered[math.ceil(0.9 * len(ordered)) - 1])


@pytest.mark.parametrize("k", [1, 4, 10])
def test_binary_metrics_equal_trec_eval_where_the_definitions_coincide(k: int) -> None:
    rng = random.Random(300 + k)
    measures = {f"P.{k}", f"recall.{k}", f"map_cut.{k}", "recip_rank"}
    checked = 0
    for _ in range(250):
        doc_ids, judgments = random_run(rng, max_grade=rng.choice([1, 3, 10]), exact_length=k)
        # integer ratings: rating >= T and > 0  <=>  rating >= max(1, ceil(T))
        level = max(1, math.ceil(ref_threshold(list(judgments.values()))))
        evaluator = pytrec_eval.RelevanceEvaluator(
            {"q": judgments}, measures, relevance_level=level
        )
        reference = evaluator.evaluate({"q": as_run(doc_ids)})["q"]
        got = our(doc_ids, judgments, k)
        assert got["Precision"] == pytest.approx(reference[f"P_{k}"], rel=1e-12)
        assert got["Recall"] == pytest.approx(reference[f"recall_{k}"], rel=1e-12)
        assert got["MAP"] == pytest.approx(reference[f"map_cut_{k}"], rel=1e-12)
        assert got["MRR"] == pytest.approx(reference["recip_rank"], rel=1e-12)
        checked += got["MAP"] > 0
    assert checked > 20  # and not all zeros
