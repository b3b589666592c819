"""Starting cold (issue 44): does a query set generated from the index rank search
configurations as real queries with human judgments do?

    workbench bench --only coldstart [--generators reference,llm] [--llm-url URL]
                    [--llm-queries N] [--quick] [--out DIR]

What is measured, and why this way:

* **Data.** The ESCI catalogue the package ships (``workbench/demo/data``; ``WORKBENCH_DATA_DIR``
  or ``--data DIR`` names a folder holding ``ubi-sample/ubi_ecommerce_products.json.gz``,
  ``esci/esci_us_queryset.json`` and ``esci/esci_us_judgments.json`` instead) goes into a
  throwaway index (``bench-coldstart``, deleted at the end). The human judgments are read on
  the shipped list's scale, 3/2/1/0 (Exact/Substitute/Complement/Irrelevant; the sample's
  100/10/1/0 is mapped onto it), with the workbench's NDCG (exponential gain ``2^r - 1``, the
  ideal list from all of a query's ratings).
* **Configurations.** ``CONFIGURATIONS``: ten search bodies that really differ (title alone,
  all its terms, fuzzy, as a phrase, title + bullets as best fields, cross fields over every
  text field, a popularity boost, a brand boost, bullets alone, and the description alone as
  the deliberately poor one). Every query of every set goes through every configuration, top
  10, as one ``_msearch`` per configuration straight to the cluster: the benchmark measures
  the *set*, not the API.
* **Reference ranking**: the configurations by mean NDCG@10 on the 150 real ESCI queries with
  the 6,678 human judgments (3/2/1/0 scale).
* **Generators** go through the product path: a workbench API and one worker started by the
  benchmark, ``PUT /query_sets`` with ``sampling: reference_random`` (no model) or
  ``llm_random`` (the model at ``--llm-url``, SmolLM2-135M on llama.cpp by default, registered
  with ``WORKBENCH_MODELS``), the same seed, so both read the same sampled documents. The set is
  read back once ``COMPLETED``.
* **Scoring each generated set two ways**: (a) known-item MRR@10, the reciprocal rank of the
  query's ``sourceDocId`` in each configuration's top 10; (b) NDCG@10 with the reference judge
  ``token_overlap`` (no configuration under evaluation, no model): every hit of the pooled top
  10 of all configurations is judged on its title with the query text as the reference answer,
  its similarity is the grade. The configurations are ranked by each mean, and Kendall's tau-b
  against the reference ranking is given with a 95 % bootstrap interval over the generated
  queries (1,000 rounds, seeded). The judge's NDCG on the real queries is the control: how far
  the judge alone, with real queries, gets.
* **Cost and throughput**: LLM calls, tokens and seconds of each generation; for the LLM, the
  generation's wall time (``PUT`` to ``COMPLETED``) against its bound, calls x mean latency /
  concurrency (the model's time summed over calls, ``generation.usage.latencyMs``), target
  <= 1.15 as for judgments.

The full figures go to ``coldstart.json`` in the output folder; the report gets the taus and
the throughput ratio.
"""

from __future__ import annotations

import json
import math
import os
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from scipy.stats import kendalltau

from workbench.bench.common import Bench, Result, timed, wait_status
from workbench.bench.judge_agreement import on_sample_scale
from workbench.judges import Hit, Query, Setup
from workbench.judges import registry as judges
from workbench.metrics import ndcg

K = 10
ROUNDS = 1000
SEED = 44
INDEX = "bench-coldstart"
MODEL = "bench-coldstart-llm"
JUDGE = "token_overlap"
GENERATORS = ("reference", "llm")
SAMPLING = {"reference": "reference_random", "llm": "llm_random"}
CONTEXT_FIELDS = ["title", "brand", "category", "color"]
DEFAULT_LLM_URL = "http://127.0.0.1:9600/v1"
DEFAULT_LLM_QUERIES = 60
THROUGHPUT_TARGET = 1.15
SAMPLE_TO_SHIPPED = {100.0: 3.0, 10.0: 2.0, 1.0: 1.0, 0.0: 0.0}

