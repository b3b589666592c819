"""The fill job: pool the experiment's top-k, rate only the unrated pairs (each once) with the
model (through the judgment cache, as LLM judgments do) or the reference judge, and write a new
``FILLED_JUDGMENT`` holding the old ratings and the new ones, each with its ``source``.

The judgment is created ``PROCESSING`` by the API with the request in its metadata; the job
reads it back and computes the pool again (the same experiment gives the same pool), so a job
delivered again or re-queued by the lease sweeper does the same work, the judgment cache
keeping what an earlier attempt paid for. Progress, cancel and budget are the LLM judgments'
(``LlmRater``); a cancel or failure ends the judgment ERROR with its usage kept.

**Scale.** An LLM's ``SCORE0_1`` and most reference judges rate 0–1; people's grades are often
on a wider scale (ESCI: 0–3). Mixed in one list, a model's 1.0 would count as a third of a
human 3 in NDCG's gains, and an unjudged document rated relevant by the model would still
weigh less than a judged one. So the new ratings are put on the list's scale: ``rating ×
top``, ``top`` being the largest rating of the experiment's lists when it is above 1
(``metadata.scale``), else left as they are.
"""

from __future__ import annotations

import json
import logging
from typing import Any

from workbench.holes import pool as pooling
from workbench.holes import sources
from workbench.jobs.base import JobFailed
from workbench.jobs.control import JobControl
from workbench.judges import registry
from workbench.judges.base import Hit, Query, Setup
from workbench.judgments.llm import estimate as llm_estimate
from workbench.judgments.llm import split
from workbench.judgments.llm.job import LlmRater, failure_list
from workbench.judgments.reference_job import shown_fields
from workbench.judgments.retrieval import Target
from workbench.judgments.runner import keeping_usage, write
from workbench.querysets.entries import QueryEntry
from workbench.schemas.javafmt import double_to_string
from workbench.services import Services
from workbench.store.indices import EXPERIMENT_INDEX, JUDGMENT_INDEX
from workbench.store.repository import Repository, now_iso
from workbench.store.vector_fields import vector_fields

log = logging.getLogger(__name__)

TASK = "workbench.holes.fill"
TYPE = "FILLED_JUDGMENT"
GONE = "the document no longer exists in the index"
NO_RATING = "the judge could not rate this document"
#: the request's fields that say how to rate, kept in the judgment's metadata
LLM_FIELDS = ("modelId", "llmJudgmentRatingType", "promptTemplate", "contextFields",
              "tokenLimit", "maxTokens", "maxCost", "overwriteCache")


def new_fill(judgment_id: str, fields: dict[str, Any], experiment: dict[str, Any],
             pool: dict[str, int]) -> dict[str, Any]:
    """The PROCESSING judgment of a fill request (``fields`` as schemas/holes.py loads them)."""
    metadata: dict[str, Any] = {"experimentId": experiment["id"],
                                "judgmentList": list(experiment.get("judgmentList") or []),
                                "size": fields["size"], "pool": pool}
    if fields.get("modelId"):
        metadata.update({k: fields[k] for k in LLM_FIELDS if fields.get(k) is not None})
        metadata.pop("overwriteCache", None)
        if fields.get("overwriteCache"):
            metadata["overwriteCache"] = True
    else:
        choice = fields["judge"]
        metadata["judge"] = choice.name
        if choice.options:
            metadata["judgeOptions"] = dict(choice.options)
        metadata["contextFields"] = fields["contextFields"]
    name = fields["name"] or (f"{experiment.get('name') or experiment['id']} with holes "
                              "filled")
    return {"id": judgment_id, "timestamp": now_iso(), "name": name, "status": "PROCESSING",
            "type": TYPE, "metadata": metadata, "judgmentRatings": []}


def source_of_fill(metadata: dict[str, Any]) -> str:
    if metadata.get("modelId"):
        return f"llm:{metadata['modelId']}"
    return f"reference:{metadata['judge']}"


def fill(svc: Services, judgment_id: str) -> None:
    """The task: the PROCESSING ``FILLED_JUDGMENT`` ``judgment_id`` filled and COMPLETED."""
    repo = Repository(svc.client, JUDGMENT_INDEX)
    hit = repo.get_hit(judgment_id)
    if hit is None or hit["_source"].get("status") != "PROCESSING" \
            or hit["_source"].get("type") != TYPE:
        log.info("filled judgment %s is not PROCESSING (deleted or done); nothing to do",
                 judgment_id)
        return
    control = JobControl(svc, JUDGMENT_INDEX, hit, "queries", in_metadata=True)
    control.check()  # cancelled while queued
    with keeping_usage(control):
        ratings, metadata = run(svc, judgment_id, hit["_source"].get("metadata") or {},
                                control)
        control.check()
    write(repo, hit, {"status": "COMPLETED", "metadata": metadata, "judgmentRatings": ratings})


