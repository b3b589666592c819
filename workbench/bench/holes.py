"""Judgments with holes (issue 45): when only the ratings one or two configurations retrieved
are kept, how well do the remedies rank the configurations?

    workbench bench --only holes [--llm-url URL] [--llm-model NAME] [--llm-queries N]
                    [--llm-pools low|single|all] [--fills reference,llm] [--data DIR]
                    [--quick] [--out DIR]

Opt-in (a bare ``workbench bench`` leaves it out; ``workbench/bench/run.py``, ``OPT_IN``): it
runs several minutes, most of it the LLM's.

What is measured, and why this way:

* **Data.** The ESCI catalogue the package ships (6,764 products; ``--data DIR`` or
  ``WORKBENCH_DATA_DIR`` as for ``coldstart``) goes into a throwaway index (``bench-holes``,
  deleted at the end); the 150 queries and the 6,678 human ratings (3/2/1/0) are the truth.
* **Configurations.** ``CONFIGURATIONS``: nine search bodies that really differ, from a
  multi_match over title, description, bullets and brand down to a ``random_score`` ordering
  of whatever matches (the near-random one).
* **Truth.** One ``POINTWISE_EVALUATION`` experiment with every configuration and all human
  ratings, made over HTTP against a workbench the benchmark starts (API and one worker). Each
  configuration's top-10 ``documentIds`` per query are read from the stored evaluation results
  (they do not depend on the ratings, so every later figure is computed from them). The truth
  is the configurations' order by mean NDCG@10 with all ratings; the bench checks its own
  NDCG@10 against the experiment's stored ``exactMetrics``.
* **Pools.** For each configuration, and for each pair of configurations, the human ratings
  inside its top 10 (the union of the pair's) per query are kept and the rest deleted: a list
  made for a production configuration, then used to compare others.
* **Four rankings per pool**: (a) NDCG@10 with the holes counted as irrelevant, (b) NDCG'@10,
  the condensed-list NDCG (``workbench.metrics.condensed_ndcg``: unjudged documents removed),
  both computed offline with the workbench's metric functions; (c) NDCG@10 after the experiment's
  holes are filled by the reference judge ``token_overlap`` and (d) by the LLM, both through
  ``POST experiments/{id}/_fill`` on an experiment run with the pool's kept ratings imported as
  an ``IMPORT_JUDGMENT`` list. ESCI queries have no reference answers, so for (c) each query is
  its own ``referenceAnswer`` (a copy of the query set): a lexical judge of the query's words
  in the document's title, nothing more. Judge and model are shown the title alone
  (``contextFields``: ``CONTEXT_FIELDS``, as the coldstart benchmark judges), which keeps the
  small model's prompts short. The route puts a new 0-1 rating on the list's scale (times its
  top rating, 3 here: ``metadata.scale``), so a document the judge finds fully relevant gains
  as an Exact match; the bench reads the filled list as stored. The small CPU model is slow,
  so (d) runs on the first ``--llm-queries`` queries only (default ``DEFAULT_LLM_QUERIES``)
  and for the pools ``--llm-pools`` names (default ``low``: those where (a) gives tau <= 0.4
  over all queries, the issue's target), and is compared with the truth, (a), (b) and (c) on
  those same queries. The judgment cache keeps every rating the model gave, so a later pool
  asks only what no earlier fill got; a pair the model failed to rate is asked again. The
  calls of each fill are reported as they were.
* **Agreement**: Kendall's tau-b of each ranking against the truth, summarised (mean, min,
  median, max) over the single-configuration pools and over the pair pools; the pools where (a)
  gives tau <= 0.4 are listed with what the remedies give there (the issue's target: >= 0.8).
* **Cost**: per fill, the pool's pairs, rated and unrated, the model calls and cost
  (``metadata.usage``); the benchmark asserts calls <= unrated pairs (each pair asked once).

The figures go to ``holes.json`` in the output folder; the report gets the taus.
"""

from __future__ import annotations

import itertools
import json
import math
import os
import statistics
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import redis
from opensearchpy.helpers import scan

from workbench.bench.coldstart import data_paths, on_shipped_scale, tau
from workbench.bench.common import Bench, Result, timed
from workbench.metrics import condensed_ndcg, evaluate_many
from workbench.redis_keys import queued_key

