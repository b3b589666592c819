"""One run of a monitor (docs/monitors.md): sample the queries, search them, rate only the pairs
never rated before, compute the metrics with their intervals, re-rate the gold set, decide, and
store the run as one document of ``search-relevance-monitor-run``.

The run document is written ``PROCESSING`` by whoever starts it (``start``: the ``_run`` route or
the scheduler) and the job reads it back, so a re-queued job (the lease sweeper) does the same
work again; its final write is conditional on the version it read.
"""

from __future__ import annotations

import logging
import math
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np
from opensearchpy.exceptions import ConflictError, NotFoundError
from scipy import stats

from workbench.jobs.base import JobFailed, is_transient, keep_metadata
from workbench.judgments.retrieval import (
    Remote,
    Target,
    load,
    load_configurations,
    retrieve,
    target_of,
)
from workbench.metrics.condensed import evaluate_condensed_many
from workbench.metrics.pointwise import evaluate_many
from workbench.monitors import decision, raters
from workbench.querysets import sampling
from workbench.querysets.entries import QueryEntry, read_entries
from workbench.schemas.monitors import window_seconds
from workbench.services import Services
from workbench.store.indices import (
    JUDGMENT_INDEX,
    MONITOR_INDEX,
    MONITOR_RUN_INDEX,
    QUERY_SET_INDEX,
    REMOTE_CONFIG_INDEX,
    SEARCH_CONFIG_INDEX,
)
from workbench.store.repository import Repository, new_id, now_iso
from workbench.telemetry import instruments

log = logging.getLogger(__name__)

TASK = "workbench.monitors.run"
STATES = ("OK", "INCONCLUSIVE", "ALERT", "JUDGE_DRIFT")
#: the order of a run's state over its rules' states (JUDGE_DRIFT replaces them all)
SEVERITY = {"OK": 0, "INCONCLUSIVE": 1, "ALERT": 2}
#: the most earlier runs read back (their ratings and values)
HISTORY_SIZE = 1_000

Pair = tuple[str, str]


def new_run(monitor: dict[str, Any], trigger: str, run_id: str | None = None) -> dict[str, Any]:
    """The PROCESSING document of a run about to be queued."""
    doc: dict[str, Any] = {"id": run_id or new_id(), "monitorId": monitor["id"],
                           "timestamp": now_iso(), "status": "PROCESSING", "trigger": trigger}
    if monitor.get("createdBy"):
        doc["createdBy"] = monitor["createdBy"]
    return doc


def start(svc: Services, monitor: dict[str, Any], trigger: str,
          run_id: str | None = None) -> str:
    """Write a run PROCESSING and queue its job; returns its id (the run is removed again when
    the queue cannot be reached)."""
    from workbench.jobs.queue import QueueUnavailable, enqueue

    repo = Repository(svc.client, MONITOR_RUN_INDEX)
    doc = new_run(monitor, trigger, run_id)
    repo.create(doc)
    try:
        enqueue(TASK, doc["id"], "MONITOR")
    except QueueUnavailable:
        repo.delete(doc["id"])
        raise
    return str(doc["id"])


# -- queries ----------------------------------------------------------------------------------

