"""What one LLM judgment call costs before it is made, and the budget that bounds a run.

The judgment job and ``POST /judgments/_estimate`` count every call with these functions, so the
estimate and the budget reserve the same figures:

* **input**: tokens of the system and user messages plus OpenAI's per-message overhead (3
  tokens around each message and its role, 3 priming the reply), which is what OpenAI reports
  as ``prompt_tokens`` for a chat prompt without tools. Tokens are counted by the model
  server's own tokenizer where it has one (``llm.tokens``; llama.cpp, vLLM), else with
  cl100k_base, and the ``Tokenizer`` says which;
* **output**: tokens of the structured answer the prompt asks for, written out for the chunk's
  ids with a typical score (``{"ratings": [{"id": "<index>::<docId>", "rating_score": 0.5},
  ...]}``) and, with ``includeRationale``, a sentence-long rationale per hit. A model that
  answers more verbosely spends more; the budget then finds out when the call reports it.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cache
from typing import Any

from workbench.judgments.llm import prompt
from workbench.llm.base import ChatModel
from workbench.llm.pricing import Pricing
from workbench.llm.tokens import count_tokens

TOKENS_PER_MESSAGE = 3
REPLY_PRIMING = 3
# A typical one-sentence rationale, for the size of answers that carry one.
_RATIONALE = "The result matches the main words of the query but not all of its intent."
_SAMPLE_SCORE: dict[str, Any] = {prompt.SCORE0_1: 0.5, prompt.RELEVANT_IRRELEVANT: "IRRELEVANT"}


@cache
def _role_tokens() -> int:
    return sum(TOKENS_PER_MESSAGE + count_tokens(role) for role in ("system", "user"))


@dataclass(frozen=True)
class Tokenizer:
    """How a judgment's tokens are counted: ``name`` as ``_estimate`` reports it."""

    name: str
    count: Callable[[str], int]


CL100K = Tokenizer("cl100k_base (OpenAI's; the model's server does not count tokens)",
                   count_tokens)


def tokenizer_of(model: ChatModel) -> Tokenizer:
    """The model server's own tokenizer when it has one (asked once per model client), else
    cl100k_base. Once the server fails a count (a one-call-at-a-time server busy with a long
    generation does not answer in time), this tokenizer counts the rest with cl100k_base
    rather than wait on it for every prompt."""
    server = model.tokens
    if server is None or server.count("ok") is None:
        return CL100K

    failed = False  # after one count the server failed, cl100k_base counts the rest

    def count(text: str) -> int:
        nonlocal failed
        if not text:
            return 0
        counted = None if failed else server.count(text)
        if counted is None:
            failed = True
            return count_tokens(text)
        return counted

    return Tokenizer(f"the model server's own ({server.name})", count)


def prompt_tokens(system: str, user: str, count: Callable[[str], int] = count_tokens) -> int:
    """Input tokens of one call with this system and user message (OpenAI's accounting)."""
    return count(system) + count(user) + _role_tokens() + REPLY_PRIMING


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


@dataclass(frozen=True)
class Reservation:
    input_tokens: int
    output_tokens: int


class Budget:
    """``maxTokens`` and/or ``maxCost`` of one run (a generation or one ``_retry``).

    A call is started only once its counted input and estimated output are reserved without
    passing the limit (with what earlier calls really spent and what calls in flight hold); the
    first refusal closes the budget, so no later call starts, however small. When a call
    answers, its reported usage replaces its reservation. The real total can therefore pass the
    limit only by how much the calls in flight at the last accepted reservation (at most
    ``WORKBENCH_LLM_CONCURRENCY``) used beyond what was reserved for them.
    """

    def __init__(self, max_tokens: int | None, max_cost: float | None,
                 pricing: Pricing | None) -> None:
        self.max_tokens = max_tokens
        self.max_cost = max_cost
        self.pricing = pricing
        self.spent = Reservation(0, 0)
        self.held = Reservation(0, 0)
        self.closed_by: str | None = None
        self._lock = threading.Lock()

    @classmethod
    def of(cls, metadata: dict[str, Any], pricing: Pricing | None) -> Budget | None:
        """The budget a judgment's metadata sets, or None when it sets none."""
        max_tokens, max_cost = metadata.get("maxTokens"), metadata.get("maxCost")
        if max_tokens is None and max_cost is None:
            return None
        return cls(None if max_tokens is None else int(max_tokens),
                   None if max_cost is None else float(max_cost), pricing)

    @property
    def reached(self) -> bool:
        return self.closed_by is not None

    @property
    def reason(self) -> str:
        """``budget reached: maxTokens [N]`` (or ``maxCost [X]``)."""
        if self.closed_by == "maxCost":
            return f"budget reached: maxCost [{self.max_cost:g}]"
        return f"budget reached: maxTokens [{self.max_tokens}]"

    def _over(self, input_tokens: int, output_tokens: int) -> str | None:
        """The limit these totals pass, if any."""
        if self.max_tokens is not None and input_tokens + output_tokens > self.max_tokens:
            return "maxTokens"
        # A model whose prices went away since the judgment was created cannot be held to a
        # cost: refuse rather than spend without a bound.
        if self.max_cost is not None and (self.pricing is None or self.pricing.cost(
                input_tokens, output_tokens) > self.max_cost):
            return "maxCost"
        return None

    def reserve(self, input_tokens: int, output_tokens: int) -> Reservation | None:
        """Hold room for one call, or None (and close the budget) when it does not fit."""
        with self._lock:
            if self.closed_by is not None:
                return None
            over = self._over(self.spent.input_tokens + self.held.input_tokens + input_tokens,
                              self.spent.output_tokens + self.held.output_tokens + output_tokens)
            if over is not None:
                self.closed_by = over
                return None
            self.held = Reservation(self.held.input_tokens + input_tokens,
                                    self.held.output_tokens + output_tokens)
            return Reservation(input_tokens, output_tokens)

    def settle(self, held: Reservation, input_tokens: int = 0, output_tokens: int = 0) -> None:
        """Replace a reservation with what the call reported (nothing for a failed call)."""
        with self._lock:
            self.held = Reservation(self.held.input_tokens - held.input_tokens,
                                    self.held.output_tokens - held.output_tokens)
            self.spent = Reservation(self.spent.input_tokens + input_tokens,
                                     self.spent.output_tokens + output_tokens)


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