_TEXT = "%SearchText%"
CONFIGURATIONS: dict[str, dict[str, Any]] = {
    "title": {"query": {"match": {"title": _TEXT}}},
    "title_all_terms": {"query": {"match": {"title": {"query": _TEXT, "operator": "and"}}}},
    "title_fuzzy": {"query": {"match": {"title": {"query": _TEXT, "fuzziness": "AUTO"}}}},
    "title_phrase": {"query": {"match_phrase": {"title": {"query": _TEXT, "slop": 2}}}},
    "title_bullets_best": {"query": {"multi_match": {
        "query": _TEXT, "type": "best_fields", "fields": ["title^2", "bullet_points"]}}},
    "all_fields_cross": {"query": {"multi_match": {
        "query": _TEXT, "type": "cross_fields",
        "fields": ["title^3", "bullet_points", "description", "category"]}}},
    "popularity_boost": {"query": {"function_score": {
        "query": {"multi_match": {"query": _TEXT, "fields": ["title^2", "bullet_points"]}},
        "field_value_factor": {"field": "rating_count", "modifier": "log1p", "missing": 0},
        "boost_mode": "multiply"}}},
    # brand is a keyword: the whole text against it (case-insensitive) boosts a query that is
    # a brand, and a should clause of the brand's own words in the title and bullets the rest
    "brand_boost": {"query": {"bool": {
        "must": [{"match": {"title": _TEXT}}],
        "should": [{"term": {"brand": {"value": _TEXT, "case_insensitive": True, "boost": 5}}},
                   {"match": {"bullet_points": {"query": _TEXT, "boost": 0.5}}}]}}},
    "bullets_only": {"query": {"match": {"bullet_points": _TEXT}}},
    "description_only (poor)": {"query": {"match": {"description": _TEXT}}},
}


# ---------------------------------------------------------------------------------------------
# Pure pieces (unit-tested without services)


def reciprocal_rank(ranked: Sequence[str], item: str, k: int = K) -> float:
    """1 / rank of ``item`` in the first k of ``ranked``, 0 when it is not there."""
    for i, doc_id in enumerate(ranked[:k]):
        if doc_id == item:
            return 1.0 / (i + 1)
    return 0.0


def ndcg_at_k(ranked: Sequence[str], ratings: Mapping[str, float], k: int = K) -> float:
    """The workbench's NDCG@k (``workbench.metrics.ndcg``: exponential gain, the ideal list
    from every rating of the query, cut at k); an unrated hit gains nothing."""
    gains = [float(ratings.get(d, 0.0)) for d in ranked[:k]]
    gains += [0.0] * (k - len(gains))
    ideal = sorted((float(r) for r in ratings.values()), reverse=True)[:k]
    ideal += [0.0] * (k - len(ideal))
    return float(ndcg(np.asarray(gains), np.asarray(ideal)))


def tau(reference: Sequence[float], candidate: Sequence[float]) -> float | None:
    """Kendall's tau-b of two scorings of the same configurations; None when undefined (fewer
    than two configurations, or one side all ties)."""
    if len(reference) < 2 or len(set(reference)) < 2 or len(set(candidate)) < 2:
        return None
    value = float(kendalltau(reference, candidate).statistic)
    return value if math.isfinite(value) else None


def bootstrap_tau(reference: Sequence[float], per_query: np.ndarray, rounds: int = ROUNDS,
                  seed: int = SEED) -> dict[str, Any]:
    """Tau of the configurations' mean scores (``per_query``: queries x configurations) against
    ``reference`` (one score per configuration), and its 95 % percentile interval over the
    queries resampled with replacement (a round whose tau is undefined is left out)."""
    scores = np.asarray(per_query, dtype=float)
    point = tau(reference, list(scores.mean(axis=0)))
    rng = np.random.default_rng(seed)
    drawn: list[float] = []
    for _ in range(rounds):
        rows = rng.integers(0, scores.shape[0], scores.shape[0])
        value = tau(reference, list(scores[rows].mean(axis=0)))
        if value is not None:
            drawn.append(value)
    low, high = (np.percentile(drawn, [2.5, 97.5]) if drawn else (math.nan, math.nan))
    return {"tau": point, "low": float(low), "high": float(high), "rounds": rounds,
            "defined_rounds": len(drawn)}


