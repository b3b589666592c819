"""How far the embedded reference judges (``token_overlap``, ``semantic``) agree with people, on
the ESCI human labels.

    python -m workbench.bench.judge_agreement [--data DIR] [--opensearch-url URL] [--out FILE]

The data is the ESCI demo data the package ships (``workbench/demo/data``), or ``DIR`` holding
``esci/esci_us_queryset.json``, ``esci/esci_us_judgments.json`` and
``ubi-sample/ubi_ecommerce_products.json.gz`` (``--queries``, ``--judgments`` and
``--products`` name the files one by one; ``WORKBENCH_DATA_DIR`` is the default ``DIR``).

What is measured, and why this way:

* **Pairs.** Every human-rated (query, product) whose product has a non-empty title in the
  catalogue: the judges read the title, as a ``REFERENCE_JUDGMENT`` with ``contextFields:
  ["title"]`` does. The reference answer of a query is its own text: ESCI queries carry no
  other, and that is what a user without reference answers would give.
* **Human relevance**, two ways: ``exact`` is what the workbench's experiments (and
  ``judgments/_compare`` by default) use on this list, ``max(0.5 x max, P90)`` per query, which
  on ESCI's 100/10/1/0 (Exact/Substitute/Complement/Irrelevant) ratings keeps only Exact; ``es``
  counts Exact and Substitute, ESCI's own reading.
* **Figures** are ``workbench.judgments.agreement.compare`` of the human list against the
  judge's scores cut at the judge's threshold (the same calls as the judge's ``relevant``), next
  to the trivial judge that calls everything relevant. A threshold sweep shows the best a judge
  could do if its threshold were tuned on these very labels (an upper bound, not a fair estimate).
* **Ranking configurations** (with ``--opensearch-url``): the catalogue goes into a throwaway
  index, a few search configurations answer every query, and each labeller ranks them by mean
  Precision@k (people: the hits they rated relevant, an unrated hit counting as not relevant as
  in the experiments; a judge: its call on every hit). Kendall's tau compares the orders. The
  same figures as above are then taken over the top-k hits people rated: of the two
  configurations of the ESCI table in docs/guide.md (what a ``REFERENCE_JUDGMENT`` over them,
  compared with the imported list by ``judgments/_compare``, measures), and of all of them.
"""

from __future__ import annotations

import argparse
import gzip
import json
import math
import os
import sys
import time
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from scipy.stats import kendalltau

from workbench.bench.paths import output
from workbench.demo.load import read_json
from workbench.judges import Hit, Query, Setup
from workbench.judges import registry as judges
from workbench.judgments.agreement import binary_agreement, compare, merge
from workbench.metrics import relevance_threshold

REPO = Path(__file__).resolve().parents[2]
RESULTS = REPO / "scripts" / "bench" / "results" / "judge_agreement.json"
JUDGES = ("token_overlap", "semantic")
K = 10
SWEEP = tuple(round(0.1 * i, 1) for i in range(1, 10))
# ESCI's grades on the plugin sample's scale: Exact 100, Substitute 10, Complement 1,
# Irrelevant 0. Substitute and up is ESCI's "relevant". The demo list the workbench ships grades
# them 3/2/1/0 (scripts/demo_judgments.py); ``on_sample_scale`` reads it back on this scale, so
# the rules and figures below mean the same whichever file is given.
ES_FROM = 10.0
DEMO_TO_SAMPLE = {3.0: 100.0, 2.0: 10.0, 1.0: 1.0, 0.0: 0.0}
# Simple configurations a user would try first, from strong to weak on product search.
CONFIGURATIONS: dict[str, dict[str, Any]] = {
    "title": {"query": {"match": {"title": "%SearchText%"}}},
    "multi_match": {"query": {"multi_match": {
        "query": "%SearchText%", "fields": ["title^2", "bullet_points", "brand"]}}},
    "bullet_points": {"query": {"match": {"bullet_points": "%SearchText%"}}},
    "description": {"query": {"match": {"description": "%SearchText%"}}},
}
# The two configurations of the ESCI table in docs/guide.md.
README_CONFIGURATIONS = ("title", "multi_match")


