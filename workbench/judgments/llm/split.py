"""LLM_JUDGMENT over every free worker (``jobs.fanout``): each query with hits to rate is one
unit. Every process working on the job makes ``WORKBENCH_LLM_CONCURRENCY`` calls at once (one
unit per thread), writes its ratings to the judgment cache as it goes, and returns per unit what
``LlmRater.rate`` would have folded into the query's outcome; the parent merges them in query
order, so the judgment is the one a single worker would have written.

A judgment with a token or cost budget keeps it in Redis while it is split
(``cost.SharedBudget``): every process reserves against the same limit.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from workbench.jobs import fanout
from workbench.jobs.base import JobFailed
from workbench.jobs.control import JobControl, without_progress
from workbench.judgments.llm.cost import SharedBudget
from workbench.judgments.llm.job import CacheWriter, JobUsage, LlmRater, Outcome, crash_answer
from workbench.judgments.retrieval import Target
from workbench.querysets.entries import QueryEntry
from workbench.redis_keys import budget_key
from workbench.services import Services

KIND = "llm_judgment"
#: estimated seconds of one query's LLM call(s), made ``WORKBENCH_LLM_CONCURRENCY`` at a time
CALL_SECONDS = 1.0


def _asked(targets: list[Target]) -> list[int]:
    """The targets with at least one hit not known yet."""
    return [n for n, t in enumerate(targets) if any(d not in t.known for d, _ in t.hits)]


def rate(svc: Services, judgment_id: str, judge: LlmRater, targets: list[Target],
         control: JobControl | None) -> list[Outcome]:
    """``LlmRater.rate``, spread over the workers when enough queries have hits to rate: the same
    outcomes, and the usage added to ``judge.usage``."""
    asked = _asked(targets)
    seconds = len(asked) * CALL_SECONDS / max(1, svc.config.llm_concurrency)
    if not fanout.worth_splitting(svc, len(asked), seconds):
        return judge.rate(targets)
    payloads = [{"queryText": targets[n].entry.query_text,
                 "customFields": targets[n].entry.custom_fields,
                 "hits": [[d, shown] for d, shown in targets[n].hits
                          if d not in targets[n].known]} for n in asked]
    head: dict[str, Any] = {"metadata": without_progress(judge.metadata), "index": judge.index,
                            "vectors": sorted(judge.vectors)}
    if judge.budget is not None:  # one budget for every process of this run (a run again too)
        digest = hashlib.sha256(json.dumps(payloads, sort_keys=True).encode()).hexdigest()
        key = budget_key(judgment_id, digest[:20])
        head["budgetKey"] = key
        judge.budget = shared_budget(svc, judge, key)
    if control is not None:
        control.phase = "rating"
    try:
        # An earlier run of this judgment that the job replaces (it ran again, and ratings
        # cached meanwhile changed its units) was paid for too: its calls are in the usage.
        results = fanout.spread(svc, KIND, judgment_id, head, payloads, [1] * len(payloads),
                                control, progress_tally=True,
                                retired=lambda spent: judge.usage.add(tallied(spent)))
    except Exception as exc:
        # Cancelled or failed: the units done anywhere were paid for; the job's ERROR keeps them
        # (``runner.keeping_usage``).
        judge.usage.add(tallied(getattr(exc, "run_tally", None) or {}))
        raise
    outcomes = [Outcome() for _ in targets]
    for number, target in enumerate(targets):
        outcomes[number].sent = [d for d, _ in target.hits if d not in target.known]
    for number, result in zip(asked, results, strict=True):
        outcome = outcomes[number]
        outcome.ratings = result["ratings"]
        outcome.rationales = result["rationales"]
        outcome.errors = result["errors"]
        outcome.chunks = result["chunks"]
        outcome.failed_chunks = result["failedChunks"]
        outcome.unpaid = result["unpaid"]
        outcome.crashed = result.get("crashed", 0)  # absent from an older worker's units
        outcome.unusable = result.get("unusable", 0)
        outcome.reasons = result.get("reasons") or {}  # absent from an older worker's units
        judge.usage.add(JobUsage(**result["usage"]))
    return outcomes


def tallied(done: dict[str, int]) -> JobUsage:
    """The usage a run's tally (the counts its units summed) stands for."""
    return JobUsage(input_tokens=done.get("inputTokens", 0),
                    output_tokens=done.get("outputTokens", 0), llm_calls=done.get("llmCalls", 0))


def shared_budget(svc: Services, judge: LlmRater, key: str) -> SharedBudget:
    """The judge's budget (from its metadata), kept under ``key`` in Redis."""
    own = judge.budget
    assert own is not None
    return SharedBudget(svc.redis, key, own.max_tokens, own.max_cost, own.pricing)


class LlmUnits:
    """One process's share of a split LLM judgment."""

    def __init__(self, svc: Services, judgment_id: str, head: dict[str, Any]) -> None:
        self.judge = LlmRater(svc, head["metadata"], head["index"])
        self.judge.vectors = frozenset(head.get("vectors") or ())  # for the cache keys
        if head.get("budgetKey"):
            self.judge.budget = shared_budget(svc, self.judge, head["budgetKey"])
        self.threads = svc.config.llm_concurrency
        self.cache = CacheWriter(self.judge.cache)

    def unit(self, payload: dict[str, Any]) -> dict[str, Any]:
        entry = QueryEntry(payload["queryText"], dict(payload.get("customFields") or {}))
        target = Target(entry, [(d, shown) for d, shown in payload["hits"]])
        outcome, usage = Outcome(), JobUsage()
        chunks = self.judge.plan(target)
        for chunk in chunks:
            try:
                answer = self.judge._chunk(entry, chunk)
            except JobFailed:  # a cancel included
                raise
            except Exception as exc:  # noqa: BLE001 - recorded as the query's failure
                answer = crash_answer(entry.key, exc)
            assert answer is not None  # only a job's own control cancels a call
            usage.add(answer.usage)
            self.cache.add(self.judge.record(outcome, entry, answer,
                                             [c.split("::", 1)[1] for c, _ in chunk]))
        return {"ratings": outcome.ratings, "rationales": outcome.rationales,
                "errors": outcome.errors, "chunks": len(chunks),
                "failedChunks": outcome.failed_chunks, "unpaid": outcome.unpaid,
                "crashed": outcome.crashed, "unusable": outcome.unusable,
                "reasons": outcome.reasons,
                "usage": {"input_tokens": usage.input_tokens,
                          "output_tokens": usage.output_tokens, "llm_calls": usage.llm_calls,
                          "latency_ms": usage.latency_ms},
                # progress.usage while the job runs, as an unsplit job shows it
                fanout.TALLY: {"llmCalls": usage.llm_calls, "inputTokens": usage.input_tokens,
                               "outputTokens": usage.output_tokens}}

    def close(self) -> None:
        self.cache.close()


fanout.KINDS[KIND] = LlmUnits