def bound_ratio(wall_seconds: float, calls: int, mean_latency: float,
                concurrency: int) -> float:
    """The generation's wall time over its bound, calls x mean latency / concurrency."""
    bound = calls * mean_latency / max(1, concurrency)
    return wall_seconds / bound if bound > 0 else math.inf


def on_shipped_scale(ratings: Mapping[str, Mapping[str, float]]
                     ) -> dict[str, dict[str, float]]:
    """ESCI ratings on the shipped list's 3/2/1/0 scale (the sample's 100/10/1/0 mapped)."""
    sample = on_sample_scale(ratings)
    return {q: {d: SAMPLE_TO_SHIPPED[r] for d, r in docs.items()} for q, docs in sample.items()}


def render(template: dict[str, Any], text: str) -> dict[str, Any]:
    """A search body with the text in place of %SearchText% (JSON-escaped)."""
    quoted = json.dumps(text)[1:-1]
    rendered: dict[str, Any] = json.loads(json.dumps(template).replace(_TEXT, quoted))
    return rendered


# ---------------------------------------------------------------------------------------------
# Searching, judging, generating (need the services)


def data_paths(data: str | None) -> tuple[Path, Path, Path]:
    """Query set, judgments and catalogue: of ``data`` (the plugin sample's layout), else the
    demo data the package ships."""
    from workbench.demo.load import JUDGMENTS, PRODUCTS, QUERY_SET

    if not data:
        return QUERY_SET, JUDGMENTS, PRODUCTS
    root = Path(data)
    return (root / "esci" / "esci_us_queryset.json", root / "esci" / "esci_us_judgments.json",
            root / "ubi-sample" / "ubi_ecommerce_products.json.gz")


def search_all(bench: Bench, texts: Sequence[str]) -> dict[str, list[list[str]]]:
    """configuration -> the top-k ids of each text, in order."""
    out: dict[str, list[list[str]]] = {}
    for name, template in CONFIGURATIONS.items():
        lines: list[dict[str, Any]] = []
        for text in texts:
            lines += [{"index": INDEX}, dict(render(template, text), size=K, _source=False)]
        replies = bench.client.msearch(body=lines)["responses"] if lines else []
        for reply in replies:
            if "error" in reply:
                raise RuntimeError(f"configuration {name}: {reply['error']}")
        out[name] = [[h["_id"] for h in reply["hits"]["hits"]] for reply in replies]
    return out


def judged_ndcg(bench: Bench, texts: Sequence[str],
                results: Mapping[str, list[list[str]]]) -> np.ndarray:
    """queries x configurations NDCG@k with the reference judge's grades: every hit of the
    pooled top k of all configurations judged on its title, the query text the reference."""
    judge = judges.create(JUDGE, Setup({}))
    pooled: list[list[str]] = []
    for i in range(len(texts)):
        pool: dict[str, None] = {}
        for lists in results.values():
            pool.update(dict.fromkeys(lists[i]))
        pooled.append(list(pool))
    titles = _titles(bench, {d for pool in pooled for d in pool})
    scores = np.zeros((len(texts), len(results)))
    for i, text in enumerate(texts):
        hits = [Hit(d, {"title": titles.get(d, "")}) for d in pooled[i]]
        verdicts = judge.judge(Query(text, (text,)), hits).verdicts if hits else []
        grades = {h.id: float(v.score if v.score is not None else (v.rating or 0.0))
                  for h, v in zip(hits, verdicts, strict=True)}
        for j, lists in enumerate(results.values()):
            scores[i, j] = ndcg_at_k(lists[i], grades)
    return scores


def _titles(bench: Bench, ids: set[str]) -> dict[str, str]:
    out: dict[str, str] = {}
    ordered = sorted(ids)
    for start in range(0, len(ordered), 1000):
        docs = bench.client.mget(index=INDEX, body={"ids": ordered[start:start + 1000]},
                                 _source_includes=["title"])["docs"]
        out.update({d["_id"]: str(d.get("_source", {}).get("title") or "")
                    for d in docs if d.get("found")})
    return out