@dataclass(frozen=True)
class Pair:
    """One human-rated (query, product) the judges can read."""

    query: str
    doc_id: str
    rating: float
    title: str


# ---------------------------------------------------------------------------------------------
# Pure pieces (unit-tested without the ESCI files)


def shared_pairs(ratings: Mapping[str, Mapping[str, float]],
                 titles: Mapping[str, str]) -> list[Pair]:
    """The rated pairs whose product has a non-blank title, in the ratings' order: a judge
    given an empty text would rate the missing text, not the product."""
    return [Pair(query, doc_id, rating, titles[doc_id].strip())
            for query, docs in ratings.items() for doc_id, rating in docs.items()
            if (titles.get(doc_id) or "").strip()]


def on_sample_scale(ratings: Mapping[str, Mapping[str, float]]
                    ) -> dict[str, dict[str, float]]:
    """ESCI ratings on the sample's 100/10/1/0 scale: the shipped 3/2/1/0 list mapped back,
    the sample as it is (a list with other grades is not ESCI's: an error)."""
    grades = {r for docs in ratings.values() for r in docs.values()}
    if grades <= set(DEMO_TO_SAMPLE.values()) and not grades <= set(DEMO_TO_SAMPLE):
        return {q: dict(docs) for q, docs in ratings.items()}
    if not grades <= set(DEMO_TO_SAMPLE):
        raise ValueError(f"not ESCI's grades (100/10/1/0 or 3/2/1/0): {sorted(grades)}")
    return {q: {d: DEMO_TO_SAMPLE[r] for d, r in docs.items()} for q, docs in ratings.items()}


def human_relevant(ratings: Mapping[str, Mapping[str, float]], rule: str
                   ) -> dict[str, dict[str, bool]]:
    """People's binary call per pair: ``exact`` by the experiments' per-query rule
    (``relevance_threshold``; a rating of 0 is then never relevant), ``es`` at ESCI's Substitute
    grade and up."""
    if rule not in ("exact", "es"):
        raise ValueError(f"unknown rule {rule!r}: exact or es")
    out: dict[str, dict[str, bool]] = {}
    for query, docs in ratings.items():
        values = list(docs.values())
        if rule == "es":
            out[query] = {d: r >= ES_FROM for d, r in docs.items()}
            continue
        threshold = relevance_threshold(values)
        out[query] = {d: (r >= threshold if threshold > 0 else r > 0) for d, r in docs.items()}
    return out


def as_judgment_ratings(values: Iterable[tuple[str, str, float]]) -> list[dict[str, Any]]:
    """(query, docId, rating) triples as a ``judgmentRatings`` list, one entry per query."""
    by_query: dict[str, list[dict[str, Any]]] = {}
    for query, doc_id, rating in values:
        by_query.setdefault(query, []).append({"docId": doc_id, "rating": rating})
    return [{"query": q, "ratings": r} for q, r in by_query.items()]


def everything_relevant(truth: Sequence[bool]) -> dict[str, Any]:
    """The figures of the trivial judge that calls every pair relevant (its kappa is 0)."""
    reference = np.asarray(truth, dtype=bool)
    return binary_agreement(reference, np.ones_like(reference))


def sweep(truth: Sequence[bool], scores: Sequence[float],
          thresholds: Sequence[float] = SWEEP) -> list[dict[str, Any]]:
    """Kappa, accuracy and F1 of ``score >= t`` for each threshold t."""
    reference = np.asarray(truth, dtype=bool)
    values = np.asarray(scores, dtype=float)
    rows = []
    for t in thresholds:
        figures = binary_agreement(reference, values >= t)
        rows.append({"threshold": t, "cohen_kappa": figures["cohen_kappa"],
                     "accuracy": figures["accuracy"], "f1": figures["f1"],
                     "predicted_relevant": float(np.mean(values >= t)) if values.size else None})
    return rows


