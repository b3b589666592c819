"""What one LLM call costs before it is made, and the budget that bounds a run of calls.

Every job that calls a model under ``maxTokens``/``maxCost`` (LLM judgments, generated query
sets) and every ``_estimate`` counts calls with these functions, so an estimate and a budget
reserve the same figures. Input tokens are the system and user messages plus OpenAI's
per-message overhead (3 tokens around each message and its role, 3 priming the reply), what
OpenAI reports as ``prompt_tokens`` for a chat prompt without tools; they are counted by the
model server's own tokenizer where it has one (``llm.tokens``; llama.cpp, vLLM), else with
cl100k_base, and the ``Tokenizer`` says which.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from typing import Any

from workbench.llm.base import ChatModel
from workbench.llm.pricing import Pricing
from workbench.llm.tokens import count_tokens

TOKENS_PER_MESSAGE = 3
REPLY_PRIMING = 3


@cache
def _role_tokens() -> int:
    return sum(TOKENS_PER_MESSAGE + count_tokens(role) for role in ("system", "user"))


@dataclass(frozen=True)
class Tokenizer:
    """How the tokens of a run are counted: ``name`` as an ``_estimate`` reports it."""

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
        """The budget ``maxTokens``/``maxCost`` of a job's fields set (a judgment's metadata, a
        generated query set), or None when they set none."""
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
