"""Two-decimal rounding of metric values, as the plugin's ``Math.round(x * 100) / 100``.

Two paths (docs/algorithms.md, "Rounding"): the pairwise path rounds anything and turns NaN
into 0 (what ``Math.round`` does); the pointwise path refuses a value that is not finite or too
large for ``x * 100`` to fit in a Java ``long``, so a corrupt metric never looks like a score.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

from workbench.metrics.errors import MetricError
from workbench.schemas.javafmt import double_to_string

_LONG_MAX = 2**63 - 1
_LONG_MIN = -(2**63)
# Java's ``Long.MAX_VALUE / 100.0``: the long becomes the double 2^63, then the division rounds.
MAX_ROUNDABLE: float = _LONG_MAX / 100.0


def java_round(y: float) -> int:
    """Java ``Math.round(double)``: the closest long, ties towards +infinity, NaN -> 0, saturating.

    Not ``floor(y + 0.5)`` literally: that addition can itself round up (0.49999999999999994 + 0.5
    is 1.0), which Java 7+ does not do. ``y - floor(y)`` is exact for every double, so comparing it
    with 0.5 decides the tie rule on the true value.
    """
    if math.isnan(y):
        return 0
    if y >= 2.0**63:
        return _LONG_MAX
    if y <= -(2.0**63):
        return _LONG_MIN
    whole = math.floor(y)
    return int(whole) + (1 if y - whole >= 0.5 else 0)


def round2(x: float) -> float:
    """Pairwise rounding: ``Math.round(x * 100) / 100``, i.e. ``floor(x*100 + 0.5) / 100``.

    NaN gives 0.0; the long is converted to a double before the division, as in Java.
    """
    return float(java_round(x * 100.0)) / 100.0


def round_metric(x: float) -> float:
    """Pointwise rounding: ``round2`` after refusing NaN and infinities.

    Raises ``MetricError`` with the contract's message; the value is printed as Java's
    ``Double.toString`` would (``NaN``, ``Infinity``). Unlike the plugin, a finite value with
    ``|x| >= 2^63 / 100`` is kept as it is instead of failing the evaluation: a double that large
    has no fractional part, so two-decimal rounding would not change it, and refusing it would
    fail every evaluation against graded judgments such as ESCI's 0/1/10/100 (DCG ~ 2^100).
    """
    if abs(x) >= MAX_ROUNDABLE and math.isfinite(x):
        return x
    if not math.isfinite(x):
        raise MetricError(
            f"Metric value [{double_to_string(x)}] is not a finite number that can be rounded; "
            "check the judgment ratings"
        )
    return round2(x)


def round_metrics(metrics: Iterable[tuple[str, float]]) -> list[tuple[str, float]]:
    """Round an ``evaluate`` result in order, so the first bad value is the one reported."""
    return [(name, round_metric(value)) for name, value in metrics]