def run(svc: Services, judgment_id: str, metadata: dict[str, Any],
        control: JobControl | None) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    experiment = Repository(svc.client, EXPERIMENT_INDEX).get_source(metadata["experimentId"])
    if experiment is None:
        raise JobFailed(f"Experiment [{metadata['experimentId']}] does not exist")
    try:
        found = pooling.read(svc.client, experiment, int(metadata["size"]))
    except pooling.Refused as exc:
        raise JobFailed(str(exc)) from None
    pool = found.pool
    wanted = sorted({d for entry in pool.entries for d in pool.unrated(entry)})
    docs = Repository(svc.client, found.index).mget_sources(wanted) if wanted else {}
    out = {k: v for k, v in metadata.items() if k != "progress"}
    if metadata.get("modelId"):
        new, failures, usage = _rate_with_model(svc, judgment_id, metadata, found, docs,
                                                control, out)
    else:
        new, failures = _rate_with_judge(svc, metadata, found, docs, control)
        usage = None
    top = found.lists.top()
    scale = top if top > 1 else 1.0
    source = source_of_fill(metadata)
    rows = _rows(found, new, failures, source, scale)
    failed_queries = sum(1 for row in rows if row.get("failures"))
    out.update(pool=pool.counts(), filled=sum(len(r) for r in new.values()),
               failed=sum(len(f) for f in failures.values()), sources=sources.counts(rows),
               scale=int(scale) if scale.is_integer() else scale,
               totalQueries=len(rows), successfulQueries=len(rows) - failed_queries,
               failedQueries=failed_queries)
    if usage is not None:
        out["usage"] = usage
    reasons = [f["reason"] for row in rows for f in row.get("failures") or [] if "reason" in f]
    if reasons and "lastFailureReason" not in out:
        out["lastFailureReason"] = reasons[-1]
    log.info("filled judgment %s: pool %s, %d rated now, %d failed", judgment_id,
             out["pool"], out["filled"], out["failed"])
    return rows, out


def _targets(found: pooling.Experiment, docs: dict[str, dict[str, Any]],
             describe: Any) -> tuple[list[Target], dict[str, list[dict[str, str]]]]:
    """One target per query with unrated pooled documents still in the index; the documents
    gone from the index are failures."""
    targets, gone = [], {}
    for entry in found.pool.entries:
        unrated = found.pool.unrated(entry)
        missing = [d for d in unrated if d not in docs]
        if missing:
            gone[entry.query_text] = [{"docId": d, "reason": GONE} for d in missing]
        hits = [(d, describe(docs[d])) for d in unrated if d in docs]
        if hits:
            targets.append(Target(entry, hits))
    return targets, gone


def _rate_with_model(svc: Services, judgment_id: str, metadata: dict[str, Any],
                     found: pooling.Experiment, docs: dict[str, dict[str, Any]],
                     control: JobControl | None, out: dict[str, Any],
                     ) -> tuple[dict[str, dict[str, str]], dict[str, list[dict[str, str]]],
                                dict[str, Any]]:
    rater = LlmRater(svc, metadata, found.index, control)
    rater.find_vectors([found.index])
    targets, failures = _targets(found, docs, rater.describe)
    rater.use_cache(targets)
    if control is not None:
        control.check()
    outcomes = split.rate(svc, judgment_id, rater, targets, control)
    reached = rater.budget is not None and rater.budget.reached
    budget_reason = rater.budget.reason if rater.budget is not None else None
    if reached:
        out["budgetReached"] = True
        out["lastFailureReason"] = budget_reason
    new: dict[str, dict[str, str]] = {}
    for target, outcome in zip(targets, outcomes, strict=True):
        text = target.entry.query_text
        rated = {**target.known, **outcome.ratings}
        new[text] = {d: rated[d] for d, _ in target.hits if d in rated}
        missing = [d for d, _ in target.hits if d not in rated]
        if missing:
            failures.setdefault(text, []).extend(
                failure_list(missing, outcome.unpaid, budget_reason, outcome.reasons))
    unusable = next((o.errors[-1] for o in outcomes if o.unusable and o.errors), None)
    crashed = sum(o.crashed for o in outcomes)
    if unusable or crashed:
        # The model cannot be called as set up, or the workbench's own processing broke
        # (logged with its traceback): the judgment ends ERROR, as an LLM judgment does.
        failed = sum(1 for o in outcomes if o.errors)
        raise JobFailed(f"Filling the holes failed: {failed} of {len(targets)} queries could "
                        "not be processed", {"lastFailureReason": unusable or next(
                            (o.errors[-1] for o in outcomes if o.errors), None)})
    return new, failures, rater.usage_metadata()


