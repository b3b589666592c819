"""Monitors (issue 46): does the decision rule catch a real drop, and only that?

    workbench bench --only monitors [--quick] [--out DIR]

What is measured, and why this way:

* **Data.** The ESCI catalogue the package ships (6,764 products, ``workbench/demo/data``) goes
  into a throwaway index (``bench-monitors``, deleted at the end); its 150 queries are the
  traffic. ``CONFIGURATIONS``: the watched one (``base``: title^2 and bullets as best fields)
  and two worse ones found by lowering the title's boost, whose real NDCG@10 margins over the
  150 queries are reported (about 0.05 and 0.02).
* **The judge** runs without a model: the 6,678 human ratings (3/2/1/0) where a pair is rated,
  and the reference judge ``token_overlap`` for the rest (its score on the hit's title with the
  query's own text as the reference answer, x 3 rounded onto the same scale: ESCI has no
  reference answers, so the query stands in for one). People where there are people is the
  strongest judge a model-free run has; the lexical judge only fills the holes. Every pair is
  rated, so Judged@10 is 1 and the coverage floor never bites here.
* **Values once, runs simulated.** Every configuration answers the 150 queries once (top 10, one
  ``_msearch`` straight to the cluster) and every query's NDCG@10 is computed once per
  configuration and judge (the ideal list from every grade of the query's pooled results, the
  same for all configurations). A simulated run then picks its queries and feeds
  ``workbench.monitors.decision.decide`` with the earlier runs, exactly as a monitor's run does.
  Three ways of picking queries: ``panel`` (all 150 every run: a fixed query set), ``sample``
  (50 of the 150 at random with the run's seed, a UBI sample whose head queries repeat: paired
  on the queries shared with the baseline), ``fresh`` (the same 50-query samples, but no query
  counts as seen before: traffic that never repeats, so the rule falls back to Welch).
* **(a) False alarms**: 50 runs of the unchanged configuration, 20 repetitions (seeds); the
  ALERTs per 50 runs. With a deterministic search and judge, a query repeated gives the same
  value, so a paired comparison cannot false-alarm; the noise is which queries a run drew.
* **(b) Detection**: runs 1-9 the watched configuration, from run 10 the worse one; runs from
  the swap to the first ALERT (2 is the least persistence 2 allows), 20 repetitions.
* **(c) Judge drift**: from run 10 the judge changes (every pair re-rated by the new judge, the
  worst case for the metric), and each run re-rates the 20-pair gold set picked at run 1 (the
  first rated pairs by query then rank): the run's state is ``JUDGE_DRIFT`` when
  ``decision.judge_drift`` says the gold set moved, so it must be that and never ALERT. Two
  changes: the human ratings replaced by ``token_overlap``'s graded score, and by its strict
  verdict (threshold 1.0: every query word in the title, graded 3, else 0).
* **Cost** of a run against its bound: the searches (one per query), and the pairs rated for
  the first time (pairs never rated in an earlier run) against the pairs the run has.

The full figures go to ``monitors.json`` in the output folder; the report gets the false-alarm
rates, the detection shares, the judge-drift share and the cost ratio.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from workbench.bench.coldstart import _TEXT, data_paths, ndcg_at_k, on_shipped_scale, render
from workbench.bench.common import Bench, Result
from workbench.monitors.decision import Rule, RunValues, decide, judge_drift

K = 10
INDEX = "bench-monitors"
SEED = 46
RUNS = 50
SWAP_AT = 10
SAMPLE = 50
GOLD = 20
SCALE = 3.0
MODES = ("panel", "sample", "fresh")
#: the rule the benchmark runs: the defaults of ``Rule`` with a tolerated drop of 0.01
RULE = Rule(metric=f"NDCG@{K}", drop=0.01)


def _best(title: float) -> dict[str, Any]:
    return {"query": {"multi_match": {"query": _TEXT, "type": "best_fields",
                                      "fields": [f"title^{title:g}", "bullet_points"]}}}


CONFIGURATIONS: dict[str, dict[str, Any]] = {
    "base": _best(2), "worse_0.05": _best(0.9), "worse_0.02": _best(1.2)}
JUDGES = ("hybrid", "token_overlap_score", "token_overlap_strict")

Values = Mapping[str, float]


# ---------------------------------------------------------------------------------------------
# Pure pieces (unit-tested without services)


def hybrid_grades(human: Mapping[str, float], overlap: Mapping[str, float]
                  ) -> dict[str, float]:
    """A query's grades by the benchmark's judge: people where rated, else the reference
    judge's score x 3 rounded (0..3)."""
    out = {doc: float(round(SCALE * score)) for doc, score in overlap.items()}
    out.update({doc: float(r) for doc, r in human.items()})
    return out


