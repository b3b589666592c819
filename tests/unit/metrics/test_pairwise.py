"""Pairwise similarity of two result lists (docs/algorithms.md, "Pairwise metrics"), hand-worked and
randomised."""

from __future__ import annotations

import math
import random
from collections.abc import Iterator

import pytest

from workbench.metrics import frequency_weighted, jaccard, pairwise_metrics, rbo, round2


def rbo_by_hand(a: list[str], b: list[str], p: float) -> float:
    """The RBO of docs/algorithms.md ("Pairwise metrics") literally: prefix sets rebuilt at every
    depth, p^(d-1) weights."""
    depth = max(len(a), len(b))
    total = 0.0
    for d in range(1, depth + 1):
        sa, sb = set(a[:d]), set(b[:d])
        total += p ** (d - 1) * len(sa & sb) / max(len(sa), len(sb))
    return total * (1 - p) / (1 - p**depth)


# --------------------------------------------------------------------------------------------
# Hand-worked


def test_identical_lists() -> None:
    a = ["a", "b", "c"]
    metrics = pairwise_metrics(a, list(a))
    assert [name for name, _ in metrics] == ["jaccard", "rbo50", "rbo90", "frequencyWeighted"]
    assert [value for _, value in metrics] == pytest.approx([1.0, 1.0, 1.0, 1.0], rel=1e-15)


def test_disjoint_lists() -> None:
    assert pairwise_metrics(["a", "b"], ["c", "d"]) == [
        ("jaccard", 0.0),
        ("rbo50", 0.0),
        ("rbo90", 0.0),
        ("frequencyWeighted", 0.0),
    ]


def test_one_list_empty() -> None:
    assert [v for _, v in pairwise_metrics(["a", "b"], [])] == [0.0, 0.0, 0.0, 0.0]
    assert [v for _, v in pairwise_metrics([], ["a"])] == [0.0, 0.0, 0.0, 0.0]


def test_both_empty_is_zero_and_raw_rbo_is_nan() -> None:
    assert math.isnan(rbo([], [], 0.5))  # 0 / 0, as in Java
    assert pairwise_metrics([], []) == [
        ("jaccard", 0.0),
        ("rbo50", 0.0),
        ("rbo90", 0.0),
        ("frequencyWeighted", 0.0),
    ]


def test_partial_overlap() -> None:
    a, b = ["a", "b", "c"], ["b", "a", "d"]
    # union {a, b, c, d}, intersection {a, b}
    assert jaccard(a, b) == 0.5
    # d=1: {a} vs {b} -> 0; d=2: {a,b} vs {b,a} -> 1; d=3: 2/3.
    # rbo50 = (0 + 0.5 * 1 + 0.25 * 2/3) * 0.5 / (1 - 0.125) = (2/3 * 0.5) / 0.875
    assert rbo(a, b, 0.5) == pytest.approx((0.5 + 0.25 * 2 / 3) * 0.5 / 0.875)
    assert rbo(a, b, 0.9) == pytest.approx((0.9 + 0.81 * 2 / 3) * 0.1 / (1 - 0.729))
    # de-duplicated, both of length 3: (2/3 + 2/3) / 2
    assert frequency_weighted(a, b) == pytest.approx(2 / 3)
    assert [round2(v) for _, v in pairwise_metrics(a, b)] == [0.5, 0.38, 0.53, 0.67]


def test_different_lengths() -> None:
    a, b = ["a", "b", "c", "d"], ["a"]
    assert jaccard(a, b) == 0.25
    # D = 4; B's prefix stays {a}: overlaps 1, 1/2, 1/3, 1/4.
    expected = (1 + 0.5 * 0.5 + 0.25 / 3 + 0.125 / 4) * 0.5 / (1 - 0.5**4)
    assert rbo(a, b, 0.5) == pytest.approx(expected)
    # (1/4 + 1/1) / 2
    assert frequency_weighted(a, b) == pytest.approx(0.625)


def test_frequency_weighted_with_repeats() -> None:
    # A = [a, a, b]: w_A = {a: 2/3, b: 1/3}; B = [a, c]: w_B = {a: 1/2, c: 1/2}.
    # c(a) = 7/12, c(b) = 1/6, c(c) = 1/4; result = (7/12) / (7/12 + 1/6 + 1/4) = 7/12.
    assert frequency_weighted(["a", "a", "b"], ["a", "c"]) == pytest.approx(7 / 12)


def test_rbo_rejects_p_outside_the_open_interval() -> None:
    for p in (0.0, 1.0, -0.1, 1.5):
        with pytest.raises(ValueError, match="p must be between 0 and 1"):
            rbo(["a"], ["a"], p)


# --------------------------------------------------------------------------------------------
# Randomised properties


def random_list(rng: random.Random, pool: list[str], dedup: bool) -> list[str]:
    if dedup:
        return rng.sample(pool, rng.randint(0, len(pool)))
    return [rng.choice(pool) for _ in range(rng.randint(0, 12))]


def random_pairs(seed: int, documents: int, rounds: int,
                 dedup: bool) -> Iterator[tuple[list[str], list[str]]]:
    """``rounds`` pairs of random lists over the ids ``d0``.. (``documents`` of them), both
    without repeats when ``dedup``; the same seed gives the same pairs."""
    rng = random.Random(seed)
    pool = [f"d{i}" for i in range(documents)]
    for _ in range(rounds):
        yield random_list(rng, pool, dedup), random_list(rng, pool, dedup)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_rbo_is_symmetric_and_matches_the_literal_formula(seed: int) -> None:
    rng = random.Random(seed)
    pool = [f"d{i}" for i in range(10)]
    for _ in range(300):
        a, b = random_list(rng, pool, rng.random() < 0.5), random_list(rng, pool, False)
        if not a and not b:
            continue
        for p in (0.5, 0.9):
            assert rbo(a, b, p) == rbo(b, a, p)
            assert rbo(a, b, p) == pytest.approx(rbo_by_hand(a, b, p), rel=1e-12, abs=1e-15)
            assert 0.0 <= rbo(a, b, p) <= 1.0 + 1e-12


@pytest.mark.parametrize("seed", [4, 5, 6])
def test_frequency_weighted_is_a_weighted_jaccard_on_deduplicated_lists(seed: int) -> None:
    for a, b in random_pairs(seed, 12, 300, True):
        union = set(a) | set(b)
        weight = {
            x: ((1 / len(a) if x in a else 0.0) + (1 / len(b) if x in b else 0.0)) / 2
            for x in union
        }
        den = sum(weight.values())
        weighted_jaccard = sum(weight[x] for x in set(a) & set(b)) / den if den else 0.0
        assert frequency_weighted(a, b) == pytest.approx(weighted_jaccard, rel=1e-12)
        if a and b:
            common = len(set(a) & set(b))
            assert frequency_weighted(a, b) == pytest.approx(
                (common / len(a) + common / len(b)) / 2
            )


@pytest.mark.parametrize("seed", [7, 8])
def test_jaccard_against_sets(seed: int) -> None:
    for a, b in random_pairs(seed, 8, 200, False):
        union = set(a) | set(b)
        assert jaccard(a, b) == (len(set(a) & set(b)) / len(union) if union else 0.0)
        assert jaccard(a, b) == jaccard(b, a)