def _rate_with_judge(svc: Services, metadata: dict[str, Any], found: pooling.Experiment,
                     docs: dict[str, dict[str, Any]], control: JobControl | None,
                     ) -> tuple[dict[str, dict[str, str]], dict[str, list[dict[str, str]]]]:
    fields = list(metadata.get("contextFields") or [])
    vectors = frozenset() if fields else vector_fields(svc.client, [found.index])
    targets, failures = _targets(found, docs,
                                 lambda source: shown_fields(source, fields, vectors))
    options = dict(metadata.get("judgeOptions") or {})
    judge = registry.create(metadata["judge"], Setup(options, svc, source="judgment"))
    if control is not None:
        control.start(len(targets), "rating")
    new: dict[str, dict[str, str]] = {}
    for target in targets:
        if control is not None:
            control.check()
        entry = target.entry
        answer = entry.reference_answer
        query = Query(entry.query_text, (answer,) if answer else (), dict(entry.custom_fields))
        hits = [Hit(d, json.loads(shown)) for d, shown in target.hits]
        verdicts = judge.judge(query, hits).verdicts
        new[entry.query_text] = {hit.id: double_to_string(float(v.rating))
                                 for hit, v in zip(hits, verdicts, strict=True)
                                 if v.rating is not None}
        missing = [hit.id for hit, v in zip(hits, verdicts, strict=True) if v.rating is None]
        if missing:
            failures.setdefault(entry.query_text, []).extend(
                {"docId": d, "reason": NO_RATING} for d in missing)
        if control is not None:
            control.advance()
    return new, failures


def _scaled(rating: str, scale: float) -> str:
    return rating if scale == 1.0 else double_to_string(float(rating) * scale)


def _rows(found: pooling.Experiment, new: dict[str, dict[str, str]],
          failures: dict[str, list[dict[str, str]]], source: str,
          scale: float) -> list[dict[str, Any]]:
    """Every query of the old lists with all its old ratings, then the new ones (in pool
    order), each with its source; the documents left unrated under the query's ``failures``."""
    rows: list[dict[str, Any]] = []
    taken: set[str] = set()
    by_text: dict[str, QueryEntry] = {e.query_text: e for e in found.pool.entries}
    for entry in by_text.values():
        name, old = found.lists.seen(entry)
        taken.update({entry.query_text, entry.key})
        ratings = list(old.values())
        added = new.get(entry.query_text) or {}
        ratings += [{"docId": d, "rating": _scaled(added[d], scale), "source": source}
                    for d in found.pool.docs[entry.query_text] if d in added and d not in old]
        row: dict[str, Any] = {"query": name, "ratings": ratings}
        if failures.get(entry.query_text):
            row["failures"] = failures[entry.query_text]
        if ratings or "failures" in row:
            rows.append(row)
    for name, old in found.lists.others(taken):
        rows.append({"query": name, "ratings": list(old.values())})
    return rows


def estimate(svc: Services, metadata: dict[str, Any], found: pooling.Experiment,
             ) -> dict[str, Any]:
    """What a fill would cost: the pool, and for a model the calls ``POST judgments/_estimate``
    counts for the same prompts (the judgment cache read first); a judge makes no call."""
    pool = found.pool
    out: dict[str, Any] = {"pool": pool.counts()}
    if not metadata.get("modelId"):
        out.update(judge=metadata["judge"], pairsToRate=out["pool"]["unrated"], calls=0)
        return out
    wanted = sorted({d for entry in pool.entries for d in pool.unrated(entry)})
    docs = Repository(svc.client, found.index).mget_sources(wanted) if wanted else {}
    rater = LlmRater(svc, metadata, found.index)
    rater.find_vectors([found.index])
    targets, gone = _targets(found, docs, rater.describe)
    rater.use_cache(targets)
    out.update(modelId=rater.model_id, missingDocuments=sum(len(g) for g in gone.values()),
               **llm_estimate.calls(rater, targets))
    return out