K = 10
INDEX = "bench-holes"
MODEL = "bench-holes-llm"
JUDGE = "token_overlap"
DEFAULT_LLM_URL = "http://127.0.0.1:9600/v1"
DEFAULT_LLM_QUERIES = 5
#: which pools the LLM fills (``wants_llm``)
LLM_POOLS = ("low", "single", "all")
#: what the judge and the model are shown of a document
CONTEXT_FIELDS = ["title"]
#: the issue's line: where holes-as-zeros gives tau <= LOW, the remedies should give >= TARGET
LOW = 0.4
TARGET = 0.8
METHODS = ("zeros", "condensed", "reference", "llm")
LABELS = {"zeros": "(a) NDCG@10, holes as zeros", "condensed": "(b) NDCG'@10 (condensed)",
          "reference": f"(c) NDCG@10, filled by {JUDGE}", "llm": "(d) NDCG@10, filled by the LLM"}

FILLERS = {"reference": f"(c) reference judge `{JUDGE}`", "llm": "(d) LLM"}

_TEXT = "%SearchText%"
CONFIGURATIONS: dict[str, dict[str, Any]] = {
    "multi_match_all": {"query": {"multi_match": {
        "query": _TEXT, "fields": ["title^3", "description", "bullet_points", "brand^2"]}}},
    # brand is a keyword: the whole text against it boosts a query that names only a brand
    "title_brand_boost": {"query": {"bool": {
        "must": [{"match": {"title": _TEXT}}],
        "should": [{"term": {"brand": {"value": _TEXT, "case_insensitive": True, "boost": 5}}},
                   {"match": {"bullet_points": {"query": _TEXT, "boost": 0.5}}}]}}},
    "popularity_boost": {"query": {"function_score": {
        "query": {"multi_match": {"query": _TEXT, "fields": ["title^2", "bullet_points"]}},
        "field_value_factor": {"field": "rating_count", "modifier": "log1p", "missing": 0},
        "boost_mode": "multiply"}}},
    "bullets_only": {"query": {"match": {"bullet_points": _TEXT}}},
    "description_only": {"query": {"match": {"description": _TEXT}}},
    "brand_category": {"query": {"multi_match": {"query": _TEXT,
                                                 "fields": ["brand", "category"]}}},
    "title_all_terms": {"query": {"match": {"title": {"query": _TEXT, "operator": "and"}}}},
    "title_phrase": {"query": {"match_phrase": {"title": _TEXT}}},
    "random (near-random)": {"query": {"function_score": {
        "query": {"multi_match": {"query": _TEXT,
                                  "fields": ["title", "description", "bullet_points"]}},
        "random_score": {"seed": 45, "field": "_seq_no"}, "boost_mode": "replace"}}},
}

#: configuration -> query -> top-k document ids, in rank order
Results = Mapping[str, Mapping[str, Sequence[str]]]
#: query -> document -> rating
Ratings = Mapping[str, Mapping[str, float]]


# ---------------------------------------------------------------------------------------------
# Pure pieces (unit-tested without services)


def kept_ratings(ratings: Ratings, results: Results, pool: Iterable[str],
                 k: int = K) -> dict[str, dict[str, float]]:
    """The ratings of the documents inside the pool's configurations' top k, per query; a
    query with none kept is left out."""
    names = list(pool)
    kept: dict[str, dict[str, float]] = {}
    for query, rated in ratings.items():
        seen = {d for name in names for d in list(results[name].get(query, ()))[:k]}
        inside = {d: r for d, r in rated.items() if d in seen}
        if inside:
            kept[query] = inside
    return kept


def pools(names: Sequence[str]) -> list[tuple[str, ...]]:
    """Every configuration alone, then every pair of configurations."""
    return [(n,) for n in names] + list(itertools.combinations(names, 2))


def mean_ndcg(results: Results, ratings: Ratings, queries: Sequence[str],
              k: int = K) -> dict[str, float]:
    """Each configuration's mean NDCG@k over ``queries`` (``workbench.metrics.evaluate_many``:
    an unrated document gains nothing, the ideal list from the query's ratings)."""
    name = f"NDCG@{k}"
    out: dict[str, float] = {}
    for config, lists in results.items():
        rows = evaluate_many([(list(lists.get(q, ())), dict(ratings.get(q, {})))
                              for q in queries], k)
        out[config] = float(np.mean([dict(row)[name] for row in rows])) if rows else 0.0
    return out


