"""``maxTokens`` and ``maxCost``: the budget of a run of LLM calls, checked alike wherever a
body takes one (an LLM judgment, a generated query set) so the messages are the same."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from marshmallow import ValidationError

from workbench.schemas.numbers import bounded_int

# Far beyond any real run: the bounds only keep the numbers within what JSON and the index hold.
MAX_BUDGET_TOKENS = 10**12
MAX_BUDGET_COST = 1e12


def max_tokens(value: Any) -> int | None:
    """``maxTokens``: absent or null is none, else a positive integer."""
    return None if value is None else bounded_int(value, "maxTokens", 1, MAX_BUDGET_TOKENS)


def max_cost(value: Any, model_id: Any, price_of: Callable[[str], object | None]) -> float | None:
    """``maxCost``: absent or null is none, else a number greater than 0, for a model with
    prices (a cost limit without prices could not stop anything)."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) \
            or not math.isfinite(value) or not 0 < value <= MAX_BUDGET_COST:
        raise ValidationError(f"maxCost must be a number greater than 0, got: {value}")
    if price_of(str(model_id)) is None:
        raise ValidationError(f"maxCost needs a model with pricing; model [{model_id}] has "
                              "none (register it with pricing, or use maxTokens)")
    return float(value)