def gold_pairs(queries: Sequence[str], results: Mapping[str, Sequence[str]], size: int
               ) -> list[tuple[str, str]]:
    """The gold set: the first ``size`` pairs of a run by query (sorted) then rank."""
    pairs = [(q, doc) for q in sorted(queries) for doc in results[q]]
    return pairs[:size]


@dataclass(frozen=True)
class Scenario:
    """Which values a run reads: ``before`` until run ``swap_at`` (1-based), ``after`` from it;
    the judge's grades of the gold pairs likewise (``gold_before`` / ``gold_after``)."""

    before: Values
    after: Values
    swap_at: int = RUNS + 1
    gold_before: Mapping[tuple[str, str], float] | None = None
    gold_after: Mapping[tuple[str, str], float] | None = None


@dataclass(frozen=True)
class SimRun:
    state: str
    rule_state: str
    flagged: bool
    queries: int
    p_value: float | None


def simulate(scenario: Scenario, mode: str, rule: Rule, runs: int, seed: int,
             size: int = SAMPLE) -> list[SimRun]:
    """``runs`` monitor runs of ``scenario``: each draws its queries (``mode``), is decided
    against the earlier ones, and is ``JUDGE_DRIFT`` when the gold set moved."""
    rng = np.random.default_rng(seed)
    queries = sorted(scenario.before)
    history: list[RunValues] = []
    out: list[SimRun] = []
    for i in range(1, runs + 1):
        values = scenario.after if i >= scenario.swap_at else scenario.before
        drawn = queries if mode == "panel" else sorted(
            rng.choice(queries, size=min(size, len(queries)), replace=False).tolist())
        # fresh traffic: the same text in another run is another query (nothing is paired)
        suffix = f"#{i}" if mode == "fresh" else ""
        current = RunValues(f"run-{i}", {q + suffix: values[q] for q in drawn}, judged=1.0)
        decision = decide(rule, current, history)
        state = decision.state
        gold = scenario.gold_after if i >= scenario.swap_at else scenario.gold_before
        if scenario.gold_before is not None and gold is not None and i > 1 and \
                judge_drift(scenario.gold_before, gold, scale=SCALE).drift:
            state = "JUDGE_DRIFT"
        history.append(RunValues(current.run_id, current.values, current.judged,
                                 decision.flagged))
        out.append(SimRun(state, decision.state, decision.flagged, len(drawn),
                          decision.p_value))
    return out


def runs_until_alert(runs: Sequence[SimRun], swap_at: int) -> int | None:
    """Runs from the swap to the first ALERT, counting both (1 = the swapped run alerted);
    None when none alerted."""
    for i, run in enumerate(runs[swap_at - 1:], start=1):
        if run.state == "ALERT":
            return i
    return None


def new_pairs(drawn_per_run: Sequence[Sequence[str]],
              results_per_run: Sequence[Mapping[str, Sequence[str]]]) -> list[tuple[int, int]]:
    """(pairs in the run, pairs never rated in an earlier run) for each run."""
    seen: set[tuple[str, str]] = set()
    out: list[tuple[int, int]] = []
    for drawn, results in zip(drawn_per_run, results_per_run, strict=True):
        pairs = {(q, doc) for q in drawn for doc in results[q]}
        out.append((len(pairs), len(pairs - seen)))
        seen |= pairs
    return out


