"""Similarity of two result lists for PAIRWISE_COMPARISON experiments (docs/algorithms.md, "Pairwise
metrics").

Values are unrounded; ``rounding.round2`` makes them what the plugin stores. Sums and weights are
accumulated in the plugin's order (RBO's weight multiplied by p at each depth) so values round the
same way; frequencyWeighted's union is summed in first-seen order (the plugin's HashSet order
cannot be reproduced, and only the last bit of a sum can differ).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Hashable, Sequence


def jaccard(a: Sequence[Hashable], b: Sequence[Hashable]) -> float:
    """|set(A) ∩ set(B)| / |set(A) ∪ set(B)|; 0 when both are empty."""
    set_a, set_b = set(a), set(b)
    union = len(set_a | set_b)
    return len(set_a & set_b) / union if union else 0.0


def rbo(a: Sequence[Hashable], b: Sequence[Hashable], p: float) -> float:
    """Rank-biased overlap, the plugin's finite-depth normalisation (not Webber's extrapolated RBO).

    With D = max(len(A), len(B)) and prefix sets S_A(d), S_B(d) (shorter once a list is exhausted):
    ``sum_{d=1..D} p^(d-1) * |S_A ∩ S_B| / max(|S_A|, |S_B|)``, times ``(1 - p) / (1 - p^D)``, so
    identical lists score 1. Both empty gives 0/0 = NaN, as in Java (``pairwise_metrics`` makes it
    0). Symmetric in A and B.
    """
    if not 0 < p < 1:
        raise ValueError("p must be between 0 and 1")
    depth = max(len(a), len(b))
    seen_a: set[Hashable] = set()
    seen_b: set[Hashable] = set()
    common = 0
    total, weight = 0.0, 1.0
    for d in range(depth):
        if d < len(a) and a[d] not in seen_a:
            seen_a.add(a[d])
            common += a[d] in seen_b
        if d < len(b) and b[d] not in seen_b:
            seen_b.add(b[d])
            common += b[d] in seen_a
        total += weight * (common / max(len(seen_a), len(seen_b)))
        weight *= p
    try:
        return total * (1 - p) / (1 - p**depth)
    except ZeroDivisionError:
        return math.nan


def frequency_weighted(a: Sequence[Hashable], b: Sequence[Hashable]) -> float:
    """Weighted Jaccard with per-item weight c(x) = (w_A(x) + w_B(x)) / 2, w_L(x) = count / len(L).

    ``sum of c(x) over items in both / sum of c(x) over the union``; 0 when the union is empty.
    On de-duplicated non-empty lists it reduces to (|A∩B|/|A| + |A∩B|/|B|) / 2.
    """
    counts_a, counts_b = Counter(a), Counter(b)
    both = union = 0.0
    for item in dict.fromkeys([*counts_a, *counts_b]):
        weight_a = counts_a[item] / len(a) if item in counts_a else 0.0
        weight_b = counts_b[item] / len(b) if item in counts_b else 0.0
        combined = (weight_a + weight_b) / 2.0
        union += combined
        if item in counts_a and item in counts_b:
            both += combined
    return both / union if union != 0 else 0.0


def pairwise_metrics(a: Sequence[Hashable], b: Sequence[Hashable]) -> list[tuple[str, float]]:
    """``jaccard, rbo50, rbo90, frequencyWeighted`` of lists A and B, unrounded, NaN -> 0."""
    values = [
        ("jaccard", jaccard(a, b)),
        ("rbo50", rbo(a, b, 0.5)),
        ("rbo90", rbo(a, b, 0.9)),
        ("frequencyWeighted", frequency_weighted(a, b)),
    ]
    return [(name, 0.0 if math.isnan(value) else value) for name, value in values]
