"""``evaluate_condensed_many``, the batch of the condensed metrics that experiments store: the
same numbers, bit for bit, as ``evaluate_condensed`` one list at a time, and the same as
ir_measures (trec_eval's ``-J`` and its ``Judged@k``) on hand-made runs."""

from __future__ import annotations

import math

import ir_measures
import numpy as np
import pytest
from ir_measures import AP, Judged, P, nDCG

from tests.unit.metrics.test_condensed import as_run, random_queries
from workbench.metrics import MetricError, evaluate_condensed, evaluate_condensed_many, pointwise

LOG2_3 = math.log2(3)
GAINS = {0: 0, 1: 1, 2: 3, 3: 7}  # 2^r - 1, the workbench's gain

# Two hand-made queries with holes. Ratings of q1: a=3, b=2, c=1, d=0 (sorted 0,1,2,3):
# T = max(1.5, sorted[ceil(3.6) - 1] = 3) = 3, so only a is relevant (R = 1).
# Ratings of q2: e=1, f=1 (T = max(0.5, 1) = 1: both relevant, R = 2).
HAND = {
    "q1": (["u1", "b", "u2", "a", "c"], {"a": 3.0, "b": 2.0, "c": 1.0, "d": 0.0}),
    "q2": (["e", "u3", "u4", "u5"], {"e": 1.0, "f": 1.0}),
}


def test_hand_made_runs() -> None:
    got = evaluate_condensed_many(list(HAND.values()), 3)
    # q1 at k = 3: the top 3 (u1, b, u2) hold one judged -> Judged@3 = 1/3.
    # Condensed: b, a, c. DCG' = 3/1 + 7/log2(3) + 1/2; IDCG = 7 + 3/log2(3) + 1/2.
    # a relevant at condensed rank 2: MAP' = (1/2)/1, Precision' = 1/3.
    # q2 at k = 3: e, u3, u4 -> Judged@3 = 1/3. Condensed: e alone.
    # NDCG' = 1 / (1 + 1/log2(3)); MAP' = (1/1)/2; Precision' = 1/min(3, 1) = 1.
    assert [name for name, _ in got[0]] == ["Judged@3", "NDCG'@3", "MAP'@3", "Precision'@3"]
    assert [v for _, v in got[0]] == pytest.approx(
        [1 / 3, (3 + 7 / LOG2_3 + 0.5) / (7 + 3 / LOG2_3 + 0.5), 0.5, 1 / 3], rel=1e-15)
    assert [v for _, v in got[1]] == pytest.approx(
        [1 / 3, 1 / (1 + 1 / LOG2_3), 0.5, 1.0], rel=1e-15)

    qrels = {q: {d: int(r) for d, r in j.items()} for q, (_, j) in HAND.items()}
    run = {q: as_run(ids) for q, (ids, _) in HAND.items()}
    ref: dict[str, dict[str, float]] = {q: {} for q in HAND}
    for m in ir_measures.iter_calc([Judged @ 3], qrels, run):
        ref[m.query_id]["Judged"] = m.value
    for m in ir_measures.pytrec_eval.iter_calc([nDCG(gains=GAINS, judged_only=True) @ 3],
                                               qrels, run):
        ref[m.query_id]["NDCG'"] = m.value
    # One trec_eval relevance level per run: q1's threshold is 3, q2's is 1.
    for q, rel in (("q1", 3), ("q2", 1)):
        for m in ir_measures.pytrec_eval.iter_calc(
                [AP(rel=rel, judged_only=True) @ 3, P(rel=rel, judged_only=True) @ 3],
                {q: qrels[q]}, {q: run[q]}):
            ref[q][m.measure.NAME] = m.value
    for (q, (ids, j)), row in zip(HAND.items(), got, strict=True):
        mine = dict(row)
        assert mine["Judged@3"] == pytest.approx(ref[q]["Judged"], abs=1e-12)
        assert mine["NDCG'@3"] == pytest.approx(ref[q]["NDCG'"], abs=1e-12)
        assert mine["MAP'@3"] == pytest.approx(ref[q]["AP"], abs=1e-12)
        # trec_eval's P@k divides by k, Precision'@k by min(k, judged results).
        depth = min(3, sum(d in j for d in ids))
        assert mine["Precision'@3"] * depth / 3 == pytest.approx(ref[q]["P"], abs=1e-12)


@pytest.mark.parametrize("k", [1, 3, 10, 20])
def test_batch_equals_one_list_at_a_time_bit_for_bit(k: int) -> None:
    queries = [(ids, {d: float(r) for d, r in j.items()})
               for ids, j in random_queries(seed=900 + k, count=200).values()]
    queries.append(([], {"a": 1.0}))  # no results
    queries.append((["a", "b"], {}))  # no ratings
    assert evaluate_condensed_many(queries, k) == [evaluate_condensed(ids, j, k)
                                                   for ids, j in queries]


def test_slices_give_the_same_numbers(monkeypatch: pytest.MonkeyPatch) -> None:
    queries = [(ids, {d: float(r) for d, r in j.items()})
               for ids, j in random_queries(seed=77, count=60).values()]
    whole = evaluate_condensed_many(queries, 10)
    monkeypatch.setattr(pointwise, "_BATCH_CELLS", 50)  # a slice of a few queries at a time
    assert evaluate_condensed_many(queries, 10) == whole


def test_empty_batch_and_bad_input() -> None:
    assert evaluate_condensed_many([], 10) == []
    with pytest.raises(MetricError, match=r"Invalid judgment rating \[NaN\] for document \[b\]"):
        evaluate_condensed_many([(["a"], {"a": 1.0}), (["b"], {"b": np.nan})], 10)
    with pytest.raises(ValueError, match="k must be a non-negative integer"):
        evaluate_condensed_many([(["a"], {"a": 1.0})], -1)


def test_the_standard_batch_is_unchanged_by_the_shared_helpers() -> None:
    queries = [(ids, {d: float(r) for d, r in j.items()})
               for ids, j in random_queries(seed=5, count=100).values()]
    assert pointwise.evaluate_many(queries, 5) == [pointwise.evaluate(ids, j, 5)
                                                   for ids, j in queries]