def precision_at_k(ranked: Sequence[str], relevant: Mapping[str, bool], k: int = K) -> float:
    """Relevant hits among the first k over k: a hit missing from ``relevant`` (unrated) is not
    relevant, and a short list is not padded with credit."""
    return sum(1 for doc_id in ranked[:k] if relevant.get(doc_id, False)) / k


def mean_precision(lists: Mapping[str, Sequence[str]],
                   relevant: Mapping[str, Mapping[str, bool]], k: int = K) -> float:
    """Mean Precision@k over the queries of ``lists`` (query -> ranked ids)."""
    return float(np.mean([precision_at_k(ids, relevant.get(q, {}), k)
                          for q, ids in lists.items()]))


def order_tau(reference: Mapping[str, float], candidate: Mapping[str, float]) -> float | None:
    """Kendall's tau-b of two scorings of the same configurations; None when undefined."""
    names = sorted(reference)
    if len(names) < 2 or set(candidate) != set(names):
        return None
    a = [reference[n] for n in names]
    b = [candidate[n] for n in names]
    if len(set(a)) < 2 or len(set(b)) < 2:
        return None
    tau = float(kendalltau(a, b).statistic)
    return tau if math.isfinite(tau) else None


# ---------------------------------------------------------------------------------------------
# Data


def product_titles(path: Path) -> dict[str, str]:
    """docId -> title of a JSON-lines catalogue (gzip or plain); ids as ``load-demo`` takes
    them (``_id``, else ``asin``)."""
    opener = gzip.open if path.suffix == ".gz" else open
    titles: dict[str, str] = {}
    with opener(path, "rt", encoding="utf-8") as lines:
        for line in lines:
            if line.strip():
                doc = json.loads(line)
                titles[str(doc.get("_id") or doc.get("asin"))] = str(doc.get("title") or "")
    return titles


def judge_scores(name: str, pairs: Sequence[Pair], setup: Setup | None = None,
                 ) -> tuple[list[float], list[bool], float]:
    """Each pair's score and ``relevant`` call by the judge at its default threshold, one batch
    per query, through the judge interface, the query's text being its reference answer; and
    the threshold it applied (an LLM rubric's: the first relevant grade; an unrated hit
    scores 0)."""
    judge = judges.create(name, setup or Setup({}))
    groups: dict[str, list[int]] = {}
    for i, pair in enumerate(pairs):
        groups.setdefault(pair.query, []).append(i)
    scores = [0.0] * len(pairs)
    calls = [False] * len(pairs)
    for query, indices in groups.items():
        judged = judge.judge(Query(query, (query,)),
                             [Hit(pairs[i].doc_id, {"title": pairs[i].title}) for i in indices])
        for i, verdict in zip(indices, judged.verdicts, strict=True):
            # a reference judge's similarity, else the rating on the judge's scale
            value = verdict.score if verdict.score is not None else verdict.rating
            scores[i] = float(value or 0.0)
            calls[i] = verdict.relevant
    rubric = getattr(judge, "rubric", None)
    if rubric is not None:
        return scores, calls, float(rubric.scale.relevant_from)
    return scores, calls, float(getattr(judge, "threshold", 0.5))