def summary(values: Sequence[float | None]) -> dict[str, Any]:
    known = [v for v in values if v is not None]
    return {"values": list(values), "mean": float(np.mean(known)) if known else None,
            "max": max(known) if known else None, "never": sum(v is None for v in values)}


# ---------------------------------------------------------------------------------------------
# Searching and judging (need the services)


def search_all(bench: Bench, texts: Sequence[str]) -> dict[str, dict[str, list[str]]]:
    """configuration -> query -> the top-k ids in order."""
    out: dict[str, dict[str, list[str]]] = {}
    for name, template in CONFIGURATIONS.items():
        lines: list[dict[str, Any]] = []
        for text in texts:
            lines += [{"index": INDEX}, dict(render(template, text), size=K, _source=False)]
        replies = bench.client.msearch(body=lines)["responses"]
        for reply in replies:
            if "error" in reply:
                raise RuntimeError(f"configuration {name}: {reply['error']}")
        out[name] = {t: [h["_id"] for h in r["hits"]["hits"]]
                     for t, r in zip(texts, replies, strict=True)}
    return out


def grades_all(bench: Bench, texts: Sequence[str],
               results: Mapping[str, Mapping[str, Sequence[str]]],
               human: Mapping[str, Mapping[str, float]]) -> dict[str, dict[str, dict[str, float]]]:
    """judge -> query -> docId -> grade (0..3) over every configuration's pooled results."""
    from workbench.judges import Hit, Query, Setup
    from workbench.judges import registry as judges

    graded = judges.create("token_overlap", Setup({}))
    strict = judges.create("token_overlap", Setup({"threshold": 1.0}))
    pools = {t: sorted({d for r in results.values() for d in r[t]}) for t in texts}
    ids = sorted({d for pool in pools.values() for d in pool})
    titles: dict[str, str] = {}
    for start in range(0, len(ids), 1000):
        docs = bench.client.mget(index=INDEX, body={"ids": ids[start:start + 1000]},
                                 _source_includes=["title"])["docs"]
        titles.update({d["_id"]: str(d.get("_source", {}).get("title") or "")
                       for d in docs if d.get("found")})
    out: dict[str, dict[str, dict[str, float]]] = {j: {} for j in JUDGES}
    for text in texts:
        hits = [Hit(d, {"title": titles.get(d, "")}) for d in pools[text]]
        query = Query(text, (text,))
        scores = {h.id: float(v.score or 0.0)
                  for h, v in zip(hits, graded.judge(query, hits).verdicts, strict=True)}
        verdicts = {h.id: SCALE * float(v.rating or 0.0)
                    for h, v in zip(hits, strict.judge(query, hits).verdicts, strict=True)}
        out["hybrid"][text] = hybrid_grades(human.get(text, {}), scores)
        out["token_overlap_score"][text] = {d: float(round(SCALE * s)) for d, s in scores.items()}
        out["token_overlap_strict"][text] = verdicts
    return out


# ---------------------------------------------------------------------------------------------
# The benchmark