def mean_condensed_ndcg(results: Results, ratings: Ratings, queries: Sequence[str],
                        k: int = K) -> dict[str, float]:
    """Each configuration's mean NDCG'@k over ``queries``: ``workbench.metrics.condensed_ndcg``
    on a batch (queries x ranks), the unrated documents dropped before the cut at k."""
    width = max([len(lists.get(q, ())) for lists in results.values() for q in queries] + [1])
    ideal = np.zeros((len(queries), k))
    for i, q in enumerate(queries):
        best = sorted(ratings.get(q, {}).values(), reverse=True)[:k]
        ideal[i, :len(best)] = best
    out: dict[str, float] = {}
    for config, lists in results.items():
        gains = np.zeros((len(queries), width))
        judged = np.zeros((len(queries), width), dtype=bool)
        for i, q in enumerate(queries):
            rated = ratings.get(q, {})
            for j, d in enumerate(lists.get(q, ())):
                if d in rated:
                    gains[i, j], judged[i, j] = rated[d], True
        values = condensed_ndcg(gains, judged, k, ideal)
        out[config] = float(np.mean(values)) if len(queries) else 0.0
    return out


def ranking_tau(truth: Mapping[str, float], scores: Mapping[str, float]) -> float | None:
    """Kendall's tau-b of two scorings of the same configurations (None when undefined)."""
    names = list(truth)
    return tau([truth[n] for n in names], [scores[n] for n in names])


def summary(values: Iterable[float | None]) -> dict[str, Any]:
    """Mean, min, median and max of the defined taus, and how many pools there were."""
    taus = list(values)
    defined = [v for v in taus if v is not None]
    if not defined:
        return {"pools": len(taus), "defined": 0, "mean": None, "min": None, "median": None,
                "max": None}
    return {"pools": len(taus), "defined": len(defined),
            "mean": round(statistics.fmean(defined), 4), "min": round(min(defined), 4),
            "median": round(statistics.median(defined), 4), "max": round(max(defined), 4)}


def filled(kept: Ratings, entries: Sequence[Mapping[str, Any]]) -> dict[str, dict[str, float]]:
    """The ratings of a filled judgment list: the kept human ratings as they were, and every
    other rating of ``entries`` (its ``judgmentRatings``, already on the list's scale)."""
    out = {q: dict(rated) for q, rated in kept.items()}
    for entry in entries:
        query = str(entry["query"])
        mine = out.setdefault(query, {})
        human = kept.get(query, {})
        for rating in entry.get("ratings") or []:
            doc = str(rating["docId"])
            if doc not in human and rating.get("rating") not in (None, ""):
                mine[doc] = float(rating["rating"])
    return out


def low_pools(pool_taus: Mapping[str, Mapping[str, float | None]],
              low: float = LOW) -> dict[str, dict[str, float | None]]:
    """The pools where holes-as-zeros gives tau <= ``low``, with every method's tau there."""
    out: dict[str, dict[str, float | None]] = {}
    for pool, taus in pool_taus.items():
        zeros = taus.get("zeros")
        if zeros is not None and zeros <= low:
            out[pool] = dict(taus)
    return out


def wants_llm(which: str, pool: Sequence[str], zeros_tau: float | None) -> bool:
    """Whether the LLM fills this pool: ``all``, ``single`` (the one-configuration pools) or
    ``low`` (those where holes-as-zeros gives tau <= LOW over all queries: the issue's target)."""
    if which == "all":
        return True
    if which == "single":
        return len(pool) == 1
    return zeros_tau is not None and zeros_tau <= LOW


def pool_name(pool: Sequence[str]) -> str:
    return " + ".join(pool)


# ---------------------------------------------------------------------------------------------
# Through the workbench (needs the services)


#: the task an older worker's sweeper expects a PROCESSING judgment to run (it does not know
#: workbench.holes.fill, jobs/sweeper.py ``BY_TYPE``)
OLD_JUDGMENT_TASK = "workbench.judgments.generate"
#: how often a reply that is not the entity is read again while waiting for it
RETRIES = 20


