"""Do the summary's prediction-powered intervals (``humanJudgments``) cover the truth, and how
much narrower are they than the humans' alone? A simulation on the ESCI data, where all 150
queries have human labels, so the truth is known.

    python -m workbench.bench.ppi_coverage --data DIR --opensearch-url URL [--index INDEX]
                                         [--judge semantic] [--draws 1000] [--sizes 15,30,60]

``DIR`` holds ``esci/`` and ``ubi-sample/`` (default ``$WORKBENCH_DATA_DIR``); the catalogue is
loaded into a throwaway index unless ``--index`` names one that holds it. Writes
``scripts/bench/results/ppi_coverage.json`` (``--out``) and prints the table.

What is simulated, and why this way:

* **Rankings**: the two configurations of the exact-vs-rounded table (docs/significance.md),
  title ``match`` (baseline) and a ``multi_match`` on title^2 and bullet_points (candidate),
  top 10 of every ESCI query, from the cluster.
* **Truth**: NDCG@10 of each query and configuration from ESCI's human labels (the imported
  list, as the experiments compute it: the workbench's own metric code); the true mean of each
  configuration and the true mean difference are the means over the 150 queries.
* **Judge**: a real judge's ratings of every (query, document) in the pool, by the embedded
  ``semantic`` judge (MiniLM embeddings of the title against the query text, relevant at its
  0.5 threshold, the rating a ``REFERENCE_JUDGMENT`` stores) or ``token_overlap``; its NDCG@10
  is what an experiment over the judge's list stores.
* **Draws**: humans revealed on ``n`` random queries (n = 15, 30, 60), the judge on all; the
  PPI++ interval (``workbench.experiments.ppi``, the summary's code) and the humans-alone
  interval on the same draw; 95 % two-sided. Two designs: ``subset``, the issue's literal one
  (the query set is the 150 queries, n of them labelled, truth = their mean); and
  ``resampled``, where each draw's query set is 150 queries drawn with replacement from the 150
  (the query set itself a sample of the queries users ask, which is what the intervals, like
  the summary's t-tests, claim to cover), then n of them labelled. With n a large share of the
  query set, ``subset`` over-covers: the intervals ignore that the labelled queries are a
  sizeable part of the whole finite set (the finite-population correction, 1 - n/N).
* **Figures**: coverage of the true mean (each configuration) and of the true difference, with
  its binomial standard error; mean width of the PPI and humans-alone intervals and their
  ratio; the mean tuned lambda and effective number of labelled queries.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from workbench.bench.judge_agreement import Pair, judge_scores, product_titles, top_k
from workbench.bench.paths import output
from workbench.experiments.ppi import INTERVALS, classical_interval, ppi_interval
from workbench.experiments.summary_humans import FEW_CHANGED, TIE
from workbench.judgments.agreement import merge
from workbench.metrics import evaluate_many

REPO = Path(__file__).resolve().parents[2]
RESULTS = REPO / "scripts" / "bench" / "results" / "ppi_coverage.json"
K = 10
ALPHA = 0.05
NDCG = f"NDCG@{K}"
CONFIGURATIONS: dict[str, dict[str, Any]] = {
    "title": {"query": {"match": {"title": "%SearchText%"}}},
    "title_bullets": {"query": {"multi_match": {"query": "%SearchText%",
                                                "fields": ["title^2", "bullet_points"]}}},
    "bullet_points": {"query": {"match": {"bullet_points": "%SearchText%"}}},
    "description": {"query": {"match": {"description": "%SearchText%"}}},
}
DESIGNS = ("resampled", "subset")


def ndcg_values(rankings: Mapping[str, Sequence[str]], queries: Sequence[str],
                ratings: Mapping[str, Mapping[str, float]]) -> np.ndarray:
    """NDCG@10 of each query (0 without hits), with the workbench's metric code."""
    with_hits = [q for q in queries if rankings[q]]
    scored = evaluate_many([(list(rankings[q]), dict(ratings.get(q, {}))) for q in with_hits], K)
    by_query = {q: dict(values)[NDCG] for q, values in zip(with_hits, scored, strict=True)}
    return np.array([by_query.get(q, 0.0) for q in queries])


