"""LLM_JUDGMENT: retrieve, reuse, chunk, ask the model, parse (docs/contract.md, "LLM judgments";
docs/algorithms.md, "LLM judgments").

Every chunk of every query becomes one task of a thread pool bounded by
``WORKBENCH_LLM_CONCURRENCY``, so a job's wall time approaches calls x latency / concurrency.
Ratings already known (an ``existingJudgments`` list, or the judgment cache) are not asked again.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable
from concurrent.futures import Future, ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from workbench.jobs.base import JobFailed, job_state
from workbench.jobs.control import JobControl
from workbench.judges import ratings as parse
from workbench.judgments import pooling
from workbench.judgments.llm import chunking, cost, prompt
from workbench.judgments.retrieval import (
    Target,
    load,
    load_configurations,
    local_indices,
    retrieve,
    target_of,
)
from workbench.llm.base import ChatModel, ChatRequest, FormatRefused, LLMError, ModelUnusable
from workbench.llm.mlcommons import UnknownModel
from workbench.llm.pricing import Pricing, pricing_of
from workbench.llm.registry import resolve
from workbench.llm.structured import Steps, answer_bound
from workbench.querysets.entries import QueryEntry, read_entries
from workbench.services import Services
from workbench.store.identity import carry
from workbench.store.indices import JUDGMENT_INDEX, QUERY_SET_INDEX
from workbench.store.judgment_cache import CacheKey, JudgmentCache, prompt_code
from workbench.store.vector_fields import vector_fields

log = logging.getLogger(__name__)

RATIONALE_INSTRUCTION = (
    " For every hit also give a short \"rationale\": one sentence saying why it got its rating,"
    " as a \"rationale\" string next to \"rating_score\"."
)


def response_format_with_rationale(rating_type: str) -> dict[str, Any]:
    """The structured-output schema (docs/algorithms.md, "Calling the model") with a required
    ``rationale`` string in each rating."""
    schema = prompt.response_format(rating_type)
    item = schema["json_schema"]["schema"]["properties"]["ratings"]["items"]
    item["properties"]["rationale"] = {"type": "string"}
    item["required"] = [*item["required"], "rationale"]
    return schema


@dataclass
class Outcome:
    ratings: dict[str, str] = field(default_factory=dict)
    rationales: dict[str, str] = field(default_factory=dict)
    sent: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    chunks: int = 0
    failed_chunks: int = 0
    crashed: int = 0  # chunks that broke outside the model's answer (a fault, logged)
    unusable: int = 0  # chunks whose model cannot be called as set up (unknown, no key...)
    unpaid: list[str] = field(default_factory=list)  # docIds left unrated by the budget
    reasons: dict[str, str] = field(default_factory=dict)  # docId -> why the model left it


@dataclass
class JobUsage:
    """Tokens and calls of a judgment; ``latency_ms`` sums the wall time of every LLM call
    (request to answer, the call's transport retries included), so with concurrent calls it
    exceeds the job's elapsed time: it is the model time paid for, not how long the job took."""

    input_tokens: int = 0
    output_tokens: int = 0
    llm_calls: int = 0
    cached_ratings: int = 0
    reused_ratings: int = 0
    latency_ms: int = 0

    def paid(self) -> JobUsage:
        """The part of this usage that a model was paid for (calls, tokens, their time), without
        the ratings taken from a cache or reused."""
        return JobUsage(self.input_tokens, self.output_tokens, self.llm_calls,
                        latency_ms=self.latency_ms)

    def add(self, other: JobUsage) -> None:
        self.input_tokens += other.input_tokens
        self.output_tokens += other.output_tokens
        self.llm_calls += other.llm_calls
        self.cached_ratings += other.cached_ratings
        self.reused_ratings += other.reused_ratings
        self.latency_ms += other.latency_ms

    def as_metadata(self, pricing: Pricing | None = None) -> dict[str, Any]:
        """``metadata.usage``; ``cost`` only when the model has prices."""
        out: dict[str, Any] = {
            "inputTokens": self.input_tokens, "outputTokens": self.output_tokens,
            "totalTokens": self.input_tokens + self.output_tokens,
            "llmCalls": self.llm_calls, "cachedRatings": self.cached_ratings,
            "reusedRatings": self.reused_ratings, "latencyMs": self.latency_ms}
        if pricing is not None:
            out["cost"] = pricing.cost(self.input_tokens, self.output_tokens)
        return out

    @classmethod
    def from_metadata(cls, value: Any) -> JobUsage:
        """Read back ``metadata.usage``, including documents written before a field existed."""
        value = value or {}
        return cls(int(value.get("inputTokens", 0)), int(value.get("outputTokens", 0)),
                   int(value.get("llmCalls", 0)), int(value.get("cachedRatings", 0)),
                   int(value.get("reusedRatings", 0)), int(value.get("latencyMs", 0)))


@dataclass
class ChunkAnswer:
    """One chunk's ratings (and rationales), or the ``error`` that failed it; ``refused`` says
    why the answer's rating of a document was not usable (``ratings.read_ratings``)."""

    ratings: dict[str, str]
    rationales: dict[str, str]
    error: str | None
    usage: JobUsage
    refused: dict[str, str] = field(default_factory=dict)
    crashed: bool = False  # the work around the call broke, not the model
    unusable: bool = False  # the model cannot be called as it is set up: no query can succeed


def crash_answer(query: str, exc: Exception) -> ChunkAnswer:
    """A chunk whose processing raised unexpectedly: its documents fail with the error, the
    traceback goes to the log (a fault of the workbench, not of the model)."""
    log.error("rating a chunk of query %r failed unexpectedly", query, exc_info=exc)
    return ChunkAnswer({}, {}, f"unexpected error: {type(exc).__name__}: {exc}", JobUsage(),
                       crashed=True)


#: the reason of a document the model's answer did not rate
NOT_RATED = "the model did not rate this document"
# The error of a chunk the budget did not let start (its documents stay unrated).
BUDGET_STOP = "\x00budget"


class CacheWriter:
    """Writes new ratings to the judgment cache in the background while other calls run."""

    def __init__(self, cache: JudgmentCache, batch: int = 200) -> None:
        self.cache = cache
        self.batch = batch
        self.buffer: dict[CacheKey, dict[str, Any]] = {}
        self.pool = ThreadPoolExecutor(1, thread_name_prefix="cache")
        self.pending: list[Future[None]] = []
        self.lock = threading.Lock()  # added to from several threads in a split job

    def add(self, ratings: dict[CacheKey, dict[str, Any]]) -> None:
        with self.lock:
            self.buffer.update(ratings)
            if len(self.buffer) >= self.batch:
                self._send()

    def _send(self) -> None:
        if self.buffer:
            ratings, self.buffer = self.buffer, {}
            self.pending.append(self.pool.submit(carry(self.cache.store), ratings))

    def close(self) -> None:
        """Write what is left and wait; a failed write fails the job (the ratings are paid)."""
        with self.lock:
            self._send()
        try:
            for future in self.pending:
                future.result()
        finally:
            self.pool.shutdown(wait=True)


class LlmRater:
    """The model, prompt and cache settings of one judgment, and the calls it makes."""

    def __init__(self, svc: Services, metadata: dict[str, Any], index: str,
                 control: JobControl | None = None) -> None:
        self.svc = svc
        self.control = control
        self.metadata = metadata
        self.index = index
        self.rating_type = metadata.get("llmJudgmentRatingType") or prompt.SCORE0_1
        self.template = metadata.get("promptTemplate") or prompt.DEFAULT_TEMPLATE
        self.token_limit = int(metadata.get("tokenLimit") or 4000)
        self.context_fields = list(metadata.get("contextFields") or [])
        #: vector fields left out of every document when no context fields are named
        #: (``find_vectors`` sets them once per run)
        self.vectors: frozenset[str] = frozenset()
        self.model_id = str(metadata["modelId"])
        self.model: ChatModel = resolve(self.model_id, svc.config, svc.models)
        self.cache = JudgmentCache(svc.client)
        self.read_cache = not metadata.get("overwriteCache", False)
        self.rationale = bool(metadata.get("includeRationale"))
        suffix = "+rationale" if self.rationale else ""
        self.prompt = prompt_code(self.template, self.rating_type + suffix)
        self.system = prompt.system_prompt(self.rating_type) + (
            RATIONALE_INSTRUCTION if self.rationale else "")
        self.usage = JobUsage()
        self.pricing = pricing_of(self.model)
        self.budget = cost.Budget.of(metadata, self.pricing)
        if control is not None:
            # The job's own rater (a split job's helpers have none): what an earlier attempt of
            # this job paid for before an outage made it start again is paid for all the same.
            state = job_state()
            self.usage.add(state["llmPaid"].paid() if "llmPaid" in state else JobUsage())
            state["llmPaid"] = self.usage
            control.usage = lambda: {"llmCalls": self.usage.llm_calls,
                                     "inputTokens": self.usage.input_tokens,
                                     "outputTokens": self.usage.output_tokens}
            earlier = JobUsage.from_metadata(metadata.get("usage"))  # a retry's judgment's

            def spent() -> dict[str, Any]:
                total = JobUsage()
                total.add(earlier)
                total.add(self.usage)
                return self.usage_metadata(total)

            control.spent = spent

    def cancelled(self) -> bool:
        return self.control is not None and self.control.cancelled()

    def find_vectors(self, indices: Iterable[str]) -> None:
        """Read which fields of ``indices`` are vectors, when the prompt is to leave them out."""
        if not self.context_fields:
            self.vectors = vector_fields(self.svc.client, indices)

    def describe(self, source: dict[str, Any]) -> str:
        """A document as the prompt shows it (``prompt.context_string``)."""
        return prompt.context_string(source, self.context_fields, self.vectors)

    def key(self, entry: QueryEntry, doc_id: str) -> CacheKey:
        return CacheKey(entry.key, f"{self.index}::{doc_id}", tuple(self.context_fields),
                        self.model_id, self.prompt, tuple(sorted(self.vectors)))

    def use_cache(self, targets: Iterable[Target]) -> None:
        """Fill ``known`` from the cache for every hit not already known."""
        if not self.read_cache:
            return
        wanted = {self.key(t.entry, doc_id): (t, doc_id)
                  for t in targets for doc_id, _ in t.hits if doc_id not in t.known}
        for key, cached in self.cache.entries(list(wanted)).items():
            target, doc_id = wanted[key]
            target.known[doc_id] = str(cached["rating"])
            if cached.get("rationale"):
                target.rationales[doc_id] = str(cached["rationale"])
            self.usage.cached_ratings += 1

    def plan(self, target: Target) -> list[list[tuple[str, str]]]:
        """The chunks (prompts) the hits not yet known of a target are sent in."""
        todo = [(f"{self.index}::{d}", ctx) for d, ctx in target.hits if d not in target.known]
        if not todo:
            return []
        return chunking.chunk_hits(self.system, self.template, target.entry.query_text,
                                   target.entry.custom_fields, todo, self.token_limit)

    def user_message(self, entry: QueryEntry, chunk: list[tuple[str, str]]) -> str:
        return prompt.user_content(self.template, entry.query_text, entry.custom_fields,
                                   prompt.hits_json(chunk))

    @cached_property
    def tokenizer(self) -> cost.Tokenizer:
        """How this judgment's calls are counted (the model server's tokenizer, if any);
        found when first needed, as only budgets and ``_estimate`` count."""
        return cost.tokenizer_of(self.model)

    def call_tokens(self, user: str, chunk: list[tuple[str, str]]) -> tuple[int, int]:
        """Counted input and estimated output tokens of one call for ``chunk``."""
        count = self.tokenizer.count
        return (cost.prompt_tokens(self.system, user, count),
                cost.answer_tokens([c for c, _ in chunk], self.rating_type, self.rationale,
                                   count))

    def usage_metadata(self, usage: JobUsage | None = None) -> dict[str, Any]:
        return (usage or self.usage).as_metadata(self.pricing)

    def rate(self, targets: list[Target]) -> list[Outcome]:
        """Ask the model about every unknown hit of every target, chunk by chunk, in parallel.
        Progress counts a target (query) done when all its chunks are answered; a cancel stops
        submitting, lets only the calls in flight finish and raises ``Cancelled``."""
        outcomes = [Outcome() for _ in targets]
        waiting = [0] * len(targets)
        cache = CacheWriter(self.cache)
        if self.control is not None:  # written while the first calls go, awaited at the end
            self.control.start(len(targets), "rating", wait=False)
        with ThreadPoolExecutor(self.svc.config.llm_concurrency,
                                thread_name_prefix="llm") as pool:
            # Chunks are submitted as soon as they are cut, so tokenising overlaps the calls.
            futures: dict[Future[ChunkAnswer | None], int] = {}
            chunk_ids: dict[Future[ChunkAnswer | None], list[str]] = {}
            ready = 0
            for number, target in enumerate(targets):
                outcomes[number].sent = [d for d, _ in target.hits if d not in target.known]
                chunks = self.plan(target)
                outcomes[number].chunks = len(chunks)
                waiting[number] = len(chunks)
                if not chunks:
                    ready += 1
                for chunk in chunks:
                    future = pool.submit(carry(self._chunk), target.entry, chunk)
                    futures[future] = number
                    chunk_ids[future] = [c.split("::", 1)[1] for c, _ in chunk]
            if self.control is not None and ready:
                self.control.advance(ready)
            counted: set[Future[ChunkAnswer | None]] = set()

            def keep(done: Future[ChunkAnswer | None], paid: ChunkAnswer) -> None:
                """What a call brought: its usage, and its ratings in the cache (also after a
                cancel: a job handed over to another worker, jobs/handover.py, reads them)."""
                self.usage.add(paid.usage)
                cache.add(self.record(outcomes[futures[done]], targets[futures[done]].entry,
                                      paid, chunk_ids[done]))

            try:
                for future in as_completed(futures):
                    number = futures[future]
                    counted.add(future)
                    try:
                        answer = future.result()
                    except JobFailed:  # a cancel included
                        raise
                    except Exception as exc:  # noqa: BLE001 - recorded as the query's failure
                        answer = crash_answer(targets[number].entry.key, exc)
                    if answer is None or self.cancelled():  # what was paid for is kept
                        if answer is not None:
                            keep(future, answer)
                        error = self._cancel(futures)
                        self._count_in_flight(futures, counted, keep)
                        raise error
                    keep(future, answer)
                    waiting[number] -= 1
                    if self.control is not None and waiting[number] == 0:
                        self.control.advance()
            except BaseException as exc:
                if not isinstance(exc, JobFailed):  # interrupted (Celery's soft time limit):
                    for future in futures:  # the chunks not started are not waited for
                        future.cancel()
                raise
            finally:
                cache.close()  # what was paid for is kept, cancelled or not
                if self.control is not None:
                    self.control.settle()
        return outcomes

    def record(self, outcome: Outcome, entry: QueryEntry, answer: ChunkAnswer,
               doc_ids: list[str]) -> dict[CacheKey, dict[str, Any]]:
        """Fold one chunk's answer (for ``doc_ids``) into its query's outcome; returns the
        judgment cache entries to write for it."""
        if answer.error is None:
            outcome.ratings.update(answer.ratings)
            outcome.rationales.update(answer.rationales)
            for doc_id in doc_ids:
                if doc_id not in answer.ratings:
                    outcome.reasons[doc_id] = answer.refused.get(doc_id, NOT_RATED)
            return {self.key(entry, d): {"rating": r, "rationale": answer.rationales.get(d)}
                    for d, r in answer.ratings.items()}
        if answer.error == BUDGET_STOP:
            outcome.unpaid.extend(doc_ids)
        else:
            outcome.errors.append(answer.error)
            outcome.failed_chunks += 1
            outcome.crashed += answer.crashed
            outcome.unusable += answer.unusable
            outcome.reasons.update(dict.fromkeys(doc_ids, answer.error))
        return {}

    def _count_in_flight(self, futures: dict[Future[ChunkAnswer | None], int],
                         counted: set[Future[ChunkAnswer | None]],
                         keep: Callable[[Future[ChunkAnswer | None], ChunkAnswer], None],
                         ) -> None:
        """Wait for the calls under way when the job was cancelled and ``keep`` what they
        brought: they are paid for, and the judgment's usage and the cache keep them."""
        for future in futures:
            if future in counted or future.cancelled():
                continue
            try:
                answer = future.result()
            except Exception:  # noqa: BLE001 - a call that failed cost nothing countable
                continue
            if answer is not None:
                keep(future, answer)

    def _cancel(self, futures: dict[Future[ChunkAnswer | None], int]) -> Exception:
        """Drop the chunks not started yet; the ``Cancelled`` to raise."""
        for future in futures:
            future.cancel()
        assert self.control is not None
        return self.control.error()

    def _settle(self, held: cost.Reservation | None, input_tokens: int = 0,
                output_tokens: int = 0) -> None:
        if held is not None and self.budget is not None:
            self.budget.settle(held, input_tokens, output_tokens)

    def _chunk(self, entry: QueryEntry, chunk: list[tuple[str, str]]) -> ChunkAnswer | None:
        """One chunk down the structured-output ladder (``llm/structured.py``; docs/algorithms.md,
        "Calling the model"); None when the job was cancelled before a call. An answer whose
        every rating was off the scale still answers the chunk when no later rung does
        better: its documents become failures with the reason (for ``_retry``), not a failed
        query."""
        usage = JobUsage()
        user = self.user_message(entry, chunk)
        # Counted only for a budget's reservation (tokenising is a large part of a call's CPU).
        expected = self.call_tokens(user, chunk) if self.budget is not None else (0, 0)
        allowed = {composite.split("::", 1)[1] for composite, _ in chunk}
        error = ""
        off_scale: dict[str, str] = {}  # why the ratings of an answer were refused
        structured = (response_format_with_rationale(self.rating_type) if self.rationale
                      else prompt.response_format(self.rating_type))
        bound = answer_bound(cost.sample_answer([c for c, _ in chunk], self.rating_type,
                                                self.rationale))
        with Steps(structured, self.model.formats, [composite for composite, _ in chunk],
                   self.svc.config.llm_timeout, self.cancelled,
                   prompt.grammar_values(self.rating_type)) as steps:
            for response_format in steps:
                if self.cancelled():
                    return None
                held = None
                if self.budget is not None:
                    held = self.budget.reserve(*expected)
                    if held is None:
                        return ChunkAnswer({}, {}, BUDGET_STOP, usage)
                started = time.monotonic()
                try:
                    result = self.model.chat(ChatRequest(self.system, user, response_format,
                                                         bound))
                except LLMError as exc:
                    usage.latency_ms += round((time.monotonic() - started) * 1000)
                    self._settle(held)  # a failed call reports (and is billed) nothing
                    error = str(exc)
                    usage.llm_calls += 1
                    if isinstance(exc, (UnknownModel, ModelUnusable)):
                        return ChunkAnswer({}, {}, error, usage, unusable=True)
                    if isinstance(exc, FormatRefused):
                        steps.refused(response_format)
                    else:
                        steps.to_plain()
                    continue
                steps.accepted(response_format)
                usage.latency_ms += round((time.monotonic() - started) * 1000)
                self._settle(held, result.input_tokens, result.output_tokens)
                usage.llm_calls += 1
                usage.input_tokens += result.input_tokens
                usage.output_tokens += result.output_tokens
                try:
                    ratings, refused = parse.read_ratings(result.text, self.rating_type,
                                                          allowed)
                except parse.ParseFailure as exc:
                    error = result.why_unusable(
                        f"could not read the answer of model {self.model_id}: {exc}")
                    steps.to_plain()
                    continue
                if ratings:
                    rationales = (parse.parse_rationales(result.text, set(ratings))
                                  if self.rationale else {})
                    return ChunkAnswer(ratings, rationales, None, usage, refused)
                off_scale = refused or off_scale
                error = result.why_unusable(
                    f"model {self.model_id} returned no usable ratings"
                    + (f" ({next(iter(refused.values()))})" if refused else ""))
                steps.to_plain()
        if off_scale:
            return ChunkAnswer({}, {}, None, usage, off_scale)
        return ChunkAnswer({}, {}, error, usage)


def _existing_ratings(svc: Services, ids: list[str]) -> list[dict[str, dict[str, str]]]:
    """query key -> docId -> rating, per reused judgment, in the order given."""
    out = []
    for judgment_id in ids:
        doc = load(svc, JUDGMENT_INDEX, judgment_id, "Judgment")
        out.append({e["query"]: {r["docId"]: str(r["rating"]) for r in e.get("ratings") or []}
                    for e in doc.get("judgmentRatings") or []})
    return out


def rating_entries(target: Target, outcome: Outcome) -> list[dict[str, Any]]:
    """``{"docId", "rating"[, "rationale"]}`` for every rated hit, in hit order."""
    rated = {**target.known, **outcome.ratings}
    reasons = {**target.rationales, **outcome.rationales}
    out = []
    for doc_id, _ in target.hits:
        if doc_id in rated:
            item = {"docId": doc_id, "rating": rated[doc_id]}
            if doc_id in reasons:
                item["rationale"] = reasons[doc_id]
            out.append(item)
    return out


def failure_list(missing: Iterable[str], unpaid: Iterable[str], budget_reason: str | None,
                 reasons: dict[str, str]) -> list[dict[str, str]]:
    """``failures`` of one query, each with its reason: the budget's for documents it left
    unrated, else why the model left it (``Outcome.reasons``)."""
    left = set(unpaid)
    out = []
    for doc_id in missing:
        reason = budget_reason if doc_id in left and budget_reason else reasons.get(doc_id)
        out.append({"docId": doc_id, "reason": reason} if reason else {"docId": doc_id})
    return out


def assemble(targets: list[Target], outcomes: list[Outcome], budget_reason: str | None = None,
             ) -> tuple[list[dict[str, Any]], int, str | None]:
    """The ``judgmentRatings`` entries, the number of failed queries and the last reason, by the
    plugin's failure policy (docs/contract.md, "LLM judgments: failures"): every query keeps an
    entry. Its ``ratings`` are those it has (reused, cached, or from the chunks that were
    answered) and every document sent to the model that got no usable rating is listed under
    ``failures`` with its reason, for ``_retry``; a query with ``failures`` is a failed query,
    whether the model failed on it wholly or in part or the budget stopped it. A query whose
    searches failed or found nothing has no ratings and no failures: nothing was sent, there
    is nothing to retry, and it counts as successful (its search error is logged)."""
    entries, failed, reason = [], 0, None
    for target, outcome in zip(targets, outcomes, strict=True):
        if target.search_error is not None:
            log.info("query %r: search failed, kept without ratings: %s", target.entry.key,
                     target.search_error)
        entry: dict[str, Any] = {"query": target.entry.key,
                                 "ratings": rating_entries(target, outcome)}
        missing = [d for d in outcome.sent if d not in outcome.ratings]
        if missing:
            failures = failure_list(missing, outcome.unpaid, budget_reason, outcome.reasons)
            entry["failures"] = failures
            failed += 1
            reason = (outcome.errors[-1] if outcome.errors else
                      next((f["reason"] for f in failures if "reason" in f), NOT_RATED))
        entries.append(entry)
    return entries, failed, reason


def prepare(svc: Services, metadata: dict[str, Any], control: JobControl | None = None,
            ) -> tuple[LlmRater, list[QueryEntry], list[Target]]:
    """Everything before the first LLM call: the query set and configurations, the searches
    (with ``expandCoverage``, the pool of the hybrid sub-queries: judgments/pooling.py), reused
    ``existingJudgments`` ratings and the judgment cache. ``_estimate`` runs this too."""
    query_set = load(svc, QUERY_SET_INDEX, metadata["querySetId"], "QuerySet")
    configs, remote = load_configurations(svc, metadata)
    entries = read_entries(query_set)
    judge = LlmRater(svc, metadata, target_of(configs[0]), control)
    judge.find_vectors(local_indices(configs))
    if control is not None:
        # written while the searches go (judgments/runner.py settles it before the last write)
        control.start(len(entries), "searching", wait=False)
        control.check()
    targets = retrieve(svc, entries, configs, int(metadata.get("size", 10)), judge.describe,
                       bool(metadata.get(pooling.FLAG)), remote)
    for reused in _existing_ratings(svc, list(metadata.get("existingJudgments") or [])):
        for target in targets:
            for doc_id, rating in (reused.get(target.entry.key) or {}).items():
                if doc_id not in target.known and any(d == doc_id for d, _ in target.hits):
                    target.known[doc_id] = rating
                    judge.usage.reused_ratings += 1
    judge.use_cache(targets)
    return judge, entries, targets
