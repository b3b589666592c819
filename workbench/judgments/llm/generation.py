"""An LLM judgment's run: rate every query's hits (``generate``) or the documents a run left
unrated (``retry_failed``), here or spread over the workers (``split``), and fold the outcomes
into the judgment's ratings, failures and usage. The rating itself is ``job.LlmRater``'s.
"""

from __future__ import annotations

import logging
from typing import Any

from workbench.jobs.base import JobFailed
from workbench.jobs.control import JobControl
from workbench.judgments import pooling, summary
from workbench.judgments.llm import split
from workbench.judgments.llm.job import (
    JobUsage,
    LlmRater,
    assemble,
    failure_list,
    prepare,
    rating_entries,
)
from workbench.judgments.retrieval import REMOTE_RETRY, Target, load, retrieve
from workbench.querysets.entries import read_entries
from workbench.services import Services
from workbench.store.indices import QUERY_SET_INDEX, SEARCH_CONFIG_INDEX
from workbench.store.repository import Repository

log = logging.getLogger(__name__)


def _budget_outcome(judge: LlmRater, out: dict[str, Any]) -> None:
    """Mark a run the budget stopped: ``budgetReached`` and the reason to read."""
    if judge.budget is not None and judge.budget.reached:
        out["budgetReached"] = True
        out["lastFailureReason"] = judge.budget.reason
        log.info("judgment budget: %s", judge.budget.reason)
    else:
        out.pop("budgetReached", None)


def generate(svc: Services, judgment_id: str, metadata: dict[str, Any],
             control: JobControl | None = None) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    judge, entries, targets = prepare(svc, metadata, control)
    if control is not None:
        control.check()
    outcomes = split.rate(svc, judgment_id, judge, targets, control)
    budget_reason = judge.budget.reason if judge.budget is not None else None
    ratings, failed, reason = assemble(targets, outcomes, budget_reason)
    out = dict(metadata)
    out.update(totalQueries=len(entries), successfulQueries=len(entries) - failed,
               failedQueries=failed, usage=judge.usage_metadata())
    if metadata.get(pooling.FLAG):
        out[pooling.POOLED] = sum(len(target.hits) for target in targets)
    if failed and reason:
        out["lastFailureReason"] = reason
    _budget_outcome(judge, out)
    crashed = sum(outcome.crashed for outcome in outcomes)
    unusable = sum(outcome.unusable for outcome in outcomes)
    if unusable or (crashed and not metadata.get("ignoreFailure")):
        # Not the model's answers but the set-up (a model unknown, deleted or without its key:
        # no query can succeed and a retry cannot help) or the workbench's own processing
        # broke (logged with its traceback): the judgment ends ERROR, with the plugin's message.
        raise JobFailed(f"LLM judgment generation failed: {failed} of {len(entries)} queries "
                        "could not be processed", {"lastFailureReason": reason})
    log.info("judgment %s: %d queries, %d failed, %s", judgment_id, len(entries), failed,
             out["usage"])
    return ratings, out


def retry_failed(svc: Services, judgment_id: str, doc: dict[str, Any],
                 control: JobControl | None = None,
                 ) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Rate again the documents listed in ``failures`` and merge the answers (docs/contract.md,
    "Retry"); many queries to retry are split over the workers as a generation is.

    A judgment made before failed queries were kept left them out of its ratings: those
    queries of its query set (when the query set still exists) are searched again with its
    configurations and rated whole, and get their entries in query-set order."""
    metadata = doc.get("metadata") or {}
    config_ids = metadata.get("searchConfigurationList") or []
    if not config_ids:
        raise JobFailed("Cannot retry: the judgment's metadata names no searchConfigurationList")
    if metadata.get("remoteSearchConfigurationIds"):  # refused by the route already
        raise JobFailed(REMOTE_RETRY)
    first = load(svc, SEARCH_CONFIG_INDEX, config_ids[0], "SearchConfiguration")
    index = first["index"]
    entries = doc.get("judgmentRatings") or []
    wanted = sorted({f["docId"] for e in entries for f in e.get("failures") or []})
    sources = Repository(svc.client, index).mget_sources(wanted)
    gone = [d for d in wanted if d not in sources]
    if gone:
        raise JobFailed(f"Cannot retry: document(s) no longer exist in index [{index}]: "
                        f"[{', '.join(gone)}]")
    query_set = Repository(svc.client, QUERY_SET_INDEX).get_source(metadata.get("querySetId", ""))
    in_set = read_entries(query_set) if query_set is not None else []
    by_key = {e.key: e for e in in_set}
    present = {e["query"] for e in entries}
    absent = ([e for e in in_set if e.key not in present]
              if summary.left_out(metadata, entries) else [])
    configs = [first]
    if absent:  # searched again with every configuration
        configs += [load(svc, SEARCH_CONFIG_INDEX, c, "SearchConfiguration")
                    for c in config_ids[1:]]
    judge = LlmRater(svc, metadata, index, control)
    judge.find_vectors(c["index"] for c in configs)
    targets, owners = [], []
    for number, entry in enumerate(entries):
        failures = [f["docId"] for f in entry.get("failures") or []]
        if not failures:
            continue
        query_entry = by_key.get(entry["query"]) or read_entries(
            {"querySetQueries": [{"queryText": entry["query"]}]})[0]
        contexts = [(d, judge.describe(sources[d])) for d in failures]
        targets.append(Target(query_entry, contexts))
        owners.append(number)
    if absent:
        log.info("judgment %s: %d queries left out by an earlier run are searched and rated "
                 "again", judgment_id, len(absent))
        expand = bool(metadata.get(pooling.FLAG))
        found = retrieve(svc, absent, configs, int(metadata.get("size", 10)), judge.describe,
                         expand)
        if expand:  # the absent queries' pools join the count
            metadata = {**metadata, pooling.POOLED: int(metadata.get(pooling.POOLED) or 0)
                        + sum(len(target.hits) for target in found)}
        for target in found:
            entries.append({"query": target.entry.key, "ratings": []})
            targets.append(target)
            owners.append(len(entries) - 1)
    judge.use_cache(targets)
    outcomes = split.rate(svc, judgment_id, judge, targets, control)
    unusable = next((o.errors[-1] for o in outcomes if o.unusable and o.errors), None)
    if unusable:  # the model cannot be called as set up: the judgment keeps what it had
        raise JobFailed(f"Cannot retry: {unusable}")
    budget_reason = judge.budget.reason if judge.budget is not None else None
    for number, target, outcome in zip(owners, targets, outcomes, strict=True):
        entry = entries[number]
        rated = {**target.known, **outcome.ratings}
        entry["ratings"] = list(entry.get("ratings") or []) + rating_entries(target, outcome)
        still = failure_list([d for d, _ in target.hits if d not in rated], outcome.unpaid,
                             budget_reason, outcome.reasons)
        if still:
            entry["failures"] = still
        else:
            entry.pop("failures", None)
    if absent:
        order = {e.key: n for n, e in enumerate(in_set)}
        entries.sort(key=lambda e: order.get(e["query"], len(order)))
    usage = JobUsage.from_metadata(metadata.get("usage"))
    usage.add(judge.usage)
    out = summary.recompute({**metadata, "usage": judge.usage_metadata(usage)}, entries)
    out.pop("error", None)
    out.pop("progress", None)  # left by a cancelled or failed earlier retry
    if out.get("budgetReached") and out.get("lastFailureReason", "").startswith("budget"):
        out.pop("lastFailureReason")  # the earlier run's stop, now retried
    _budget_outcome(judge, out)
    return entries, out