def simulate(truth: np.ndarray, judged: np.ndarray, sizes: Sequence[int], draws: int,
             design: str, kind: str, seed: int = 0) -> dict[str, Any]:
    """Coverage and widths over ``draws`` draws per size. ``truth`` and ``judged`` are
    (quantities x queries): the per-query values of each configuration and of the differences,
    by people and by the judge. ``kind``: the interval (``ppi.INTERVALS``). Also the coverage
    over the draws where at least ``FEW_CHANGED`` labelled queries have a non-zero value (for
    a difference: the draws on which the summary does not warn ``few_changed_queries``)."""
    rng = np.random.default_rng(seed)
    n_queries = truth.shape[1]
    targets = truth.mean(axis=1)  # the population's means
    out: dict[str, Any] = {}
    for n in sizes:
        covered = np.zeros((truth.shape[0], 2))
        widths = np.zeros((truth.shape[0], 2))
        lambdas = np.zeros(truth.shape[0])
        effective = np.zeros(truth.shape[0])
        enough = np.zeros(truth.shape[0])
        covered_enough = np.zeros(truth.shape[0])
        for _ in range(draws):
            query_set: np.ndarray
            if design == "resampled":
                query_set = np.asarray(rng.integers(0, n_queries, n_queries))
            else:
                query_set = np.arange(n_queries)
            order = rng.permutation(query_set.size)
            labelled, unlabelled = query_set[order[:n]], query_set[order[n:]]
            for j in range(truth.shape[0]):
                y = truth[j, labelled]
                ppi = ppi_interval(y, judged[j, labelled], judged[j, unlabelled], ALPHA,
                                   kind=kind)
                alone = classical_interval(y, ALPHA, kind)
                for m, interval in enumerate((ppi, alone)):
                    covered[j, m] += interval.low <= targets[j] <= interval.high
                    widths[j, m] += interval.high - interval.low
                if np.count_nonzero(np.abs(y) > TIE) >= FEW_CHANGED:
                    enough[j] += 1
                    covered_enough[j] += ppi.low <= targets[j] <= ppi.high
                lambdas[j] += ppi.lam
                if ppi.standard_error > 0:
                    effective[j] += n * (alone.standard_error / ppi.standard_error) ** 2
        out[str(n)] = [{
            "coverage": covered[j, 0] / draws,
            "coverageSE": float(np.sqrt(0.95 * 0.05 / draws)),
            "humansAloneCoverage": covered[j, 1] / draws,
            "width": widths[j, 0] / draws, "humansAloneWidth": widths[j, 1] / draws,
            "widthRatio": (widths[j, 0] / widths[j, 1]) if widths[j, 1] else None,
            "lambda": lambdas[j] / draws, "effectiveLabelledQueries": effective[j] / draws,
            "drawsWithEnoughChanged": enough[j] / draws,
            "coverageWithEnoughChanged": (covered_enough[j] / enough[j]) if enough[j] else None,
        } for j in range(truth.shape[0])]
    return out