def generate(api: Any, generator: str, count: int, seed: int) -> tuple[float, dict[str, Any]]:
    """One generated set through ``PUT /query_sets``: its wall time (PUT to COMPLETED) and the
    finished document."""
    body: dict[str, Any] = {
        "name": f"coldstart {generator}", "description": "workbench bench --only coldstart",
        "sampling": SAMPLING[generator], "index": INDEX, "numberOfQueryTerms": count,
        "contextFields": CONTEXT_FIELDS, "seed": seed}
    if generator == "llm":
        body["modelId"] = MODEL

    def run() -> dict[str, Any]:
        reply = api.srw("PUT", "/query_sets", body)
        assert reply.status == 200, reply.data
        set_id = reply.json["query_set_id"]
        wait_status(api, f"/query_sets/{set_id}", poll=0.1, timeout=7200)
        source: dict[str, Any] = api.srw("GET", f"/query_sets/{set_id}").json[
            "hits"]["hits"][0]["_source"]
        return source

    wall, doc = timed(run)
    if doc["status"] != "COMPLETED":
        raise RuntimeError(f"generation by {generator} ended {doc['status']}: "
                           f"{doc.get('metadata', {}).get('error')}")
    return wall, doc


def score_set(bench: Bench, entries: Sequence[Mapping[str, Any]],
              reference: Sequence[float]) -> dict[str, Any]:
    """Both scorings of one generated set, and their taus against ``reference``."""
    texts = [e["queryText"] for e in entries]
    sources = [e["customFields"]["sourceDocId"] for e in entries]
    results = search_all(bench, texts)
    mrr = np.array([[reciprocal_rank(lists[i], sources[i]) for lists in results.values()]
                    for i in range(len(texts))])
    judged = judged_ndcg(bench, texts, results)
    names = list(CONFIGURATIONS)
    return {
        "queries": len(texts),
        "known_item_mrr": {"mean": dict(zip(names, mrr.mean(axis=0).round(4).tolist(),
                                            strict=True)),
                           "kendall_tau": bootstrap_tau(reference, mrr)},
        f"{JUDGE}_ndcg@{K}": {"mean": dict(zip(names, judged.mean(axis=0).round(4).tolist(),
                                               strict=True)),
                              "kendall_tau": bootstrap_tau(reference, judged)},
        "source_found_in_any_top_k": float(np.mean(mrr.max(axis=1) > 0)) if len(texts) else 0,
    }


def measure(bench: Bench, generators: Sequence[str], llm_url: str, llm_queries: int,
            data: str | None, count: int) -> dict[str, Any]:
    """Every figure of one run (``coldstart.json``)."""
    from workbench.config import Config
    from workbench.demo.load import load_demo, read_json
    from workbench.judgments.agreement import merge

    queries_path, judgments_path, products_path = data_paths(data)
    real = [q["queryText"] for q in read_json(queries_path)["querySetQueries"]]
    ratings = on_shipped_scale(merge(read_json(judgments_path)["judgmentRatings"]))
    bench.client.indices.delete(index=INDEX, ignore=[404])
    bench.on_close(lambda: bench.client.indices.delete(index=INDEX, ignore=[404]))
    load_demo(Config.from_env(dict(os.environ, OPENSEARCH_URL=bench.opensearch_url)),
              str(products_path), INDEX, None)

    names = list(CONFIGURATIONS)
    human_results = search_all(bench, real)
    human = np.array([[ndcg_at_k(lists[i], ratings.get(real[i], {}))
                       for lists in human_results.values()] for i in range(len(real))])
    reference = list(human.mean(axis=0))
    control = judged_ndcg(bench, real, human_results)
    report: dict[str, Any] = {
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "data": {"catalogue": str(products_path.name), "queries": len(real),
                 "judgments": sum(len(d) for d in ratings.values()),
                 "scale": "3/2/1/0 (Exact/Substitute/Complement/Irrelevant), NDCG with "
                          "exponential gain 2^r - 1 (workbench.metrics.ndcg)"},
        "k": K, "bootstrap_rounds": ROUNDS, "seed": SEED, "judge": JUDGE,
        "configurations": CONFIGURATIONS,
        "reference_ranking": {"human_ndcg@10": dict(zip(names, human.mean(axis=0).round(4)
                                                        .tolist(), strict=True))},
        "control_real_queries": {
            f"{JUDGE}_ndcg@{K}": {"mean": dict(zip(names, control.mean(axis=0).round(4)
                                                   .tolist(), strict=True)),
                                  "kendall_tau": bootstrap_tau(reference, control)}},
        "generators": {}}

    models = json.dumps([{"id": MODEL, "name": "cold-start generator", "provider": "openai",
                          "base_url": llm_url, "model": "model"}])
    server = bench.server(WORKBENCH_MODELS=models)
    # one worker process, one call at a time: llama.cpp's server answers one call at a time
    # (docs/llm-models.md), and the bound below assumes the concurrency it is given
    concurrency = 1
    bench.worker(WORKBENCH_MODELS=models, WORKBENCH_WORKER_CONCURRENCY="1",
                 WORKBENCH_LLM_CONCURRENCY=str(concurrency))
    api = bench.api(server)
    for generator in generators:
        wanted = llm_queries if generator == "llm" else count
        wall, doc = generate(api, generator, wanted, SEED)
        made = doc.get("generation", {})
        usage = made.get("usage", {"llmCalls": 0, "inputTokens": 0, "outputTokens": 0})
        entry: dict[str, Any] = {
            "documents": made.get("documents"), "duplicates": made.get("duplicates"),
            "failedDocuments": made.get("failedDocuments", 0),
            "refusedQueries": made.get("refusedQueries", 0),
            "seconds": round(wall, 2), "usage": usage,
            "examples": [e["queryText"] for e in doc["querySetQueries"][:8]]}
        if generator == "llm":
            calls = int(usage.get("llmCalls", 0))
            latency = float(usage.get("latencyMs", 0.0)) / 1000 / max(1, calls)
            entry["model"] = llm_url
            entry["throughput"] = {
                "calls": calls, "mean_latency_s": round(latency, 3), "concurrency": concurrency,
                "bound_s": round(calls * latency / concurrency, 2),
                "ratio": round(bound_ratio(wall, calls, latency, concurrency), 3),
                "target": THROUGHPUT_TARGET}
        entry.update(score_set(bench, doc["querySetQueries"], reference))
        report["generators"][generator] = entry
    return report