def llm_agreement(url: str, opensearch_url: str, pairs: Sequence[Pair],
                  ratings: Mapping[str, Mapping[str, float]], queries: int) -> dict[str, Any]:
    """The ``llm`` judge (0-3 rubric) of the model at ``url`` (an OpenAI-compatible base URL)
    on the pairs of the first ``queries`` queries, beside ``token_overlap`` and the trivial
    judge on the same pairs. Its grades go to the judgment cache of ``opensearch_url``."""
    from workbench.config import Config
    from workbench.services import Services

    model = {"id": "agreement-llm", "name": "agreement", "provider": "openai",
             "base_url": url, "model": "model"}
    config = Config.from_env(dict(os.environ, OPENSEARCH_URL=opensearch_url,
                                  WORKBENCH_MODELS=json.dumps([model])))
    chosen: list[str] = []
    for pair in pairs:
        if pair.query not in chosen:
            chosen.append(pair.query)
    subset = [p for p in pairs if p.query in set(chosen[:queries])]
    started = time.perf_counter()
    scores, calls, threshold = judge_scores(
        "llm", subset, Setup({"modelId": model["id"], "scale": "0-3"}, Services(config)))
    out: dict[str, Any] = {"model": url, "queries": len(chosen[:queries]), "pairs": len(subset),
                           "seconds": round(time.perf_counter() - started, 1),
                           "threshold": threshold,
                           "predicted_relevant": sum(calls) / max(1, len(calls))}
    overlap, _, overlap_threshold = judge_scores("token_overlap", subset)
    for rule in ("exact", "es"):
        humans = human_relevant(ratings, rule)
        out[rule] = {
            "everything relevant": everything_relevant([humans[p.query][p.doc_id]
                                                        for p in subset]),
            "llm": agreement(subset, humans, rule, scores, threshold)["binary"],
            "token_overlap": agreement(subset, humans, rule, overlap,
                                       overlap_threshold)["binary"]}
    return out


# ---------------------------------------------------------------------------------------------
# Agreement over the pairs


def agreement(pairs: Sequence[Pair], humans: Mapping[str, Mapping[str, bool]], rule: str,
              scores: Sequence[float], threshold: float) -> dict[str, Any]:
    """``compare`` of people's calls ``humans`` (by ``rule``, taken over all their ratings)
    with the judge's scores over ``pairs``."""
    reference = as_judgment_ratings(
        (p.query, p.doc_id, 1.0 if humans[p.query][p.doc_id] else 0.0) for p in pairs)
    candidate = as_judgment_ratings((p.query, p.doc_id, s) for p, s in zip(pairs, scores,
                                                                          strict=True))
    report = compare(reference, candidate, 1.0, threshold)
    graded = compare(as_judgment_ratings((p.query, p.doc_id, p.rating) for p in pairs),
                     candidate, ES_FROM if rule == "es" else 100.0, threshold)
    truth = [humans[p.query][p.doc_id] for p in pairs]
    return {"pairs": report["pairs"]["both"], "binary": report["binary"],
            "kendall_tau_mean_per_query": graded["rank_correlation"]["kendall_tau_mean"],
            "weighted_kappa_quadratic": (graded["graded"] or {}).get("weighted_kappa_quadratic"),
            "sweep": sweep(truth, scores)}


# ---------------------------------------------------------------------------------------------
# Ranking configurations (needs a cluster)


def _render(template: dict[str, Any], text: str) -> dict[str, Any]:
    quoted = json.dumps(text)[1:-1]
    rendered: dict[str, Any] = json.loads(json.dumps(template).replace("%SearchText%", quoted))
    return rendered


def top_k(url: str, products: Path, queries: Sequence[str],
          configurations: Mapping[str, dict[str, Any]], index: str | None,
          prefix: str) -> dict[str, dict[str, list[str]]]:
    """configuration -> query -> its top-k doc ids, searched on ``index`` (or on a throwaway
    index named ``prefix-...`` the catalogue is loaded into and deleted after)."""
    from opensearchpy import OpenSearch

    from workbench.config import Config
    from workbench.demo.load import load_demo

    client = OpenSearch(hosts=[url], timeout=300)
    throwaway = index is None
    name = index or f"{prefix}-{uuid.uuid4().hex[:8]}"
    try:
        if throwaway:
            load_demo(Config.from_env(dict(os.environ, OPENSEARCH_URL=url)), str(products),
                      name, None)
        results: dict[str, dict[str, list[str]]] = {}
        for config, template in configurations.items():
            lines: list[dict[str, Any]] = []
            for text in queries:
                lines += [{"index": name}, dict(_render(template, text), size=K, _source=False)]
            replies = client.msearch(body=lines)["responses"]
            results[config] = {text: [h["_id"] for h in reply["hits"]["hits"]]
                               for text, reply in zip(queries, replies, strict=True)}
        return results
    finally:
        if throwaway:
            client.indices.delete(index=name, ignore=[404])


