"""Integer fields of request bodies: one check, with the range each field allows.

A number without an upper bound lets a client ask for work of any size (an experiment ``size``
of 10^40 was accepted); each field's range is what the cluster or the contract can serve.
"""

from __future__ import annotations

from typing import Any

from workbench.errors import BadRequest

# OpenSearch's ``index.max_result_window``: the most hits one search returns, so the most any
# size that becomes a search size (experiment and judgment ``size``, ``k``, list ``size``) can be.
MAX_RESULT_WINDOW = 10_000


def bounded_int(value: Any, field: str, low: int, high: int) -> int:
    """``value`` if it is a JSON integer in ``[low, high]`` (``low`` is 0 or 1), else a 400
    naming ``field``."""
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        kind = "positive" if low > 0 else "non-negative"
        raise BadRequest(f"{field} must be a {kind} integer, got: {value}")
    if value > high:
        raise BadRequest(f"{field} must be at most {high}, got: {value}")
    return value
