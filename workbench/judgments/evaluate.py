"""``_evaluate``: judge one query's results on the spot and score the list.

The judge is an LLM applying the 0-3 checklist rubric (ratings of 2 and 3 are relevant) or a
reference judge (``token_overlap``, ``semantic``) comparing each result with the query's
reference answer (0/1). LLM grades go through the judgment cache like every LLM rating.
"""

from __future__ import annotations

import hashlib
import json
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from workbench.judgments import reference, rubric
from workbench.judgments.llm_parse import ParseFailure
from workbench.llm.base import ChatModel, ChatRequest, LLMError
from workbench.llm.mlcommons import UnknownModel
from workbench.llm.registry import resolve
from workbench.metrics import average_precision, ndcg, precision, reciprocal_rank
from workbench.services import Services
from workbench.store.identity import carry
from workbench.store.judgment_cache import CacheKey, JudgmentCache, prompt_code

BATCH = 20  # results per LLM call
LLM_JUDGE = "llm"
JUDGES = (LLM_JUDGE, *reference.JUDGES)


class JudgeFailed(Exception):
    """The LLM could not be reached or answered nothing usable (a 502 naming the model)."""

    def __init__(self, model_id: str, reason: str) -> None:
        super().__init__(f"LLM [{model_id}] failed: {reason}")
        self.model_id = model_id


@dataclass(frozen=True)
class Result:
    """One result to judge: its id and the fields shown to the judge."""

    doc_id: str
    fields: dict[str, Any]

    def content(self) -> str:
        return json.dumps(self.fields, ensure_ascii=False, sort_keys=True,
                          separators=(",", ":"), default=str)

    def text(self) -> str:
        """Plain text of the field values, for the reference judges."""
        return " ".join(_text(v) for v in self.fields.values()).strip()


def _text(value: Any) -> str:
    if isinstance(value, list):
        return " ".join(_text(v) for v in value)
    if isinstance(value, dict):
        return " ".join(_text(v) for v in value.values())
    return "" if value is None else str(value)


@dataclass
class Request:
    query_text: str
    reference_answer: str | None
    results: list[Result]
    source: str  # index name, or "hits" for pasted results (part of the cache key)
    k: int
    judge: str
    model_id: str | None = None
    threshold: float | None = None
    debug: bool = False


@dataclass
class Usage:
    input_tokens: int = 0
    output_tokens: int = 0
    llm_calls: int = 0
    cache_hits: int = 0

    def add(self, other: Usage) -> None:
        self.input_tokens += other.input_tokens
        self.output_tokens += other.output_tokens
        self.llm_calls += other.llm_calls

    def as_dict(self) -> dict[str, int]:
        return {"inputTokens": self.input_tokens, "outputTokens": self.output_tokens,
                "llmCalls": self.llm_calls, "cacheHits": self.cache_hits}


@dataclass
class Rated:
    rating: float | None
    relevant: bool
    score: float | None = None
    confidence: float | None = None
    justification: str | None = None
    cached: bool = False


@dataclass
class Trace:
    calls: list[dict[str, Any]] = field(default_factory=list)


def evaluate(svc: Services, req: Request) -> dict[str, Any]:
    usage, trace = Usage(), Trace()
    top = req.results[: req.k]
    if req.judge == LLM_JUDGE:
        assert req.model_id is not None
        rated = _llm(svc, req, top, usage, trace)
    else:
        rated = _reference(req, top)
    hits = []
    for rank, (result, item) in enumerate(zip(top, rated, strict=True), start=1):
        out: dict[str, Any] = {"rank": rank, "id": result.doc_id, "rating": item.rating,
                               "relevant": item.relevant}
        if req.judge == LLM_JUDGE:
            out.update(confidence=item.confidence, justification=item.justification,
                       cached=item.cached)
        else:
            out["score"] = item.score
        hits.append(out)
    answer: dict[str, Any] = {
        "queryText": req.query_text, "judge": req.judge, "k": req.k, "hits": hits,
        "metrics": _metrics(rated, req.k), "usage": usage.as_dict(),
    }
    if req.reference_answer is not None:
        answer["referenceAnswer"] = req.reference_answer
    if req.judge == LLM_JUDGE:
        answer["modelId"] = req.model_id
    else:
        answer["threshold"] = req.threshold
    if req.debug:
        answer["debug"] = {"results": [{"id": r.doc_id, "fields": r.fields} for r in top],
                           "llmCalls": trace.calls}
    return answer