class Workbench:
    """The HTTP calls of one run, and what it created (deleted at the end).

    ``guard``: a Redis client. The services are shared: a worker of an older version on the same
    cluster sweeps every PROCESSING judgment, and, not knowing the fill's task, takes a fill
    running longer than its grace for a lost ``LLM_JUDGMENT`` and re-runs it as one, which ends
    it ERROR. While a fill runs, the bench writes the queued marker such a sweeper looks for
    (``jobs/leases.py``), so it leaves the fill alone; this worker's own sweeper reads the fill's
    task and is not affected.
    """

    def __init__(self, api: Any, guard: Any = None) -> None:
        self.api = api
        self.guard = guard
        self.created: list[str] = []

    def put(self, path: str, body: dict[str, Any], key: str) -> str:
        reply = self.api.srw("PUT", path, body)
        assert reply.status == 200, (path, reply.status, reply.data[:500])
        entity_id = str(reply.json[key])
        self.created.append(f"{path}/{entity_id}")
        return entity_id

    def done(self, path: str, timeout: float = 7200) -> dict[str, Any]:
        """The entity once it is COMPLETED (a RuntimeError if it ends otherwise). A reply that
        is not the entity (a 5xx of a busy machine) is read again, up to ``RETRIES`` times."""
        deadline, misses = time.monotonic() + timeout, 0
        while True:
            reply = self.api.srw("GET", path, params={
                "filter_path": "hits.hits._source.status,hits.hits._source.metadata.error"})
            try:
                status = reply.json["hits"]["hits"][0]["_source"]
            except (ValueError, KeyError, IndexError, TypeError):
                misses += 1
                if misses > RETRIES:
                    raise RuntimeError(f"GET {path}: {reply.status} {reply.data[:300]!r}"
                                       ) from None
                time.sleep(1.0)
                continue
            if status["status"] not in ("PROCESSING", "RETRYING"):
                break
            if time.monotonic() > deadline:
                raise RuntimeError(f"{path} still {status['status']} after {timeout:g} s")
            time.sleep(0.05)
        if status["status"] != "COMPLETED":
            raise RuntimeError(f"{path} ended {status['status']}: "
                               f"{status.get('metadata', {}).get('error')}")
        for _ in range(RETRIES):
            reply = self.api.srw("GET", path)
            if reply.status == 200:
                break
            time.sleep(1.0)
        source: dict[str, Any] = reply.json["hits"]["hits"][0]["_source"]
        return source

    def query_set(self, name: str, queries: Sequence[str]) -> str:
        entries = [{"queryText": q, "referenceAnswer": q} for q in queries]
        return self.put("/query_sets", {"name": name, "description": "workbench bench holes",
                                        "sampling": "manual", "querySetQueries": entries},
                        "query_set_id")

    def judgment(self, name: str, ratings: Ratings) -> str:
        body = {"name": name, "type": "IMPORT_JUDGMENT", "judgmentRatings": [
            {"query": q, "ratings": [{"docId": d, "rating": str(r)} for d, r in rated.items()]}
            for q, rated in ratings.items()]}
        judgment_id = self.put("/judgments", body, "judgment_id")
        self.done(f"/judgments/{judgment_id}")
        return judgment_id

    def experiment(self, query_set: str, configs: Sequence[str], judgment: str) -> str:
        experiment_id = self.put("/experiments", {
            "type": "POINTWISE_EVALUATION", "querySetId": query_set,
            "searchConfigurationList": list(configs), "judgmentList": [judgment], "size": K},
            "experiment_id")
        self.done(f"/experiments/{experiment_id}")
        return experiment_id

    def fill(self, experiment_id: str, body: dict[str, Any]) -> tuple[float, dict[str, Any],
                                                                       dict[str, Any]]:
        """``POST experiments/{id}/_fill``: its wall time, its answer and the finished list."""
        def run() -> tuple[dict[str, Any], dict[str, Any]]:
            reply = self.api.srw("POST", f"/experiments/{experiment_id}/_fill",
                                 dict(body, size=K))
            assert reply.status == 200, (reply.status, reply.data[:500])
            judgment_id = str(reply.json["judgment_id"])
            self.created.append(f"/judgments/{judgment_id}")
            marker = queued_key(OLD_JUDGMENT_TASK, judgment_id)
            if self.guard is not None:
                self.guard.set(marker, "workbench bench holes: a fill, not an LLM judgment")
            try:
                return reply.json, self.done(f"/judgments/{judgment_id}")
            finally:
                if self.guard is not None:
                    self.guard.delete(marker)

        wall, (answer, judgment) = timed(run)
        return wall, answer, judgment

    def delete_all(self) -> None:
        for path in reversed(self.created):
            self.api.srw("DELETE", path)
        self.created.clear()