# ---------------------------------------------------------------------------------------------


def _fmt_tau(figures: Mapping[str, Any]) -> str:
    value = figures["tau"]
    if value is None:
        return "undefined"
    return f"{value:.2f} [{figures['low']:.2f}, {figures['high']:.2f}]"


def print_table(report: Mapping[str, Any]) -> None:
    judged = f"{JUDGE}_ndcg@{K}"
    names = list(CONFIGURATIONS)
    print(f"{'configuration':26} {'human NDCG':>10} {'judge NDCG (real)':>18}"
          + "".join(f" {g + ' MRR':>14} {g + ' judge':>14}" for g in report["generators"]))
    control = report["control_real_queries"][judged]["mean"]
    for name in names:
        row = (f"{name:26} {report['reference_ranking']['human_ndcg@10'][name]:10.3f} "
               f"{control[name]:18.3f}")
        for entry in report["generators"].values():
            row += (f" {entry['known_item_mrr']['mean'][name]:14.3f}"
                    f" {entry[judged]['mean'][name]:14.3f}")
        print(row)
    print("\nKendall tau-b against the human ranking [95 % bootstrap over queries]:")
    print(f"  real queries, {judged}: "
          f"{_fmt_tau(report['control_real_queries'][judged]['kendall_tau'])}")
    for generator, entry in report["generators"].items():
        print(f"  {generator} ({entry['queries']} queries): known-item MRR "
              f"{_fmt_tau(entry['known_item_mrr']['kendall_tau'])}; {judged} "
              f"{_fmt_tau(entry[judged]['kendall_tau'])}; {entry['seconds']} s, "
              f"{entry['usage'].get('llmCalls', 0)} calls, "
              f"{entry['usage'].get('inputTokens', 0)} + {entry['usage'].get('outputTokens', 0)}"
              f" tokens")
        if "throughput" in entry:
            t = entry["throughput"]
            print(f"    throughput: {entry['seconds']} s vs bound {t['bound_s']} s "
                  f"({t['calls']} calls x {t['mean_latency_s']} s / {t['concurrency']}) -> "
                  f"{t['ratio']}")


