"""Two-decimal rounding as Java's Math.round(x * 100) / 100 (docs/algorithms.md, "Rounding")."""

from __future__ import annotations

import math

import pytest

from workbench.metrics import MetricError, java_round, round2, round_metric, round_metrics
from workbench.metrics.rounding import MAX_ROUNDABLE


@pytest.mark.parametrize(
    ("y", "expected"),
    [
        (0.5, 1),
        (1.5, 2),
        (2.5, 3),  # ties go up, not to even (Python's round(2.5) is 2)
        (-0.5, 0),  # ... towards +infinity
        (-1.5, -1),
        (-1.6, -2),
        (0.49999999999999994, 0),  # floor(y + 0.5) would give 1; Java 7+ gives 0
        (2.0**52 + 1, 2**52 + 1),  # y + 0.5 would round to even
        (math.nan, 0),
        (math.inf, 2**63 - 1),
        (-math.inf, -(2**63)),
        (1e300, 2**63 - 1),
    ],
)
def test_java_round(y: float, expected: int) -> None:
    assert java_round(y) == expected


@pytest.mark.parametrize(
    ("x", "expected"),
    [
        (0.005, 0.01),  # 0.005 * 100 == 0.5 exactly in doubles
        (0.015, 0.02),  # 0.015 is stored below 0.015, but 0.015 * 100 == 1.5
        (1.005, 1.0),  # 1.005 * 100 == 100.49999999999999
        (0.125, 0.13),
        (0.666666, 0.67),
        (-0.005, 0.0),  # Math.round(-0.5) == 0, and a positive zero
        (-0.015, -0.01),
        (-0.016, -0.02),
        (5.416508275000202, 5.42),
        (0.0, 0.0),
        (math.nan, 0.0),
    ],
)
def test_round2(x: float, expected: float) -> None:
    got = round2(x)
    assert got == expected
    assert math.copysign(1.0, got) == math.copysign(1.0, expected)


def test_round2_is_floor_plus_half_on_ordinary_values() -> None:
    for i in range(-2000, 2001):
        x = i / 997
        assert round2(x) == math.floor(x * 100 + 0.5) / 100


def test_round2_saturates_like_java() -> None:
    assert round2(math.inf) == float(2**63 - 1) / 100.0
    assert round2(-math.inf) == float(-(2**63)) / 100.0


def test_round_metric_rounds_finite_values() -> None:
    assert round_metric(0.015) == 0.02
    assert round_metric(-1.005) == -1.0
    assert round_metric(MAX_ROUNDABLE / 2) == round2(MAX_ROUNDABLE / 2)


@pytest.mark.parametrize(
    ("x", "shown"),
    [
        (math.nan, "NaN"),
        (math.inf, "Infinity"),
        (-math.inf, "-Infinity"),
    ],
)
def test_round_metric_refuses_what_cannot_be_rounded(x: float, shown: str) -> None:
    with pytest.raises(MetricError) as caught:
        round_metric(x)
    assert str(caught.value) == (
        f"Metric value [{shown}] is not a finite number that can be rounded; "
        "check the judgment ratings"
    )


@pytest.mark.parametrize("x", [1e20, -1e17, MAX_ROUNDABLE, 2.0**100 / math.log2(3)])
def test_round_metric_keeps_values_too_large_to_have_decimals(x: float) -> None:
    assert round_metric(x) == x
    assert x == math.floor(x)  # nothing after the point to round away


def test_max_roundable_is_java_long_max_over_100() -> None:
    assert MAX_ROUNDABLE == 2**63 / 100
    assert math.nextafter(MAX_ROUNDABLE, 0) < MAX_ROUNDABLE
    assert round_metric(math.nextafter(MAX_ROUNDABLE, 0)) > 9e16


def test_round_metrics_stops_at_the_first_bad_value() -> None:
    assert round_metrics([("a", 0.123), ("b", 2.0)]) == [("a", 0.12), ("b", 2.0)]
    with pytest.raises(MetricError, match=r"\[Infinity\]"):
        round_metrics([("a", 0.1), ("DCG@3", math.inf), ("NDCG@3", math.nan)])
