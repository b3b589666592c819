"""What one LLM judgment call costs before it is made, and the budget that bounds a run.

The judgment job and ``POST /judgments/_estimate`` count every call with these functions, so the
estimate and the budget reserve the same figures:

* **input**: ``llm.budget.prompt_tokens`` (the messages and OpenAI's overhead, counted by the
  model server's tokenizer where it has one);
* **output**: tokens of the structured answer the prompt asks for, written out for the chunk's
  ids with a typical score (``{"ratings": [{"id": "<index>::<docId>", "rating_score": 0.5},
  ...]}``) and, with ``includeRationale``, a sentence-long rationale per hit. A model that
  answers more verbosely spends more; the budget then finds out when the call reports it.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any

from workbench.judgments.llm import prompt
from workbench.llm.budget import (
    CL100K,
    Budget,
    Reservation,
    Tokenizer,
    prompt_tokens,
    tokenizer_of,
)
from workbench.llm.pricing import Pricing
from workbench.llm.tokens import count_tokens

# The budget, its reservations and the token counts live in ``llm.budget`` (generated query
# sets use them too); they are named here for the judgment code that reads them as ``cost.*``.
__all__ = ["CL100K", "Budget", "Reservation", "SharedBudget", "Tokenizer", "answer_tokens",
           "prompt_tokens", "sample_answer", "tokenizer_of"]

# A typical one-sentence rationale, for the size of answers that carry one.
_RATIONALE = "The result matches the main words of the query but not all of its intent."
_SAMPLE_SCORE: dict[str, Any] = {prompt.SCORE0_1: 0.5, prompt.RELEVANT_IRRELEVANT: "IRRELEVANT"}


def sample_answer(hit_ids: Sequence[str], rating_type: str, rationale: bool) -> str:
    """The structured answer rating ``hit_ids`` with a typical score (and rationale)."""
    score = _SAMPLE_SCORE.get(rating_type, 0.5)
    items = []
    for hit_id in hit_ids:
        item: dict[str, Any] = {"id": hit_id, "rating_score": score}
        if rationale:
            item["rationale"] = _RATIONALE
        items.append(item)
    return json.dumps({"ratings": items}, ensure_ascii=False)


def answer_tokens(hit_ids: Sequence[str], rating_type: str, rationale: bool,
                  count: Callable[[str], int] = count_tokens) -> int:
    """Expected output tokens of the structured answer rating ``hit_ids``."""
    return count(sample_answer(hit_ids, rating_type, rationale))


# Reserve room for one call against the limits of a budget shared through Redis (the same
# rules as ``Budget.reserve``): '' when reserved, else the limit passed, which closes it.
_RESERVE = """
local closed = redis.call('HGET', KEYS[1], 'closed')
if closed then return closed end
local function field(name) return tonumber(redis.call('HGET', KEYS[1], name) or '0') end
local input = field('spentIn') + field('heldIn') + tonumber(ARGV[1])
local output = field('spentOut') + field('heldOut') + tonumber(ARGV[2])
local over = ''
if tonumber(ARGV[3]) >= 0 and input + output > tonumber(ARGV[3]) then
  over = 'maxTokens'
elseif tonumber(ARGV[4]) >= 0 and (ARGV[5] == '' or
    (input * tonumber(ARGV[5]) + output * tonumber(ARGV[6])) / 1000000 > tonumber(ARGV[4])) then
  over = 'maxCost'
end
if over ~= '' then
  redis.call('HSET', KEYS[1], 'closed', over)
else
  redis.call('HINCRBY', KEYS[1], 'heldIn', ARGV[1])
  redis.call('HINCRBY', KEYS[1], 'heldOut', ARGV[2])
end
redis.call('EXPIRE', KEYS[1], ARGV[7])
return over
"""
# Replace a reservation with what the call reported.
_SETTLE = """
redis.call('HINCRBY', KEYS[1], 'heldIn', -tonumber(ARGV[1]))
redis.call('HINCRBY', KEYS[1], 'heldOut', -tonumber(ARGV[2]))
redis.call('HINCRBY', KEYS[1], 'spentIn', ARGV[3])
redis.call('HINCRBY', KEYS[1], 'spentOut', ARGV[4])
return 0
"""
SHARED_TTL = 24 * 3600


class SharedBudget(Budget):
    """The same budget kept in a Redis hash, for a judgment split over several processes: the
    reservations and spending of every process count against one limit, and the first refusal
    anywhere closes it for all. The calls that can pass the limit are then those in flight in
    every process at the last accepted reservation."""

    def __init__(self, r: Any, key: str, max_tokens: int | None, max_cost: float | None,
                 pricing: Pricing | None) -> None:
        super().__init__(max_tokens, max_cost, pricing)
        self.redis = r
        self.key = key
        self._reserve = r.register_script(_RESERVE)
        self._settle = r.register_script(_SETTLE)

    def _closed(self) -> str | None:
        if self.closed_by is None:
            value = self.redis.hget(self.key, "closed")
            self.closed_by = value.decode() if isinstance(value, bytes) else value
        return self.closed_by

    @property
    def reached(self) -> bool:
        return self._closed() is not None

    @property
    def reason(self) -> str:
        self._closed()
        return str(Budget.reason.fget(self))  # type: ignore[attr-defined]

    def reserve(self, input_tokens: int, output_tokens: int) -> Reservation | None:
        pricing = self.pricing
        over = self._reserve(keys=[self.key], args=[
            input_tokens, output_tokens,
            -1 if self.max_tokens is None else self.max_tokens,
            -1 if self.max_cost is None else repr(self.max_cost),
            "" if pricing is None else repr(pricing.input_per_million),
            "" if pricing is None else repr(pricing.output_per_million), SHARED_TTL])
        if over:
            self.closed_by = over.decode() if isinstance(over, bytes) else str(over)
            return None
        return Reservation(input_tokens, output_tokens)

    def settle(self, held: Reservation, input_tokens: int = 0, output_tokens: int = 0) -> None:
        self._settle(keys=[self.key], args=[held.input_tokens, held.output_tokens,
                                            input_tokens, output_tokens])