def rank_configurations(url: str, products: Path, queries: Sequence[str],
                        ratings: Mapping[str, Mapping[str, float]], titles: Mapping[str, str],
                        index: str | None) -> dict[str, Any]:
    """Mean Precision@k of each configuration by people and by each judge, and the taus."""
    results = top_k(url, products, queries, CONFIGURATIONS, index, "judge-agreement")

    labellers: dict[str, dict[str, float]] = {}
    for rule in ("exact", "es"):
        humans = human_relevant(ratings, rule)
        labellers[f"people ({rule})"] = {c: mean_precision(lists, humans)
                                         for c, lists in results.items()}
    labellers["people (NDCG@10, graded)"] = {
        c: float(np.mean([_ndcg(ids, ratings.get(q, {})) for q, ids in lists.items()]))
        for c, lists in results.items()}
    retrieved = sorted({(q, d) for lists in results.values() for q, ids in lists.items()
                        for d in ids})
    hits = [Pair(q, d, ratings.get(q, {}).get(d, 0.0), titles.get(d, "")) for q, d in retrieved]
    scores: dict[str, dict[tuple[str, str], float]] = {}
    for judge in JUDGES:
        judged, calls, _ = judge_scores(judge, hits)
        scores[judge] = {(h.query, h.doc_id): s for h, s in zip(hits, judged, strict=True)}
        called: dict[str, dict[str, bool]] = {}
        for h, c in zip(hits, calls, strict=True):
            called.setdefault(h.query, {})[h.doc_id] = c
        labellers[judge] = {c: mean_precision(lists, called) for c, lists in results.items()}
    taus = {judge: {people: order_tau(labellers[people], labellers[judge])
                    for people in labellers if people.startswith("people")}
            for judge in JUDGES}

    # What a REFERENCE_JUDGMENT over these configurations, compared with people's list by
    # judgments/_compare, measures: the top-k hits people rated.
    on_retrieved: dict[str, Any] = {}
    for label, configs in (("+".join(README_CONFIGURATIONS), README_CONFIGURATIONS),
                           ("all", tuple(CONFIGURATIONS))):
        shared = rated_in_top_k(results, ratings, configs)
        pairs = [h for h in hits if (h.query, h.doc_id) in shared and h.title.strip()]
        entry: dict[str, Any] = {"configurations": list(configs), "pairs": len(pairs)}
        for rule in ("exact", "es"):
            humans = human_relevant(ratings, rule)
            entry[rule] = {"everything relevant": everything_relevant(
                [humans[p.query][p.doc_id] for p in pairs])}
            for judge in JUDGES:
                threshold = float(getattr(judges.create(judge, Setup({})), "threshold", 0.5))
                entry[rule][judge] = agreement(
                    pairs, humans, rule, [scores[judge][(p.query, p.doc_id)] for p in pairs],
                    threshold)
        on_retrieved[label] = entry
    return {"k": K, "configurations": CONFIGURATIONS, "mean_precision_or_ndcg": labellers,
            "kendall_tau": taus, "retrieved_pairs": len(retrieved),
            "agreement_on_top_k_pairs_people_rated": on_retrieved,
            "top_k_pairs_rated_by_people": {
                c: {"rated": len(rated_in_top_k(results, ratings, (c,))),
                    "hits": sum(len(ids) for ids in lists.values())}
                for c, lists in results.items()}}


def rated_in_top_k(results: Mapping[str, Mapping[str, Sequence[str]]],
                   ratings: Mapping[str, Mapping[str, float]], configs: Iterable[str],
                   k: int = K) -> set[tuple[str, str]]:
    """The (query, docId) pairs in the top k of any of ``configs`` that people rated."""
    return {(q, d) for c in configs for q, ids in results[c].items() for d in ids[:k]
            if d in ratings.get(q, {})}