def measure(bench: Bench, reps: int) -> dict[str, Any]:
    """Every figure of one run (``monitors.json``)."""
    from workbench.config import Config
    from workbench.demo.load import load_demo, read_json
    from workbench.judgments.agreement import merge

    started = time.perf_counter()
    queries_path, judgments_path, products_path = data_paths(None)
    texts = [q["queryText"] for q in read_json(queries_path)["querySetQueries"]]
    human = on_shipped_scale(merge(read_json(judgments_path)["judgmentRatings"]))
    bench.client.indices.delete(index=INDEX, ignore=[404])
    bench.on_close(lambda: bench.client.indices.delete(index=INDEX, ignore=[404]))
    load_demo(Config.from_env(dict(os.environ, OPENSEARCH_URL=bench.opensearch_url)),
              str(products_path), INDEX, None)
    results = search_all(bench, texts)
    grades = grades_all(bench, texts, results, human)
    values = {j: {c: {t: ndcg_at_k(results[c][t], grades[j][t]) for t in texts}
                  for c in CONFIGURATIONS} for j in JUDGES}
    humans = {c: float(np.mean([ndcg_at_k(results[c][t], human.get(t, {})) for t in texts]))
              for c in CONFIGURATIONS}
    prepared = time.perf_counter() - started

    base = values["hybrid"]["base"]
    gold = gold_pairs(texts, results["base"], GOLD)
    gold_then = {p: grades["hybrid"][p[0]][p[1]] for p in gold}
    simulated = time.perf_counter()
    figures: dict[str, Any] = {"false_alarms": {}, "detection": {}, "judge_drift": {}}
    for mode in MODES:
        unchanged = [simulate(Scenario(base, base, gold_before=gold_then, gold_after=gold_then),
                              mode, RULE, RUNS, SEED + rep) for rep in range(reps)]
        alerts = [sum(r.state == "ALERT" for r in runs) for runs in unchanged]
        flagged = [sum(r.flagged for r in runs) for runs in unchanged]
        figures["false_alarms"][mode] = {"alerts_per_50_runs": summary(alerts),
                                         "flagged_per_50_runs": summary(flagged)}
        figures["detection"][mode] = {}
        for worse in ("worse_0.05", "worse_0.02"):
            delays = []
            before_swap = 0
            for rep in range(reps):
                runs = simulate(Scenario(base, values["hybrid"][worse], SWAP_AT), mode, RULE,
                                RUNS, SEED + rep)
                delays.append(runs_until_alert(runs, SWAP_AT))
                before_swap += sum(r.state == "ALERT" for r in runs[:SWAP_AT - 1])
            figures["detection"][mode][worse] = {
                "runs_until_alert": summary(delays),
                "within_2_runs": sum(d is not None and d <= 2 for d in delays) / reps,
                "alerts_before_the_swap": before_swap}
        figures["judge_drift"][mode] = {}
        for judge in JUDGES[1:]:
            gold_now = {p: grades[judge][p[0]][p[1]] for p in gold}
            first, alerts_after, rule_alerts = [], 0, 0
            for rep in range(reps):
                runs = simulate(Scenario(base, values[judge]["base"], SWAP_AT, gold_then,
                                         gold_now), mode, RULE, RUNS, SEED + rep)
                first.append(runs[SWAP_AT - 1].state)
                alerts_after += sum(r.state == "ALERT" for r in runs[SWAP_AT - 1:])
                rule_alerts += sum(r.rule_state == "ALERT" for r in runs[SWAP_AT - 1:])
            drift = judge_drift(gold_then, gold_now, scale=SCALE)
            figures["judge_drift"][mode][judge] = {
                "gold": asdict(drift),
                "judge_drift_at_the_change": first.count("JUDGE_DRIFT") / reps,
                "alerts_after_the_change": alerts_after,
                "alerts_the_rule_alone_would_raise": rule_alerts,
                "ndcg@10_by_the_new_judge": round(float(np.mean(list(
                    values[judge]["base"].values()))), 4)}
    cost = {}
    for mode in ("panel", "sample"):
        rng = np.random.default_rng(SEED)
        drawn = [texts if mode == "panel" else rng.choice(texts, SAMPLE, replace=False).tolist()
                 for _ in range(RUNS)]
        per_run = [results["base"] if i < SWAP_AT - 1 else results["worse_0.05"]
                   for i in range(RUNS)]
        counted = new_pairs(drawn, per_run)
        later = counted[1:]
        cost[mode] = {
            "searches_per_run": len(drawn[0]),
            "pairs_per_run": {"run_1": counted[0][0],
                              "mean_runs_2_to_50": float(np.mean([p for p, _ in later]))},
            "new_pairs": {"run_1": counted[0][1], f"run_{SWAP_AT}_swap": counted[SWAP_AT - 1][1],
                          "mean_runs_2_to_50": float(np.mean([n for _, n in later]))}}
    alternatives: dict[str, Any] = {}
    for persistence in (1, 3):
        rule = replace(RULE, persistence=persistence)
        alternatives[f"persistence_{persistence}"] = {mode: {
            "alerts_per_50_runs": summary([sum(r.state == "ALERT" for r in simulate(
                Scenario(base, base), mode, rule, RUNS, SEED + rep)) for rep in range(reps)]),
            "worse_0.05_runs_until_alert": summary([runs_until_alert(simulate(
                Scenario(base, values["hybrid"]["worse_0.05"], SWAP_AT), mode, rule, RUNS,
                SEED + rep), SWAP_AT) for rep in range(reps)])} for mode in ("sample", "fresh")}
    simulation_seconds = time.perf_counter() - simulated
    return {
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "data": {"catalogue": products_path.name, "queries": len(texts),
                 "human_ratings": sum(len(d) for d in human.values())},
        "k": K, "runs": RUNS, "repetitions": reps, "swap_at": SWAP_AT, "sample": SAMPLE,
        "gold_pairs": GOLD, "seed": SEED, "rule": asdict(RULE),
        "configurations": CONFIGURATIONS,
        "ndcg@10": {c: {"judge": round(float(np.mean(list(values["hybrid"][c].values()))), 4),
                        "human_only": round(humans[c], 4)} for c in CONFIGURATIONS},
        "margins": {w: {"judge": round(float(np.mean([base[t] - values["hybrid"][w][t]
                                                       for t in texts])), 4),
                        "human_only": round(humans["base"] - humans[w], 4)}
                    for w in ("worse_0.05", "worse_0.02")},
        **figures, "cost": cost, "alternatives": alternatives,
        "seconds": {"searches_and_judging": round(prepared, 2),
                    "simulation": round(simulation_seconds, 2)}}