def evaluations(bench: Bench, experiment_id: str, names: Mapping[str, str]
                ) -> tuple[dict[str, dict[str, list[str]]], dict[str, dict[str, float]]]:
    """The stored evaluation results of an experiment: configuration name -> query -> its
    ``documentIds``, and -> query -> the stored unrounded NDCG@k."""
    bench.client.indices.refresh(index="search-relevance-evaluation-result")
    by_id = {config_id: name for name, config_id in names.items()}
    lists: dict[str, dict[str, list[str]]] = {name: {} for name in names}
    stored: dict[str, dict[str, float]] = {name: {} for name in names}
    for hit in scan(bench.client, index="search-relevance-evaluation-result",
                    query={"query": {"term": {"experimentId": experiment_id}}}):
        doc = hit["_source"]
        name = by_id[doc["searchConfigurationId"]]
        lists[name][doc["searchText"]] = [str(d) for d in doc.get("documentIds") or []]
        exact = {m["metric"]: m["value"] for m in doc.get("exactMetrics") or []}
        stored[name][doc["searchText"]] = float(exact.get(f"NDCG@{K}", math.nan))
    return lists, stored


def _fill_figures(answer: Mapping[str, Any], judgment: Mapping[str, Any],
                  wall: float) -> dict[str, Any]:
    metadata = judgment.get("metadata") or {}
    pool = dict(answer.get("pool") or metadata.get("pool") or {})
    usage = dict(metadata.get("usage") or {})
    sources: dict[str, int] = {}
    for entry in judgment.get("judgmentRatings") or []:
        for rating in entry.get("ratings") or []:
            source = str(rating.get("source", "?"))
            sources[source] = sources.get(source, 0) + 1
    calls = int(usage.get("llmCalls", 0))
    unrated = int(pool.get("unrated", 0))
    # each unrated pair asked once at most (issue 45): a fill costs no more calls than holes
    assert calls <= unrated, f"{calls} calls for {unrated} unrated pairs"
    return {"pool": pool, "filled": metadata.get("filled"), "scale": metadata.get("scale"),
            "usage": usage, "sources": sources,
            "calls": calls, "calls_within_unrated": calls <= unrated,
            "seconds": round(wall, 2)}


def measure(bench: Bench, llm_url: str, llm_model: str, llm_queries: int, data: str | None,
            fills: Sequence[str], llm_pools: str = "low",
            log: Callable[[str], None] = print) -> dict[str, Any]:
    """Every figure of one run (``holes.json``)."""
    from workbench.config import Config
    from workbench.demo.load import load_demo, read_json
    from workbench.judgments.agreement import merge

    queries_path, judgments_path, products_path = data_paths(data)
    queries = [q["queryText"] for q in read_json(queries_path)["querySetQueries"]]
    human = on_shipped_scale(merge(read_json(judgments_path)["judgmentRatings"]))
    bench.client.indices.delete(index=INDEX, ignore=[404])
    bench.on_close(lambda: bench.client.indices.delete(index=INDEX, ignore=[404]))
    load_demo(Config.from_env(dict(os.environ, OPENSEARCH_URL=bench.opensearch_url)),
              str(products_path), INDEX, None)

    models = json.dumps([{"id": MODEL, "name": "hole filler", "provider": "openai",
                          "base_url": llm_url, "model": llm_model}])
    server = bench.server(WORKBENCH_MODELS=models)
    # llama.cpp's server answers one call at a time (docs/llm-models.md)
    bench.worker(WORKBENCH_MODELS=models, WORKBENCH_WORKER_CONCURRENCY="1",
                 WORKBENCH_LLM_CONCURRENCY="1")
    wb = Workbench(bench.api(server), redis.Redis.from_url(bench.redis_url))
    started = time.monotonic()
    try:
        return _measure(bench, wb, queries, human, llm_queries, llm_url, fills, log, started,
                        products_path.name, llm_pools)
    finally:
        wb.delete_all()


