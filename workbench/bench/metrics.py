"""Metrics: ``workbench.metrics.evaluate_many`` against pytrec_eval (trec_eval 9, in C).

10,000 queries x 100 ranked results with integer-graded judgments (fixed seed). The workbench
computes its eight metrics at k = 100 (Coverage, Precision, Recall, MAP, MRR, DCG, NDCG,
HitRate) in one ``evaluate_many`` call, as a pointwise experiment does; pytrec_eval computes
``ndcg_cut.100`` alone and, separately, the closest set it has (``ndcg_cut``, ``P``,
``recall``, ``map_cut``, ``recip_rank``). Medians of three runs.

Both timings start from each tool's own input: ours from the (doc ids, ratings) pairs the
experiment code passes, pytrec_eval from a ``RelevanceEvaluator`` already built on the qrels
(building it parses every qrel into C structures: reported separately as ``prepare``, like
building our pairs). pytrec_eval's ``evaluate`` still reads the run dict inside the timing, as
ours reads its lists; neither can be split further.

NDCG agreement: trec_eval's ``ndcg_cut`` uses the qrel value as the gain, so the qrels carry
2^grade - 1 (integers for integer grades), which makes it our exponential-gain NDCG with the
ideal from all judged documents (``tests/unit/metrics/test_references.py``). Reported as the
largest absolute difference over all queries at k = 10 and k = 100, against 1.0, the range of
NDCG: the "ratio" is then that difference as a fraction of the scale.
"""

from __future__ import annotations

import random
import statistics
import time
from collections.abc import Callable
from typing import Any

import pytrec_eval

from workbench.bench.common import Bench, Result
from workbench.metrics import evaluate_many

NAME = "metrics"
SEED = 20240607
RESULTS = 100  # ranked results per query
POOL = 150  # candidate documents per query: 100 retrieved, 50 judged-only or unseen
GRADES = (0, 1, 2, 3)
GRADE_WEIGHTS = (0.5, 0.25, 0.15, 0.1)  # skewed like real judgments
K = 100
CHECK_KS = (10, 100)
BINARY = ("P", "recall", "map_cut")  # cut at k; recip_rank has no cut in trec_eval
REASONABLE = 3.0  # a numpy implementation within 3x of trec_eval's C is in line


Query = tuple[list[str], dict[str, int]]


def run(bench: Bench) -> list[Result]:
    count = 2_000 if bench.quick else 10_000
    runs = 3
    queries = generate(count)

    prepare_ours, pairs = _timed(lambda: [(ids, {d: float(g) for d, g in judged.items()})
                                          for ids, judged in queries])
    prepare_trec, (qrels, run_dict) = _timed(lambda: trec_input(queries))
    evaluator_ndcg = pytrec_eval.RelevanceEvaluator(qrels, {f"ndcg_cut.{K}"})
    closest = {f"ndcg_cut.{K}", *(f"{m}.{K}" for m in BINARY), "recip_rank"}
    # 2^g - 1 >= 1 exactly when g >= 1: the same qrels serve the binary measures.
    started = time.perf_counter()
    evaluator_closest = pytrec_eval.RelevanceEvaluator(qrels, closest, relevance_level=1)
    prepare_evaluator = time.perf_counter() - started

    ours = _median(runs, lambda: evaluate_many(pairs, K))
    trec_ndcg = _median(runs, lambda: evaluator_ndcg.evaluate(run_dict))
    trec_closest = _median(runs, lambda: evaluator_closest.evaluate(run_dict))

    differences = {k: max_ndcg_difference(pairs, qrels, run_dict, k) for k in CHECK_KS}
    worst = max(diff for diff, _, _ in differences.values())
    shape = {"queries": count, "results per query": RESULTS, "k": K,
             "judged per query (mean)": round(statistics.mean(len(j) for _, j in queries), 1),
             "seed": SEED, "runs (median of)": runs,
             "reasonable": f"<= {REASONABLE:g}x trec_eval's C"}
    prepared = {"prepare ours s": round(prepare_ours, 3),
                "prepare qrels+run dicts s": round(prepare_trec, 3),
                "prepare RelevanceEvaluator s": round(prepare_evaluator, 3)}
    return [
        Result(NAME, "evaluate_many (8 metrics) vs pytrec_eval ndcg_cut", ours[0], trec_ndcg[0],
               unit="s", target=REASONABLE,
               details=dict(shape, **prepared, **{
                   "ours runs s": ours[1], "pytrec_eval runs s": trec_ndcg[1],
                   "ours per query us": round(ours[0] / count * 1e6, 2)})),
        Result(NAME, "evaluate_many (8 metrics) vs pytrec_eval closest set", ours[0],
               trec_closest[0], unit="s", target=REASONABLE,
               details={"pytrec_eval measures": ", ".join(sorted(closest)),
                        "pytrec_eval runs s": trec_closest[1]}),
        Result(NAME, "NDCG max abs difference vs pytrec_eval (of range 1.0)", worst, 1.0,
               unit="", target=1e-9,
               details={f"NDCG@{k}": f"max diff {diff:.3g} over {n} queries (mean {mean:.3f})"
                        for k, (diff, n, mean) in differences.items()}),
    ]