def run(bench: Bench) -> list[Result]:
    reps = 5 if bench.quick else 20
    report = measure(bench, reps)
    out = Path(bench.out) / "monitors.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=2) + "\n")
    print(f"   wrote {out}")
    results: list[Result] = []
    for mode in MODES:
        alarms = report["false_alarms"][mode]["alerts_per_50_runs"]
        results.append(Result(
            "monitors", f"{mode}: ALERTs in 50 runs of an unchanged configuration "
            f"(mean of {reps})", alarms["mean"], 1.0, unit="alerts", target=1.0,
            details={"max": alarms["max"]}))
        for worse, target in (("worse_0.05", 0.9), ("worse_0.02", None)):
            figure = report["detection"][mode][worse]
            margin = report["margins"][worse]["judge"]
            results.append(Result(
                "monitors", f"{mode}: a drop of {margin:.3f} NDCG@10 alerted within 2 runs "
                f"(share of {reps})", figure["within_2_runs"], 1.0, unit="share",
                target=target, higher_is_better=True,
                details={"mean runs until ALERT": figure["runs_until_alert"]["mean"],
                         "never": figure["runs_until_alert"]["never"]}))
        for judge, figure in report["judge_drift"][mode].items():
            results.append(Result(
                "monitors", f"{mode}: judge changed to {judge}: JUDGE_DRIFT at the change "
                f"(share of {reps})", figure["judge_drift_at_the_change"], 1.0, unit="share",
                target=1.0, higher_is_better=True,
                details={"ALERTs after": figure["alerts_after_the_change"]}))
    for mode, figure in report["cost"].items():
        results.append(Result(
            "monitors", f"{mode}: pairs rated per run (runs 2-50, never rated before) vs the "
            f"pairs of the run", figure["new_pairs"]["mean_runs_2_to_50"],
            figure["pairs_per_run"]["mean_runs_2_to_50"], unit="pairs",
            details={"searches per run": figure["searches_per_run"]}))
    return results