def _ndcg(ranked: Sequence[str], ratings: Mapping[str, float]) -> float:
    """NDCG@k with linear gains, ESCI's own: its Exact/Substitute/Complement/Irrelevant gains
    1/0.1/0.01/0 are the shipped 100/10/1/0 over 100. (The experiments' ``2**rating - 1`` would
    make any Exact outweigh every other grade.)"""
    dcg = sum(ratings.get(d, 0.0) / math.log2(i + 2) for i, d in enumerate(ranked[:K]))
    ideal = sorted(ratings.values(), reverse=True)[:K]
    idcg = sum(r / math.log2(i + 2) for i, r in enumerate(ideal))
    return dcg / idcg if idcg else 0.0


# ---------------------------------------------------------------------------------------------


def _paths(args: argparse.Namespace) -> tuple[Path, Path, Path]:
    """The files named, else those of ``--data``, else the demo data the package ships (the
    same ESCI query set, judgments and catalogue)."""
    from workbench.demo.load import JUDGMENTS, PRODUCTS, QUERY_SET

    data = Path(args.data) if args.data else None

    def pick(given: str | None, relative: str, shipped: Path) -> Path:
        if given:
            return Path(given)
        return data / relative if data is not None else shipped

    return (pick(args.queries, "esci/esci_us_queryset.json", QUERY_SET),
            pick(args.judgments, "esci/esci_us_judgments.json", JUDGMENTS),
            pick(args.products, "ubi-sample/ubi_ecommerce_products.json.gz", PRODUCTS))