def sample(svc: Services, monitor: dict[str, Any], now: datetime) -> list[QueryEntry]:
    """The panel's entries, then the UBI sample's queries the panel does not have."""
    spec = monitor["queries"]
    entries: list[QueryEntry] = []
    if spec.get("querySetId"):
        entries = read_entries(load(svc, QUERY_SET_INDEX, spec["querySetId"], "QuerySet"))
    ubi = spec.get("ubi")
    if ubi:
        index, size = ubi["ubiQueriesIndex"], int(ubi["size"])
        if not sampling.index_is_usable(svc.client, index):
            raise JobFailed(f"UBI queries index [{index}] does not exist or has no user_query")
        since = (now - timedelta(seconds=window_seconds(ubi["window"]))).strftime(
            "%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"
        if ubi["sampling"] == "topn":
            texts = sampling.topn(svc.client, index, size, since)
        elif ubi["sampling"] == "random":
            texts = sampling.random_sample(svc.client, index, size, since=since)
        else:
            texts = sampling.pptss(svc.client, index, size, since=since)
        have = {e.query_text for e in entries}
        entries += [QueryEntry(t) for t in texts if t not in have]
    return entries


# -- ratings ----------------------------------------------------------------------------------

def known_ratings(svc: Services, monitor: dict[str, Any],
                  history: list[dict[str, Any]]) -> tuple[dict[Pair, float], dict[Pair, float]]:
    """(reused from the judgment lists, the monitor's own earlier ratings), by (query key, docId);
    a later rating of the monitor's replaces an earlier one."""
    reused: dict[Pair, float] = {}
    for judgment_id in monitor.get("judgmentList") or []:
        doc = load(svc, JUDGMENT_INDEX, judgment_id, "Judgment")
        for entry in doc.get("judgmentRatings") or []:
            for rating in entry.get("ratings") or []:
                try:
                    reused.setdefault((str(entry["query"]), str(rating["docId"])),
                                      float(rating["rating"]))
                except (KeyError, TypeError, ValueError):
                    continue
    own: dict[Pair, float] = {}
    for run in history:
        for rating in run.get("ratings") or []:
            own[(str(rating["query"]), str(rating["docId"]))] = float(rating["rating"])
    return reused, own


def _by_query(pairs: dict[Pair, float]) -> dict[str, dict[str, float]]:
    out: dict[str, dict[str, float]] = {}
    for (query, doc_id), value in pairs.items():
        out.setdefault(query, {})[doc_id] = value
    return out


def _mean_ci(values: list[float]) -> dict[str, Any]:
    """Mean and 95 % t-interval (none below two values; a constant sample is its mean)."""
    n = len(values)
    if n == 0:
        return {"mean": None, "ci95": None, "n": 0}
    mean = float(np.mean(values))
    if n < 2:
        return {"mean": mean, "ci95": None, "n": n}
    half = float(stats.t.ppf(0.975, n - 1) * np.std(values, ddof=1) / math.sqrt(n))
    return {"mean": mean, "ci95": [mean - half, mean + half], "n": n}


def measure(targets: list[Target], ratings: dict[str, dict[str, float]], k: int,
            metrics: list[str]) -> tuple[list[dict[str, Any]], dict[str, dict[str, Any]]]:
    """Per query: its doc ids (top k) and the requested metrics with ``Judged@k``, from every
    rating the monitor knows for the query; and each metric's mean, interval and n. A query
    whose search failed or found nothing is left out."""
    judged_name = f"Judged@{k}"
    names = list(dict.fromkeys([*metrics, judged_name]))
    kept = [t for t in targets if t.search_error is None and t.hits]
    batch = [([d for d, _ in t.hits[:k]], ratings.get(t.entry.key, {})) for t in kept]
    standard = evaluate_many(batch, k) if batch else []
    condensed = evaluate_condensed_many(batch, k) if batch else []
    queries: list[dict[str, Any]] = []
    for target, (doc_ids, _), one, two in zip(kept, batch, standard, condensed, strict=True):
        values = {**dict(one), **dict(two)}
        queries.append({"query": target.entry.query_text, "docIds": doc_ids,
                        "values": {name: float(values[name]) for name in names}})
    summary = {name: _mean_ci([q["values"][name] for q in queries]) for name in names}
    return queries, summary


# -- the gold set -----------------------------------------------------------------------------

def pick_gold(targets: list[Target], ratings: dict[str, dict[str, float]],
              size: int, keep_text: bool = False) -> list[dict[str, Any]]:
    """The first ``size`` rated pairs by query, then rank. ``keep_text``: each pair keeps the
    text the judge read (a remote configuration's documents cannot be read again by id)."""
    out: list[dict[str, Any]] = []
    for target in targets:
        for doc_id, text in target.hits:
            rating = ratings.get(target.entry.key, {}).get(doc_id)
            if rating is not None and len(out) < size:
                pair = {"query": target.entry.query_text,
                        "customFields": dict(target.entry.custom_fields),
                        "docId": doc_id, "rating": rating}
                out.append({**pair, "text": text} if keep_text else pair)
    return out


def gold_targets(svc: Services, rater: raters.Rater, gold: list[dict[str, Any]],
                 index: str) -> list[Target]:
    """The gold pairs as targets (one per query), each document read from the index now, or,
    for a pair that kept the text the judge read (a remote configuration's), that text."""
    unread = list({g["docId"] for g in gold if "text" not in g})
    sources = Repository(svc.client, index).mget_sources(unread) if unread else {}
    by_query: dict[str, Target] = {}
    for pair in gold:
        entry = QueryEntry(pair["query"], dict(pair.get("customFields") or {}))
        target = by_query.setdefault(entry.key, Target(entry))
        if "text" in pair:
            target.hits.append((pair["docId"], str(pair["text"])))
        elif pair["docId"] in sources:
            target.hits.append((pair["docId"], rater.describe(sources[pair["docId"]])))
    return list(by_query.values())


def check_gold(svc: Services, rater: raters.Rater, gold: dict[str, Any],
               index: str) -> decision.Drift:
    pairs = gold.get("pairs") or []
    then = {(QueryEntry(p["query"], dict(p.get("customFields") or {})).key, p["docId"]):
            float(p["rating"]) for p in pairs}
    now = rater.rerate(gold_targets(svc, rater, pairs, index))
    return decision.judge_drift(then, now, scale=float(gold.get("scale") or 1.0))


# -- decisions --------------------------------------------------------------------------------

def rule_of(alert: dict[str, Any]) -> decision.Rule:
    baseline = alert.get("baseline") or {}
    return decision.Rule(
        metric=alert["metric"], drop=float(alert["drop"]), relative=bool(alert["relative"]),
        previous_runs=int(baseline.get("previousRuns", 5)), pinned_run=baseline.get("runId"),
        persistence=int(alert["persistence"]), min_judged=float(alert["minJudged"]),
        min_queries=int(alert["minQueries"]), alpha=float(alert["alpha"]))


def run_values(run: dict[str, Any], metric: str, judged: str, number: int) -> decision.RunValues:
    """A stored run as rule ``number`` reads it."""
    decisions = run.get("decisions") or []
    flagged = bool(decisions[number].get("flagged")) if number < len(decisions) else False
    mean = ((run.get("metrics") or {}).get(judged) or {}).get("mean")
    return decision.RunValues(
        run_id=str(run["id"]),
        values={q["query"]: float(q["values"][metric]) for q in run.get("queries") or []
                if metric in (q.get("values") or {})},
        judged=float(mean) if mean is not None else 0.0, flagged=flagged)


def decide_all(monitor: dict[str, Any], current: dict[str, Any],
               history: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One decision per alert rule, in the rules' order. The history holds the earlier
    completed runs, oldest first, without those that said JUDGE_DRIFT (their values were
    measured by another judge)."""
    judged = f"Judged@{monitor['k']}"
    earlier = [r for r in history if r.get("state") != "JUDGE_DRIFT"]
    out = []
    for number, alert in enumerate(monitor.get("alerts") or []):
        rule = rule_of(alert)
        made = decision.decide(rule, run_values(current, rule.metric, judged, number),
                               [run_values(r, rule.metric, judged, number) for r in earlier])
        out.append({"metric": rule.metric, "state": made.state, "flagged": made.flagged,
                    "consecutive": made.consecutive, "delta": made.delta,
                    "pValue": made.p_value, "sharedQueries": made.shared_queries,
                    "baselineRuns": _baseline_ids(rule, earlier, judged, number),
                    "reason": made.reason})
    return out


def _baseline_ids(rule: decision.Rule, history: list[dict[str, Any]], judged: str,
                  number: int) -> list[str]:
    runs = decision.baseline_runs(rule, [run_values(r, rule.metric, judged, number)
                                         for r in history])
    return [r.run_id for r in runs or []]


def overall(decisions: list[dict[str, Any]], drift: bool) -> str:
    if drift:
        return "JUDGE_DRIFT"
    states = [d["state"] for d in decisions] or ["OK"]
    return max(states, key=lambda s: SEVERITY[s])


# -- the job ----------------------------------------------------------------------------------

def history_of(svc: Services, monitor_id: str, before: str, run_id: str) -> list[dict[str, Any]]:
    """The monitor's completed runs before ``before`` (a timestamp), oldest first."""
    hits = Repository(svc.client, MONITOR_RUN_INDEX).search({
        "size": HISTORY_SIZE, "sort": [{"timestamp": "desc"}, {"id": "desc"}],
        "query": {"bool": {"filter": [{"term": {"monitorId": monitor_id}},
                                      {"term": {"status": "COMPLETED"}},
                                      {"range": {"timestamp": {"lte": before}}}],
                           "must_not": [{"ids": {"values": [run_id]}}]}}})["hits"]["hits"]
    return [h["_source"] for h in reversed(hits)]


def execute(svc: Services, run_id: str) -> None:
    """Run one PROCESSING run (nothing to do for any other state)."""
    repo = Repository(svc.client, MONITOR_RUN_INDEX)
    hit = repo.get_hit(run_id)
    if hit is None or hit["_source"].get("status") != "PROCESSING":
        log.info("monitor run %s is not PROCESSING (deleted or done); nothing to do", run_id)
        return
    instruments.note_job_type("MONITOR")
    run = hit["_source"]
    monitors = Repository(svc.client, MONITOR_INDEX)
    monitor = monitors.get_source(run["monitorId"])
    if monitor is None:
        raise JobFailed(f"Monitor [{run['monitorId']}] does not exist")
    rater: raters.Rater | None = None
    try:
        config, remote = _configuration(svc, monitor["searchConfigurationId"])
        rater = raters.build(svc, monitor, target_of(config))
        result = _measure_and_decide(svc, monitor, run, config, rater, remote)
    except Exception as exc:
        if not is_transient(exc):  # an outage is waited out and the run tried again
            _count(monitor["id"], "ERROR", rater)
        if rater is not None:
            keep_metadata(exc, usage=rater.usage())
        raise
    new_gold = result.pop("newGold", None)
    final = {**run, **result, "status": "COMPLETED"}
    try:
        repo.put(final, seq_no=hit["_seq_no"], primary_term=hit["_primary_term"])
    except (ConflictError, NotFoundError):
        log.info("monitor run %s changed or was deleted while it ran; result dropped", run_id)
        return
    if new_gold is not None:
        monitors.update_fields(monitor["id"], {"gold": new_gold})
    _gauges(monitor["id"], final, rater)


def _configuration(svc: Services, config_id: str) -> tuple[dict[str, Any], Remote]:
    """The watched configuration: a local one, else a remote one (docs/engines.md) with its
    definition by id."""
    if Repository(svc.client, REMOTE_CONFIG_INDEX).get_hit(config_id, ["id"]) is None:
        return load(svc, SEARCH_CONFIG_INDEX, config_id, "SearchConfiguration"), {}
    configs, remote = load_configurations(svc, {"searchConfigurationList": [config_id],
                                                "remoteSearchConfigurationIds": [config_id]})
    return configs[0], remote


def _measure_and_decide(svc: Services, monitor: dict[str, Any], run: dict[str, Any],
                        config: dict[str, Any], rater: raters.Rater,
                        remote: Remote) -> dict[str, Any]:
    now = datetime.now(UTC)
    k = int(monitor["k"])
    entries = sample(svc, monitor, now)
    if not entries:
        raise JobFailed("no queries to run: the panel is empty and the UBI sample found none "
                        "in the window")
    targets = retrieve(svc, entries, [config], k, rater.describe, remote=remote)
    failed = [t.search_error for t in targets if t.search_error is not None]
    if len(failed) == len(targets):
        raise JobFailed(f"every search failed: {failed[-1]}")
    history = history_of(svc, monitor["id"], run["timestamp"], run["id"])
    listed, mine = (_by_query(r) for r in known_ratings(svc, monitor, history))
    counts = {"pairs": 0, "reused": 0}
    ratings: dict[str, dict[str, float]] = {}
    for target in targets:
        key, text = target.entry.key, target.entry.query_text
        # a judgment list names a query by its key, or (one made by people) by its text
        known = {**listed.get(text, {}), **listed.get(key, {}), **mine.get(key, {})}
        ratings[key] = dict(known)
        target.hits = target.hits[:k]
        for doc_id, _ in target.hits:
            counts["pairs"] += 1
            if doc_id in known:
                target.known[doc_id] = str(known[doc_id])
                counts["reused"] += 1
    made, cached = rater.rate(targets)
    for (query, doc_id), value in made.items():
        ratings.setdefault(query, {})[doc_id] = value
    queries, summary = measure(targets, ratings, k, list(monitor["metrics"]))
    new_ratings = [{"query": t.entry.key, "docId": d, "rating": made[(t.entry.key, d)]}
                   for t in targets for d, _ in t.hits if (t.entry.key, d) in made]
    out: dict[str, Any] = {
        "queries": queries, "metrics": summary,
        "rated": {"pairs": counts["pairs"], "new": len(made) - cached,
                  "reused": counts["reused"], "cached": cached,
                  "unrated": counts["pairs"] - counts["reused"] - len(made)},
        "ratings": new_ratings}
    gold = monitor.get("gold")
    size = int(monitor.get("goldPairs", 0))
    drift = False
    if size and gold and gold.get("pairs"):
        found = check_gold(svc, rater, gold, target_of(config))
        drift = found.drift
        out["gold"] = {"pairs": found.pairs, "changed": found.changed, "drift": found.drift}
    elif size:
        pairs = pick_gold(targets, ratings, size, keep_text=bool(remote))
        scale = max([1.0, *(float(p["rating"]) for p in pairs)])
        out["newGold"] = {"pairs": pairs, "scale": scale, "runId": run["id"]}
        out["gold"] = {"pairs": len(pairs), "changed": 0, "drift": False}
    out["usage"] = rater.usage()
    current = {**run, **out}
    out["decisions"] = decide_all(monitor, current, history)
    out["state"] = overall(out["decisions"], drift)
    return out


def _count(monitor_id: str, state: str, rater: raters.Rater | None) -> None:
    instruments.MONITOR_RUNS.labels(monitor_id, state).inc()
    cost = rater.cost() if rater is not None else 0.0
    if cost:
        instruments.MONITOR_COST.labels(monitor_id).inc(cost)


def _gauges(monitor_id: str, run: dict[str, Any], rater: raters.Rater | None) -> None:
    for name, summary in (run.get("metrics") or {}).items():
        if summary.get("mean") is not None:
            instruments.MONITOR_VALUE.labels(monitor_id, name).set(summary["mean"])
    instruments.MONITOR_STATE.labels(monitor_id).set(STATES.index(run["state"]))
    _count(monitor_id, run["state"], rater)