def _metrics(rated: list[Rated], k: int) -> dict[str, float]:
    """NDCG@k (graded ratings, exponential gain), MAP@k, MRR and Precision@k (relevant flags)
    over the judged list; the ideal ranking is made of the same results."""
    ratings = np.array([r.rating or 0.0 for r in rated], dtype=np.float64)
    relevant = np.array([r.relevant for r in rated], dtype=bool)
    ideal = np.sort(ratings)[::-1][:k]
    n_relevant = int(relevant.sum())
    return {
        f"NDCG@{k}": float(ndcg(ratings, ideal)),
        f"MAP@{k}": float(average_precision(relevant, n_relevant)),
        "MRR": float(reciprocal_rank(relevant)),
        f"Precision@{k}": float(precision(relevant)),
    }


def _reference(req: Request, top: list[Result]) -> list[Rated]:
    assert req.reference_answer is not None
    verdicts = reference.judge(req.judge, req.reference_answer, [r.text() for r in top],
                               req.threshold)
    return [Rated(float(rating), rating == 1, score=score) for rating, score in verdicts]


def _cache_key(req: Request, result: Result, model_id: str, prompt: str) -> CacheKey:
    query = req.query_text if not req.reference_answer else req.query_text + "#" + json.dumps(
        {"referenceAnswer": req.reference_answer}, ensure_ascii=False, separators=(",", ":"))
    digest = hashlib.sha1(result.content().encode()).hexdigest()[:16]
    return CacheKey(query, f"{req.source}::{result.doc_id}::{digest}",
                    tuple(sorted(result.fields)), model_id, prompt)


def _llm(svc: Services, req: Request, top: list[Result], usage: Usage,
         trace: Trace) -> list[Rated]:
    model_id = str(req.model_id)
    model = resolve(model_id, svc.config, svc.models)
    cache = JudgmentCache(svc.client)
    prompt = prompt_code(rubric.SYSTEM_PROMPT, rubric.RUBRIC_TYPE)
    keys = [_cache_key(req, r, model_id, prompt) for r in top]
    cached = cache.entries(keys)
    grades: dict[str, rubric.Grade] = {}
    from_cache: set[str] = set()
    for result, key in zip(top, keys, strict=True):
        entry = cached.get(key)
        if entry is not None:
            grades[result.doc_id] = rubric.Grade(int(float(entry["rating"])),
                                                 entry.get("confidence"),
                                                 str(entry.get("rationale") or ""))
            from_cache.add(result.doc_id)
    usage.cache_hits = len(from_cache)
    todo = [r for r in top if r.doc_id not in grades]
    batches = [todo[i:i + BATCH] for i in range(0, len(todo), BATCH)]
    if batches:
        with ThreadPoolExecutor(min(len(batches), svc.config.llm_concurrency)) as pool:
            answers = list(pool.map(carry(lambda b: _grade(model, req, b, trace)), batches))
        fresh: dict[CacheKey, dict[str, Any]] = {}
        for batch, (graded, spent) in zip(batches, answers, strict=True):
            usage.add(spent)
            for result in batch:
                grade = graded.get(result.doc_id)
                if grade is None:
                    continue
                grades[result.doc_id] = grade
                fresh[keys[top.index(result)]] = {"rating": str(grade.grade),
                                                  "rationale": grade.justification,
                                                  "confidence": grade.confidence}
        cache.store(fresh)
    out = []
    for result in top:
        grade = grades.get(result.doc_id)
        if grade is None:
            out.append(Rated(None, False, justification="the model did not rate this result"))
        else:
            out.append(Rated(float(grade.grade), grade.relevant, confidence=grade.confidence,
                             justification=grade.justification,
                             cached=result.doc_id in from_cache))
    return out


def _grade(model: ChatModel, req: Request, batch: list[Result],
           trace: Trace) -> tuple[dict[str, rubric.Grade], Usage]:
    """One batch: structured output first, then once without it; an LLM that fails both ways
    fails the request (502)."""
    usage = Usage()
    user = rubric.user_prompt(req.query_text, req.reference_answer,
                              [(r.doc_id, r.content()) for r in batch])
    allowed = {r.doc_id for r in batch}
    reason = "no usable answer"
    for response_format in (rubric.response_format(), None):
        try:
            result = model.chat(ChatRequest(rubric.SYSTEM_PROMPT, user, response_format))
        except UnknownModel:
            raise  # not the LLM failing: the request named no model (a 400)
        except LLMError as exc:
            usage.llm_calls += 1
            reason = exc.reason
            continue
        usage.llm_calls += 1
        usage.input_tokens += result.input_tokens
        usage.output_tokens += result.output_tokens
        if req.debug:
            trace.calls.append({"structured": response_format is not None, "user": user,
                                "answer": result.text})
        try:
            grades = rubric.parse(result.text, allowed)
        except ParseFailure as exc:
            reason = str(exc)
            continue
        if grades:
            return grades, usage
        reason = "the answer rated none of the results"
    raise JudgeFailed(model.model_id, reason)