def _measure(bench: Bench, wb: Workbench, queries: list[str], human: Ratings, llm_queries: int,
             llm_url: str, fills: Sequence[str], log: Callable[[str], None], started: float,
             catalogue: str, llm_pools: str) -> dict[str, Any]:
    query_set = wb.query_set("holes: ESCI, each query its own reference answer", queries)
    configs = {name: wb.put("/search_configurations", {
        "name": f"holes {name}", "index": INDEX, "query": json.dumps(body)},
        "search_configuration_id") for name, body in CONFIGURATIONS.items()}
    everything = wb.judgment("holes: all human ratings", human)
    truth_run = wb.experiment(query_set, list(configs.values()), everything)
    results, stored = evaluations(bench, truth_run, configs)
    truth = mean_ndcg(results, human, queries)
    gap = _check(results, stored, human, queries)
    assert gap < 1e-9, f"offline NDCG@{K} differs from the experiment's by {gap}"
    log(f"   truth: {json.dumps({n: round(v, 3) for n, v in truth.items()})}")

    subset = queries[:llm_queries]
    truth_subset = mean_ndcg(results, human, subset)
    llm_set = wb.query_set(f"holes: the first {len(subset)} ESCI queries", subset) \
        if "llm" in fills and subset else None

    report: dict[str, Any] = {
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "data": {"catalogue": catalogue, "queries": len(queries),
                 "judgments": sum(len(d) for d in human.values()),
                 "scale": "3/2/1/0 (Exact/Substitute/Complement/Irrelevant), NDCG with "
                          "exponential gain 2^r - 1 (workbench.metrics)"},
        "k": K, "configurations": CONFIGURATIONS, "judge": JUDGE,
        "context_fields": CONTEXT_FIELDS,
        "truth": {"ndcg@10": _rounded(truth), "check": f"max |offline - stored exactMetrics| "
                                                       f"= {gap:.2e}"},
        "llm": {"url": llm_url, "queries": len(subset) if llm_set else 0, "pools": llm_pools,
                "truth_ndcg@10_on_those_queries": _rounded(truth_subset)},
        "pools": []}

    for number, pool in enumerate(pools(list(configs)), 1):
        kept = kept_ratings(human, results, pool)
        name = pool_name(pool)
        entry: dict[str, Any] = {
            "pool": list(pool), "kept_ratings": sum(len(r) for r in kept.values()),
            "queries_with_ratings": len(kept), "ndcg@10": {}, "tau": {}, "fills": {}}
        scores = {"zeros": mean_ndcg(results, kept, queries),
                  "condensed": mean_condensed_ndcg(results, kept, queries)}
        sub = {"zeros": mean_ndcg(results, kept, subset),
               "condensed": mean_condensed_ndcg(results, kept, subset)}
        if "reference" in fills:
            run = wb.experiment(query_set, list(configs.values()),
                                wb.judgment(f"holes: pool {number}", kept))
            got = _filled(wb, run, {"judge": JUDGE, "contextFields": CONTEXT_FIELDS}, kept,
                          entry["fills"], "reference")
            if got is not None:
                scores["reference"] = mean_ndcg(results, got, queries)
                sub["reference"] = mean_ndcg(results, got, subset)
        if llm_set and wants_llm(llm_pools, pool, ranking_tau(truth, scores["zeros"])):
            few = {q: r for q, r in kept.items() if q in set(subset)}
            run = wb.experiment(llm_set, list(configs.values()),
                                wb.judgment(f"holes: pool {number}, {len(subset)} queries", few))
            got = _filled(wb, run, {"modelId": MODEL, "contextFields": CONTEXT_FIELDS}, few,
                          entry["fills"], "llm")
            if got is not None:
                sub["llm"] = mean_ndcg(results, got, subset)
        entry["ndcg@10"] = {m: _rounded(s) for m, s in scores.items()}
        entry["tau"] = {m: _round(ranking_tau(truth, s)) for m, s in scores.items()}
        entry["on_llm_queries"] = {
            "ndcg@10": {m: _rounded(s) for m, s in sub.items()},
            "tau": {m: _round(ranking_tau(truth_subset, s)) for m, s in sub.items()}}
        report["pools"].append(entry)
        log(f"   {name}: kept {entry['kept_ratings']}, tau " + ", ".join(
            f"{m} {entry['tau'].get(m)}" for m in scores) + (
            f"; on {len(subset)} queries llm {entry['on_llm_queries']['tau'].get('llm')}"
            if "llm" in sub else "") + f" ({time.monotonic() - started:.0f} s)")
    report["summary"] = summarise(report["pools"])
    report["seconds"] = round(time.monotonic() - started, 1)
    return report


def _check(results: Results, stored: Mapping[str, Mapping[str, float]], human: Ratings,
           queries: Sequence[str]) -> float:
    """The largest difference between the bench's NDCG@k and the experiment's stored one (a
    query a configuration found nothing for has no stored result: it must be 0 here)."""
    gap = 0.0
    for name, lists in results.items():
        rows = evaluate_many([(list(lists.get(q, ())), dict(human.get(q, {}))) for q in queries],
                             K)
        for q, row in zip(queries, rows, strict=True):
            mine = dict(row)[f"NDCG@{K}"]
            gap = max(gap, abs(stored[name].get(q, 0.0) - mine))
    return gap