def generate(count: int, seed: int = SEED) -> list[Query]:
    """Per query: 100 distinct ranked ids out of a pool of 150; about 60% of the pool judged with
    integer grades, so some results are unjudged and some judged documents are not retrieved
    (the ideal DCG still counts them)."""
    rng = random.Random(seed)
    queries: list[Query] = []
    for q in range(count):
        pool = [f"q{q}d{i}" for i in range(POOL)]
        rng.shuffle(pool)
        judged = rng.sample(pool, rng.randint(POOL // 3, POOL * 9 // 10))
        grades = rng.choices(GRADES, weights=GRADE_WEIGHTS, k=len(judged))
        queries.append((pool[:RESULTS], dict(zip(judged, grades, strict=True))))
    return queries


def trec_input(queries: list[Query]) -> tuple[dict[str, dict[str, int]],
                                              dict[str, dict[str, float]]]:
    """qrels with gain 2^grade - 1 and a run with strictly descending scores (no ties, so
    trec_eval's order is our rank order)."""
    qrels = {str(q): {d: 2**g - 1 for d, g in judged.items()}
             for q, (_, judged) in enumerate(queries)}
    run_dict = {str(q): {d: float(len(ids) - i) for i, d in enumerate(ids)}
                for q, (ids, _) in enumerate(queries)}
    return qrels, run_dict


def max_ndcg_difference(pairs: list[tuple[list[str], dict[str, float]]],
                        qrels: dict[str, dict[str, int]], run_dict: dict[str, dict[str, float]],
                        k: int) -> tuple[float, int, float]:
    """Largest |our NDCG@k - trec_eval ndcg_cut.k| over the queries, how many were compared
    (every query has judgments, so trec_eval answers for all of them) and our mean NDCG@k (far
    from 0 and 1: the comparison is not between trivial values)."""
    reference = pytrec_eval.RelevanceEvaluator(qrels, {f"ndcg_cut.{k}"}).evaluate(run_dict)
    ours = evaluate_many(pairs, k)
    if len(reference) != len(ours):
        raise RuntimeError(f"pytrec_eval answered {len(reference)} of {len(ours)} queries")
    worst, total = 0.0, 0.0
    for q, metrics in enumerate(ours):
        ndcg = dict(metrics)[f"NDCG@{k}"]
        worst = max(worst, abs(ndcg - reference[str(q)][f"ndcg_cut_{k}"]))
        total += ndcg
    return worst, len(ours), total / max(len(ours), 1)


def _timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    started = time.perf_counter()
    value = fn()
    return time.perf_counter() - started, value


def _median(runs: int, fn: Callable[[], Any]) -> tuple[float, list[float]]:
    """Median wall time of ``runs`` calls, and every run (rounded) for the details."""
    times = [_timed(fn)[0] for _ in range(runs)]
    return statistics.median(times), [round(t, 4) for t in times]