def judge_ratings(judge: str, rankings: Mapping[str, Mapping[str, Sequence[str]]],
                  titles: Mapping[str, str]) -> dict[str, dict[str, float]]:
    """query -> doc id -> the judge's rating (1 relevant, 0 not) of every pooled hit."""
    pooled = sorted({(q, d) for by_query in rankings.values() for q, ids in by_query.items()
                     for d in ids})
    pairs = [Pair(q, d, 0.0, titles.get(d, "")) for q, d in pooled]
    _, calls, _ = judge_scores(judge, pairs)
    out: dict[str, dict[str, float]] = {}
    for pair, call in zip(pairs, calls, strict=True):
        out.setdefault(pair.query, {})[pair.doc_id] = 1.0 if call else 0.0
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m workbench.bench.ppi_coverage",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", default=os.environ.get("WORKBENCH_DATA_DIR"),
                        help="folder with esci/ and ubi-sample/ (default $WORKBENCH_DATA_DIR)")
    parser.add_argument("--opensearch-url",
                        default=os.environ.get("OPENSEARCH_URL", "http://127.0.0.1:9200"))
    parser.add_argument("--index", help="an index already holding the catalogue (kept)")
    parser.add_argument("--judge", default="semantic", choices=("semantic", "token_overlap"))
    parser.add_argument("--draws", type=int, default=1000)
    parser.add_argument("--sizes", default="15,30,60")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default=str(output("ppi_coverage.json")),
                        help=f"results file (default under $WORKBENCH_HOME/output; the recorded "
                             f"run the docs quote is {RESULTS.relative_to(REPO)})")
    args = parser.parse_args(argv)
    if not args.data:
        sys.exit("no data: give --data or set WORKBENCH_DATA_DIR")
    data = Path(args.data)
    queries = [q["queryText"] for q in
               json.loads((data / "esci/esci_us_queryset.json").read_text())["querySetQueries"]]
    people = merge(json.loads((data / "esci/esci_us_judgments.json").read_text())
                   ["judgmentRatings"])
    titles = product_titles(data / "ubi-sample/ubi_ecommerce_products.json.gz")
    sizes = [int(s) for s in args.sizes.split(",")]

    started = time.perf_counter()
    rankings = top_k(args.opensearch_url, data / "ubi-sample/ubi_ecommerce_products.json.gz",
                     queries, CONFIGURATIONS, args.index, "ppi-coverage")
    judged_ratings = judge_ratings(args.judge, rankings, titles)
    judging = time.perf_counter() - started
    human = {c: ndcg_values(rankings[c], queries, people) for c in CONFIGURATIONS}
    judge = {c: ndcg_values(rankings[c], queries, judged_ratings) for c in CONFIGURATIONS}
    base, *others = CONFIGURATIONS
    labels = [base, others[0], *(f"{c} - {base}" for c in others)]
    truth = np.vstack([human[base], human[others[0]], *(human[c] - human[base] for c in others)])
    judged = np.vstack([judge[base], judge[others[0]],
                        *(judge[c] - judge[base] for c in others)])

    report: dict[str, Any] = {
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "command": "python -m workbench.bench.ppi_coverage " + " ".join(argv or sys.argv[1:]),
        "judge": args.judge, "metric": NDCG, "queries": len(queries), "draws": args.draws,
        "alpha": ALPHA, "configurations": CONFIGURATIONS, "judgingSeconds": round(judging, 1),
        "quantities": labels,
        "trueMeans": dict(zip(labels, truth.mean(axis=1).tolist(), strict=True)),
        "judgeMeans": dict(zip(labels, judged.mean(axis=1).tolist(), strict=True)),
        "judgeCorrelation": {label: float(np.corrcoef(truth[j], judged[j])[0, 1])
                             for j, label in enumerate(labels)},
        "nonZeroQueries": {label: int(np.count_nonzero(np.abs(truth[j]) > TIE))
                           for j, label in enumerate(labels)},
        "designs": {},
    }
    print(f"{args.judge} judge, {NDCG}, {len(queries)} queries, {args.draws} draws per size; "
          f"true means {', '.join(f'{k} {v:+.4f}' for k, v in report['trueMeans'].items())}")
    print(f"{'design':10} {'interval':8} {'n':>3} {'quantity':28} {'cover':>6} {'alone':>6} "
          f"{'width':>7} {'alone':>7} {'ratio':>6} {'lambda':>6} {'n_eff':>6} "
          f"{'cover|changed>=' + str(FEW_CHANGED):>17}")
    for design in DESIGNS:
        for kind in INTERVALS:
            result = simulate(truth, judged, sizes, args.draws, design, kind, args.seed)
            report["designs"].setdefault(design, {})[kind] = {
                n: dict(zip(labels, rows, strict=True)) for n, rows in result.items()}
            for n, rows in result.items():
                for label, row in zip(labels, rows, strict=True):
                    when = row["coverageWithEnoughChanged"]
                    tail = "" if when is None else \
                        f"{when:.3f} ({row['drawsWithEnoughChanged']:.0%})"
                    print(f"{design:10} {kind:8} {n:>3} {label:28} {row['coverage']:6.3f} "
                          f"{row['humansAloneCoverage']:6.3f} {row['width']:7.4f} "
                          f"{row['humansAloneWidth']:7.4f} {row['widthRatio'] or 0:6.3f} "
                          f"{row['lambda']:6.3f} {row['effectiveLabelledQueries']:6.1f} "
                          f"{tail:>17}")
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(report, indent=2) + "\n")
    print(f"written: {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
