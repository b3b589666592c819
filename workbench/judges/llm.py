"""The ``llm`` judge: a model grades each hit with a rubric (``workbench.judges.rubric``).

Hits are sent in batches of ``BATCH`` per call, with up to ``WORKBENCH_LLM_CONCURRENCY`` calls at
once. Every grade goes through the judgment cache like every LLM rating, keyed by the query (and
its reference answers), the hit's id and content, the model and the rubric's prompt, so asking
again costs nothing. A batch is asked down the structured-output ladder (``llm/structured.py``);
a model that gives nothing usable on any rung fails the judge (``JudgeFailed``).
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, TypeVar

from workbench.judges.base import (
    Hit,
    Judged,
    JudgeFailed,
    OptionError,
    Query,
    Setup,
    Usage,
    Verdict,
    check_options,
    number_option,
)
from workbench.judges.ratings import ParseFailure
from workbench.judges.rubric import RUBRICS, Grade, Rubric
from workbench.llm.base import (
    DEFAULT_MAX_OUTPUT,
    ChatModel,
    ChatRequest,
    FormatRefused,
    LLMError,
    ModelUnusable,
)
from workbench.llm.mlcommons import UnknownModel
from workbench.llm.pricing import pricing_of
from workbench.llm.registry import resolve
from workbench.llm.structured import Steps, answer_bound
from workbench.store.identity import carry
from workbench.store.judgment_cache import CacheKey, JudgmentCache, prompt_code

NAME = "llm"
BATCH = 20  # hits per call
# ``threshold`` is accepted (and checked) for requests written for every judge alike, but the
# model's grade decides relevance.
OPTIONS = ("modelId", "scale", "threshold")


def cache_key(query: Query, source: str, hit: Hit, model_id: str, prompt: str) -> CacheKey:
    """The judgment cache key of one grade (see the module docstring)."""
    text = query.text
    if query.references:
        refs: Any = query.references[0] if len(query.references) == 1 else list(query.references)
        text += "#" + json.dumps({"referenceAnswer": refs}, ensure_ascii=False,
                                 separators=(",", ":"))
    digest = hashlib.sha1(hit.content().encode()).hexdigest()[:16]
    return CacheKey(text, f"{source}::{hit.id}::{digest}", tuple(sorted(hit.fields)),
                    model_id, prompt)


@dataclass
class LLMJudge:
    model_id: str
    rubric: Rubric
    services: Any
    source: str = "hits"
    debug: bool = False
    name: str = NAME
    needs_reference: bool = False
    _trace: list[dict[str, Any]] = field(default_factory=list)

    def judge(self, query: Query, hits: Sequence[Hit]) -> Judged:
        svc = self.services
        model = resolve(self.model_id, svc.config, svc.models)
        cache = JudgmentCache(svc.client)
        prompt = prompt_code(self.rubric.system_prompt, self.rubric.code)
        keys = [cache_key(query, self.source, hit, self.model_id, prompt) for hit in hits]
        usage = Usage()
        grades: dict[str, Grade] = {}
        from_cache: set[str] = set()
        cached = cache.entries(keys)
        for hit, key in zip(hits, keys, strict=True):
            entry = cached.get(key)
            if entry is not None:
                grades[hit.id] = Grade(int(float(entry["rating"])), entry.get("confidence"),
                                       str(entry.get("rationale") or ""))
                from_cache.add(hit.id)
        usage.cache_hits = len(from_cache)
        todo = [hit for hit in hits if hit.id not in grades]
        unrated: dict[str, str] = {}  # why the model's grade of a hit was refused
        batches = [todo[i:i + BATCH] for i in range(0, len(todo), BATCH)]
        if batches:
            workers = min(len(batches), svc.config.llm_concurrency)
            with ThreadPoolExecutor(workers) as pool:
                answers = list(pool.map(carry(lambda b: self._grade(model, query, b)), batches))
            fresh: dict[CacheKey, dict[str, Any]] = {}
            for batch, (graded, refused, spent) in zip(batches, answers, strict=True):
                usage.add(spent)
                unrated.update(refused)
                for hit in batch:
                    grade = graded.get(hit.id)
                    if grade is None:
                        continue
                    grades[hit.id] = grade
                    fresh[keys[hits.index(hit)]] = {"rating": str(grade.grade),
                                                    "rationale": grade.justification,
                                                    "confidence": grade.confidence}
            cache.store(fresh)
        prices = pricing_of(model)
        if prices is not None:
            usage.cost = prices.cost(usage.input_tokens, usage.output_tokens)
        verdicts = []
        for hit in hits:
            grade = grades.get(hit.id)
            if grade is None:
                verdicts.append(Verdict(None, False, rationale=unrated.get(
                    hit.id, "the model did not rate this result")))
            else:
                verdicts.append(Verdict(float(grade.grade), self.rubric.relevant(grade.grade),
                                        confidence=grade.confidence,
                                        rationale=grade.justification,
                                        cached=hit.id in from_cache))
        return Judged(verdicts, usage, list(self._trace))

    def _grade(self, model: ChatModel, query: Query, batch: list[Hit],
               ) -> tuple[dict[str, Grade], dict[str, str], Usage]:
        """One batch's grades, and why the model's grade of other hits was refused."""
        usage = Usage()
        user = self.rubric.user_prompt(query.text, query.references,
                                       [(hit.id, hit.content()) for hit in batch])
        allowed = {hit.id for hit in batch}

        def graded(text: str) -> tuple[dict[str, Grade], dict[str, str]]:
            grades, refused = self.rubric.read(text, allowed)
            if not grades:
                raise ParseFailure("the answer rated none of the results" + (
                    f" ({next(iter(refused.values()))})" if refused else ""))
            return grades, refused

        trace = self._trace if self.debug else None
        grades, refused = ask(model, self.rubric.system_prompt, user, self.rubric.response_format(),
                              graded, usage, trace, "failed", [hit.id for hit in batch],
                              self.services.config.llm_timeout,
                              answer_bound(self.rubric.sample_answer([h.id for h in batch])))
        return grades, refused, usage


T = TypeVar("T")


def ask(model: ChatModel, system: str, user: str, response_format: dict[str, Any],
        read: Callable[[str], T], usage: Usage, trace: list[dict[str, Any]] | None,
        failed: str, ids: Sequence[str] = (), wait: float = 0.0,
        max_output: int = DEFAULT_MAX_OUTPUT) -> T:
    """One question to a model: down the structured-output ladder (``llm/structured.py``): a
    refused format steps down one rung; an unusable answer or another failure goes straight to
    the plain rung, as the plugin falls back; each rung is asked once; it starts at the rung
    the model is known to accept, or waits up to ``wait`` seconds for another caller finding
    that out (``Steps``); ``ids`` are the hits asked about, ``max_output`` bounds each answer.
    Every
    call's tokens, count and time go to ``usage`` (and, with ``trace``, the exchange); ``read``
    turns an answer into the result or raises ``ParseFailure``. A model that gives nothing
    usable either way is ``JudgeFailed`` ("LLM [id] <failed>: <reason>"); an unknown or unusable
    model is raised as it is (the request's 400), not as the LLM failing."""
    reason = "no usable answer"
    with Steps(response_format, model.formats, ids, wait) as steps:
        for form in steps:
            started = time.perf_counter()
            try:
                result = model.chat(ChatRequest(system, user, form, max_output))
            except (UnknownModel, ModelUnusable):
                raise
            except LLMError as exc:
                reason = exc.reason
                if isinstance(exc, FormatRefused):
                    steps.refused(form)
                else:
                    steps.to_plain()
                continue
            finally:
                usage.calls += 1
                usage.latency_ms += (time.perf_counter() - started) * 1000
            steps.accepted(form)
            usage.input_tokens += result.input_tokens
            usage.output_tokens += result.output_tokens
            if trace is not None:
                trace.append({"structured": form is not None, "user": user,
                              "answer": result.text})
            try:
                return read(result.text)
            except ParseFailure as exc:
                reason = result.why_unusable(str(exc))
                steps.to_plain()
    raise JudgeFailed(f"LLM [{model.model_id}] {failed}: {reason}")


def build(setup: Setup) -> LLMJudge:
    check_options(setup, OPTIONS, NAME)
    number_option(setup, "threshold", 0.5, 0.0, 1.0)
    model_id = setup.options.get("modelId")
    if model_id is None or (isinstance(model_id, str) and not model_id.strip()):
        raise OptionError("modelId", "modelId is required for the llm judge")
    if not isinstance(model_id, str):
        raise OptionError("modelId", "Field 'modelId' must be a string")
    scale = setup.options.get("scale", "0-3")
    if not isinstance(scale, str) or scale not in RUBRICS:
        raise OptionError("scale", f"scale must be one of: {', '.join(RUBRICS)}, "
                                   f"got: {json.dumps(scale, default=str)}")
    return LLMJudge(model_id, RUBRICS[scale], setup.services, setup.source, setup.debug)
