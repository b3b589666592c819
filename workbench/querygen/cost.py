"""What the LLM calls of a generated set cost before they are made: the reservation of each
document under ``maxTokens``/``maxCost`` and ``POST /query_sets/_estimate`` count alike
(``llm.budget``, as LLM judgments count).

A document costs one generation call (the prompt of ``querygen.prompt``, and an answer the size of
``{"query": "<a typical query>"}``) and, with the ``llm`` consistency filter, one judge call
(its rubric's prompt for that query and document, and its rubric's sample answer). Before the
query is written its text is unknown, so a judge call is counted with the typical query.
Figures assume each call answers at the first try (no fallback rung without structured
output); a model that answers at more length spends more, which the budget finds out when the
call reports it.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from workbench.judges.base import Judge, Usage
from workbench.judges.llm import LLMJudge
from workbench.llm.budget import prompt_tokens
from workbench.llm.pricing import Pricing
from workbench.querygen.documents import SourceDocument
from workbench.querygen.filter import pair
from workbench.querygen.prompt import SYSTEM, user_prompt

# A typical generated query, for the size of answers and of the judge's prompt.
TYPICAL_QUERY = "wireless noise cancelling headphones"

Count = Callable[[str], int]


def generation_tokens(document: SourceDocument, category: str, count: Count) -> tuple[int, int]:
    """Input and expected output tokens of the call that writes ``document``'s query."""
    user = user_prompt(document, category)
    answer = json.dumps({"query": TYPICAL_QUERY}, ensure_ascii=False)
    return prompt_tokens(SYSTEM, user, count), count(answer)


def filter_tokens(judge: Judge | None, text: str, document: SourceDocument,
                  count: Count) -> tuple[int, int]:
    """Input and expected output tokens of the judge's call on (``text``, ``document``): none
    for a judge that calls no chat model."""
    if not isinstance(judge, LLMJudge):
        return 0, 0
    query, hit = pair(judge, text, document)
    user = judge.rubric.user_prompt(query.text, query.references, [(hit.id, hit.content())])
    return (prompt_tokens(judge.rubric.system_prompt, user, count),
            count(judge.rubric.sample_answer([hit.id])))


def document_tokens(document: SourceDocument, category: str, judge: Judge | None,
                    count: Count) -> tuple[int, int]:
    """What one document is expected to cost: its generation call and its judge call."""
    gen_in, gen_out = generation_tokens(document, category, count)
    judge_in, judge_out = filter_tokens(judge, TYPICAL_QUERY, document, count)
    return gen_in + judge_in, gen_out + judge_out


def usage_doc(usage: Usage, pricing: Pricing | None) -> dict[str, Any]:
    """``generation.usage`` of a set: calls, tokens and the time spent waiting for the model
    (``latencyMs``, summed over calls: what a throughput bound is computed from), and ``cost``
    when the model has prices (in the currency its prices were registered in)."""
    out: dict[str, Any] = {"llmCalls": usage.calls, "inputTokens": usage.input_tokens,
                           "outputTokens": usage.output_tokens,
                           "totalTokens": usage.input_tokens + usage.output_tokens,
                           "latencyMs": round(usage.latency_ms, 3)}
    if pricing is not None:
        out["cost"] = pricing.cost(usage.input_tokens, usage.output_tokens)
    return out