def _fmt(value: float | None) -> str:
    return "  -  " if value is None else f"{value:5.3f}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m workbench.bench.judge_agreement",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", default=os.environ.get("WORKBENCH_DATA_DIR"),
                        help="folder with esci/ and ubi-sample/ (default $WORKBENCH_DATA_DIR, else "
                             "the demo data shipped in workbench/demo/data)")
    parser.add_argument("--queries", help="ESCI query set JSON")
    parser.add_argument("--judgments", help="ESCI judgments JSON (IMPORT_JUDGMENT body)")
    parser.add_argument("--products", help="product catalogue, JSON lines (.gz allowed)")
    parser.add_argument("--opensearch-url",
                        help="rank search configurations too, on this cluster (a throwaway "
                             "index is created and deleted)")
    parser.add_argument("--index", help="an index already holding the catalogue (kept)")
    parser.add_argument("--llm-url",
                        help="also the llm judge, on the model served at this OpenAI-compatible "
                             "base URL (e.g. scripts/llama.sh url); needs a cluster for the "
                             "judgment cache (--opensearch-url or OPENSEARCH_URL)")
    parser.add_argument("--llm-queries", type=int, default=20,
                        help="queries whose rated pairs the llm judge grades (default 20)")
    parser.add_argument("--first", type=int, metavar="N",
                        help="only the first N queries (a quick look; the recorded figures are "
                             "over all 150)")
    parser.add_argument("--out", default=str(output("judge_agreement.json")),
                        help=f"results file (default under $WORKBENCH_HOME/output; the recorded "
                             f"run the docs quote is {RESULTS.relative_to(REPO)})")
    args = parser.parse_args(argv)
    queries_path, judgments_path, products_path = _paths(args)

    queries = [q["queryText"] for q in read_json(queries_path)["querySetQueries"]]
    ratings = on_sample_scale(merge(read_json(judgments_path)["judgmentRatings"]))
    if args.first:
        queries = queries[:args.first]
        ratings = {query: ratings[query] for query in queries if query in ratings}
    titles = product_titles(products_path)
    pairs = shared_pairs(ratings, titles)
    rated = sum(len(d) for d in ratings.values())
    print(f"{rated} human ratings of {len(ratings)} queries; {len(pairs)} pairs with a "
          f"product title (reference answer: the query text)")

    report: dict[str, Any] = {
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "data": {"queries": len(queries), "ratings": rated, "pairs": len(pairs),
                 "pairs_by_rating": {str(r): sum(1 for p in pairs if p.rating == r)
                                     for r in sorted({p.rating for p in pairs})}},
        "reference_answer": "the query text", "judged_fields": ["title"],
        "rules": {"exact": "experiments' per-query rule max(0.5 x max, P90): Exact only",
                  "es": "ESCI Exact or Substitute (rating >= 10)"},
        "judges": {}, "baseline_everything_relevant": {}}
    scores: dict[str, list[float]] = {}
    for judge in JUDGES:
        started = time.perf_counter()
        scores[judge], calls, threshold = judge_scores(judge, pairs)
        seconds = time.perf_counter() - started
        assert [s >= threshold for s in scores[judge]] == calls  # compare() cuts as the judge
        report["judges"][judge] = {"threshold": threshold, "seconds": round(seconds, 2),
                                   "predicted_relevant": sum(calls) / len(calls)}
    print(f"\n{'labels':6} {'judge':22} {'kappa':>6} {'acc':>6} {'prec':>6} {'recall':>6} "
          f"{'F1':>6} {'best kappa (t)':>15}")
    for rule in ("exact", "es"):
        humans = human_relevant(ratings, rule)
        truth = [humans[p.query][p.doc_id] for p in pairs]
        base = everything_relevant(truth)
        report["baseline_everything_relevant"][rule] = base
        rows = [("everything relevant", base, None)]
        for judge in JUDGES:
            figures = agreement(pairs, humans, rule, scores[judge],
                                report["judges"][judge]["threshold"])
            report["judges"][judge][rule] = figures
            best = max(figures["sweep"], key=lambda r: r["cohen_kappa"] or -1.0)
            rows.append((judge, figures["binary"], best))
        for name, b, best in rows:
            tail = "" if best is None else f"{_fmt(best['cohen_kappa'])} ({best['threshold']})"
            print(f"{rule:6} {name:22} {_fmt(b['cohen_kappa']):>6} {_fmt(b['accuracy']):>6} "
                  f"{_fmt(b['precision']):>6} {_fmt(b['recall']):>6} {_fmt(b['f1']):>6} "
                  f"{tail:>15}")

    if args.llm_url:
        cluster = args.opensearch_url or os.environ.get("OPENSEARCH_URL",
                                                        "http://127.0.0.1:9200")
        llm = llm_agreement(args.llm_url, cluster, pairs, ratings, args.llm_queries)
        report["llm"] = llm
        print(f"\nllm judge ({args.llm_url}), {llm['pairs']} pairs of {llm['queries']} queries, "
              f"{llm['seconds']} s")
        for rule in ("exact", "es"):
            for name, b in llm[rule].items():
                print(f"{rule:6} {name:22} {_fmt(b['cohen_kappa']):>6} {_fmt(b['accuracy']):>6} "
                      f"{_fmt(b['precision']):>6} {_fmt(b['recall']):>6} {_fmt(b['f1']):>6}")

    if args.opensearch_url or args.index:
        url = args.opensearch_url or os.environ.get("OPENSEARCH_URL", "http://127.0.0.1:9200")
        ranking = rank_configurations(url, products_path, queries, ratings, titles, args.index)
        report["configurations"] = ranking
        print(f"\nmean P@{K} (people: NDCG@{K} where said) per configuration")
        names = list(CONFIGURATIONS)
        print(f"{'labeller':26}" + "".join(f"{n:>14}" for n in names))
        for labeller, values in ranking["mean_precision_or_ndcg"].items():
            print(f"{labeller:26}" + "".join(f"{values[n]:14.3f}" for n in names))
        for judge, taus in ranking["kendall_tau"].items():
            print(f"Kendall tau of {judge}'s order: "
                  + ", ".join(f"vs {p} {_fmt(t)}" for p, t in taus.items()))
        for label, entry in ranking["agreement_on_top_k_pairs_people_rated"].items():
            print(f"\ntop-{K} hits of {label} that people rated: {entry['pairs']} pairs")
            for rule in ("exact", "es"):
                for name, figures in entry[rule].items():
                    b = figures.get("binary", figures)
                    print(f"{rule:6} {name:22} {_fmt(b['cohen_kappa']):>6} "
                          f"{_fmt(b['accuracy']):>6} {_fmt(b['precision']):>6} "
                          f"{_fmt(b['recall']):>6} {_fmt(b['f1']):>6}")

    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=2) + "\n")
    print(f"\nwrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
