"""``POST /judgments/_estimate``: what an LLM judgment would cost, before it runs.

It does what the job does before its first LLM call (``job.prepare``: searches, reuse of
``existingJudgments``, the judgment cache with ``overwriteCache`` honoured) and cuts the same
prompts (``LlmRater.plan``), counting each call as the job's budget does (``LlmRater.call_tokens``).
No model is called (a self-hosted server may be asked to count tokens: ``tokenizer`` says whose
tokenizer counted). The figures assume every call answers at the first try (no fallback call
without structured output); input tokens are exact for a provider that counts as OpenAI does,
output tokens are the size of the structured answer for the hits asked about.
"""

from __future__ import annotations

from typing import Any

from workbench.judgments.llm import job
from workbench.judgments.retrieval import Target
from workbench.services import Services


def estimate(svc: Services, metadata: dict[str, Any]) -> dict[str, Any]:
    """The flat estimate of a validated LLM_JUDGMENT's metadata. What would end the job
    ``ERROR`` before any call (a search pipeline that does not exist) raises ``JobFailed``."""
    judge, entries, targets = job.prepare(svc, metadata)
    pairs = sum(len(t.hits) for t in targets if t.search_error is None)
    return {
        "modelId": judge.model_id,
        "queries": len(entries),
        "failedSearches": sum(1 for t in targets if t.search_error is not None),
        "pairs": pairs,
        "reusedPairs": judge.usage.reused_ratings,
        **calls(judge, targets),
    }


def calls(judge: job.LlmRater, targets: list[Target]) -> dict[str, Any]:
    """The calls ``judge`` would make for the hits of ``targets`` not known yet (cache read
    first), as the job cuts them, and their tokens and cost; no model is called. Filling an
    experiment's holes estimates its prompts with this too (workbench/holes)."""
    calls = input_tokens = output_tokens = 0
    to_rate = 0
    for target in targets:
        if target.search_error is not None:
            continue
        for chunk in judge.plan(target):
            to_rate += len(chunk)
            tokens_in, tokens_out = judge.call_tokens(judge.user_message(target.entry, chunk),
                                                      chunk)
            calls += 1
            input_tokens += tokens_in
            output_tokens += tokens_out
    pricing = judge.pricing
    return {
        "cachedPairs": judge.usage.cached_ratings,
        "pairsToRate": to_rate,
        "calls": calls,
        "inputTokens": input_tokens,
        "outputTokens": output_tokens,
        "totalTokens": input_tokens + output_tokens,
        "cost": None if pricing is None else pricing.cost(input_tokens, output_tokens),
        "tokenizer": judge.tokenizer.name,
    }