def _filled(wb: Workbench, experiment_id: str, body: dict[str, Any], kept: Ratings,
            figures: dict[str, Any], method: str) -> dict[str, dict[str, float]] | None:
    """Fill the experiment's holes: the filled ratings, and the fill's figures in ``figures``
    (a fill that ends ERROR is recorded with its reason, and the pool goes without it)."""
    try:
        wall, answer, judgment = wb.fill(experiment_id, body)
    except RuntimeError as exc:
        figures[method] = {"error": str(exc)}
        return None
    figures[method] = _fill_figures(answer, judgment, wall)
    return filled(kept, judgment.get("judgmentRatings") or [])


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 4)


def _rounded(scores: Mapping[str, float]) -> dict[str, float]:
    return {n: round(v, 4) for n, v in scores.items()}


def _means(taus: Mapping[str, Mapping[str, float | None]]) -> dict[str, float | None]:
    return {m: summary(t.get(m) for t in taus.values())["mean"] for m in METHODS
            if any(m in t for t in taus.values())}


def summarise(entries: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Over all queries: the tau summaries of the single and the pair pools, and the pools where
    holes as zeros gives tau <= LOW; over the LLM's queries, every pool the LLM filled; and the
    fills' cost."""
    block: dict[str, Any] = {}
    for size, label in ((1, "single"), (2, "pair")):
        taus = [e["tau"] for e in entries if len(e["pool"]) == size]
        methods = [m for m in METHODS if any(m in t for t in taus)]
        block[label] = {m: summary(t.get(m) for t in taus) for m in methods}
    low = low_pools({pool_name(e["pool"]): e["tau"] for e in entries})
    block["low"] = {"pools": low, "count": len(low), "mean": _means(low)}
    filled_by_llm = {pool_name(e["pool"]): e["on_llm_queries"]["tau"] for e in entries
                     if "llm" in e["fills"]}
    out: dict[str, Any] = {"all_queries": block, "llm_queries": {
        "pools": filled_by_llm, "count": len(filled_by_llm), "mean": _means(filled_by_llm)}}
    cost: dict[str, Any] = {}
    for method in ("reference", "llm"):
        errors = [pool_name(e["pool"]) for e in entries
                  if "error" in e["fills"].get(method, {})]
        done = [e["fills"][method] for e in entries
                if method in e["fills"] and "error" not in e["fills"][method]]
        if not done:
            continue
        cost[method] = {
            "fills": len(done),
            "unrated_pairs": sum(int(f["pool"].get("unrated", 0)) for f in done),
            "calls": sum(f["calls"] for f in done),
            "first_fill_calls": done[0]["calls"],
            "first_fill_unrated": int(done[0]["pool"].get("unrated", 0)),
            "cached_ratings": sum(int(f["usage"].get("cachedRatings", 0)) for f in done),
            "input_tokens": sum(int(f["usage"].get("inputTokens", 0)) for f in done),
            "output_tokens": sum(int(f["usage"].get("outputTokens", 0)) for f in done),
            "cost": (sum(float(f["usage"]["cost"]) for f in done if "cost" in f["usage"])
                     if any("cost" in f["usage"] for f in done) else None),
            "seconds": round(sum(f["seconds"] for f in done), 1),
            "every_fill_within_unrated": all(f["calls_within_unrated"] for f in done),
            "failed_fills": errors}
    out["fills"] = cost
    return out


# ---------------------------------------------------------------------------------------------


def _fmt(value: float | None) -> str:
    return "—" if value is None else f"{value:.2f}"


def _pool_rows(block: Mapping[str, Any], methods: Sequence[str], what: str) -> list[str]:
    """A mean row over the pools of ``block``, then one row per pool."""
    head = f"{block['count']} pools{' ' + what if what else ''}, mean"
    lines = [f"| {head} | " + " | ".join(_fmt(block["mean"].get(m)) for m in methods) + " |"]
    for pool, taus in block["pools"].items():
        lines.append(f"| `{pool}` | " + " | ".join(_fmt(taus.get(m)) for m in methods) + " |")
    return lines


def markdown(report: Mapping[str, Any]) -> str:
    """The tables docs/performance.md quotes (a unit test checks the page holds them)."""
    truth = report["truth"]["ndcg@10"]
    lines = ["| Configuration | NDCG@10, all human ratings |", "|---|---|"]
    lines += [f"| `{n}` | {v:.3f} |" for n, v in sorted(truth.items(), key=lambda x: -x[1])]
    block = report["summary"]["all_queries"]
    methods = [m for m in METHODS if m in block["single"] or m in block["pair"]]
    lines += ["", f"| Pools ({report['data']['queries']} queries): mean (min / median / max) | "
              + " | ".join(LABELS[m] for m in methods) + " |", "|---" * (1 + len(methods)) + "|"]
    for label in ("single", "pair"):
        if not block[label]:
            continue
        cells = []
        for m in methods:
            s = block[label].get(m)
            cells.append("—" if not s or s["mean"] is None else
                         f"{s['mean']:.2f} ({s['min']:.2f} / {s['median']:.2f} / {s['max']:.2f})")
        count = next(iter(block[label].values()))["pools"]
        lines.append(f"| {count} {label} | " + " | ".join(cells) + " |")
    lines += _pool_rows(block["low"], methods, f"where (a) τ ≤ {LOW:g}")
    llm = report["summary"]["llm_queries"]
    if llm["count"]:
        methods = [m for m in METHODS if m in llm["mean"]]
        lines += ["", f"| Pools the LLM filled (the first {report['llm']['queries']} queries) | "
                  + " | ".join(LABELS[m] for m in methods) + " |",
                  "|---" * (1 + len(methods)) + "|"]
        lines += _pool_rows(llm, methods, "")
    fills = report["summary"]["fills"]
    if fills:
        lines += ["", "| Filling | Fills | Unrated pairs | Calls | First fill: calls / unrated "
                      "| Cached ratings | Tokens in / out | Cost | Seconds |",
                  "|---|---|---|---|---|---|---|---|---|"]
        for method, f in fills.items():
            lines.append(
                f"| {FILLERS[method]} | {f['fills']} | {f['unrated_pairs']:,} | "
                f"{f['calls']:,} | {f['first_fill_calls']:,} / {f['first_fill_unrated']:,} | "
                f"{f['cached_ratings']:,} | {f['input_tokens']:,} / {f['output_tokens']:,} | "
                f"{'—' if f['cost'] is None else f['cost']} | {f['seconds']:g} |")
    return "\n".join(lines)


def run(bench: Bench) -> list[Result]:
    options = bench.options
    llm_url = str(options.get("llm_url") or os.environ.get("LLAMA_URL") or DEFAULT_LLM_URL)
    llm_model = str(options.get("llm_model") or "model")
    llm_queries = int(options.get("llm_queries") or (3 if bench.quick else DEFAULT_LLM_QUERIES))
    chosen = options.get("fills")
    fills = [f for f in str("reference,llm" if chosen is None else chosen).split(",")
             if f and f != "none"]
    unknown = set(fills) - {"reference", "llm"}
    if unknown:
        raise ValueError(f"unknown fill(s) {sorted(unknown)}: reference, llm")
    llm_pools = str(options.get("llm_pools") or "low")
    if llm_pools not in LLM_POOLS:
        raise ValueError(f"--llm-pools {llm_pools}: one of {', '.join(LLM_POOLS)}")
    data = options.get("data") or os.environ.get("WORKBENCH_DATA_DIR")
    report = measure(bench, llm_url, llm_model, llm_queries, data, fills, llm_pools)
    out = Path(bench.out) / "holes.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=2) + "\n")
    print(markdown(report))
    print(f"   wrote {out}")

    results: list[Result] = []
    block = report["summary"]["all_queries"]
    for label in ("single", "pair"):
        for method, s in block[label].items():
            if s["mean"] is None:
                continue
            results.append(Result(
                "holes", f"{LABELS[method]}, {s['pools']} {label}-configuration pools, "
                f"{report['data']['queries']} queries: mean Kendall tau vs all human ratings",
                s["mean"], 1.0, unit="tau", higher_is_better=True,
                details={"min / median / max": f"{s['min']} / {s['median']} / {s['max']}"}))
    llm = report["summary"]["llm_queries"]
    if llm["mean"].get("llm") is not None:
        results.append(Result(
            "holes", f"{LABELS['llm']}, {llm['count']} pools, first {report['llm']['queries']} "
            "queries: mean Kendall tau vs all human ratings", llm["mean"]["llm"], 1.0,
            unit="tau", higher_is_better=True,
            details={m: v for m, v in llm["mean"].items() if m != "llm"}))
    return results