def markdown(report: Mapping[str, Any]) -> str:
    """The two tables docs/performance.md quotes (a unit test checks the page holds them)."""
    judged = f"{JUDGE}_ndcg@{K}"
    generators = list(report["generators"])
    control = report["control_real_queries"][judged]
    lines = ["| Configuration | Human NDCG@10, real queries | Judge NDCG@10, real queries | "
             + " | ".join(f"{g}: known-item MRR@10 | {g}: judge NDCG@10" for g in generators)
             + " |", "|---" * (3 + 2 * len(generators)) + "|"]
    for name in CONFIGURATIONS:
        cells = [f"`{name}`", f"{report['reference_ranking']['human_ndcg@10'][name]:.3f}",
                 f"{control['mean'][name]:.3f}"]
        for g in generators:
            entry = report["generators"][g]
            cells += [f"{entry['known_item_mrr']['mean'][name]:.3f}",
                      f"{entry[judged]['mean'][name]:.3f}"]
        lines.append("| " + " | ".join(cells) + " |")
    lines += ["", "| Queries | Scoring | Kendall τ vs human ranking [95 % bootstrap] | "
                  "Generation: seconds, LLM calls, tokens in / out |", "|---|---|---|---|",
              f"| 150 real ESCI queries | `{JUDGE}` NDCG@10 (control) | "
              f"{_fmt_tau(control['kendall_tau'])} | — |"]
    for g in generators:
        entry = report["generators"][g]
        usage = entry["usage"]
        cost = (f"{entry['seconds']:g} s, {usage.get('llmCalls', 0)} calls, "
                f"{usage.get('inputTokens', 0):,} / {usage.get('outputTokens', 0):,}")
        for label, key in (("known-item MRR@10", "known_item_mrr"), (f"`{JUDGE}` NDCG@10", judged)):
            lines.append(f"| {g}, {entry['queries']} generated from {entry['documents']} "
                         f"documents | {label} | {_fmt_tau(entry[key]['kendall_tau'])} | "
                         f"{cost} |")
    return "\n".join(lines)


def run(bench: Bench) -> list[Result]:
    options = bench.options
    generators = [g for g in str(options.get("generators") or ",".join(GENERATORS)).split(",")
                  if g]
    unknown = set(generators) - set(GENERATORS)
    if unknown:
        raise ValueError(f"unknown generator(s) {sorted(unknown)}: {', '.join(GENERATORS)}")
    count = 30 if bench.quick else 150
    llm_queries = int(options.get("llm_queries") or (10 if bench.quick else DEFAULT_LLM_QUERIES))
    llm_url = str(options.get("llm_url") or os.environ.get("LLAMA_URL") or DEFAULT_LLM_URL)
    data = options.get("data") or os.environ.get("WORKBENCH_DATA_DIR")
    report = measure(bench, generators, llm_url, llm_queries, data, count)
    print_table(report)
    print(markdown(report))
    out = Path(bench.out) / "coldstart.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=2) + "\n")
    print(f"   wrote {out}")

    results: list[Result] = []
    judged = f"{JUDGE}_ndcg@{K}"
    for generator, entry in report["generators"].items():
        for label, key in (("known-item MRR@10", "known_item_mrr"), (f"{JUDGE} NDCG@10", judged)):
            figures = entry[key]["kendall_tau"]
            value = figures["tau"] if figures["tau"] is not None else math.nan
            results.append(Result(
                "coldstart", f"{generator} generator, {entry['queries']} queries, {label}: "
                f"Kendall tau vs human NDCG@10 ranking of {len(CONFIGURATIONS)} configurations",
                value, 1.0, unit="tau", higher_is_better=True,
                details={"95 % bootstrap": f"[{figures['low']:.2f}, {figures['high']:.2f}]",
                         "seconds": entry["seconds"],
                         "LLM calls": entry["usage"].get("llmCalls", 0)}))
        if "throughput" in entry:
            t = entry["throughput"]
            results.append(Result(
                "coldstart", f"{generator} generation, {t['calls']} calls: wall vs calls x "
                f"latency / concurrency", entry["seconds"], t["bound_s"],
                target=THROUGHPUT_TARGET,
                details={"mean latency": f"{t['mean_latency_s']} s",
                         "concurrency": t["concurrency"],
                         "tokens in / out": f"{entry['usage'].get('inputTokens')} / "
                                            f"{entry['usage'].get('outputTokens')}"}))
    return results
