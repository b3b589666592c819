"""Click models that turn aggregated UBI click/impression counts into relevance ratings.

Pure numpy: the caller runs the OpenSearch aggregations and hands over plain arrays, so the
arithmetic here can be tested without services and stays linear in the size of its input.

* :func:`rank_ctr` and :func:`coec` are COEC (Clicks Over Expected Clicks) exactly as the plugin
  computes it, steps 1 and 3 (docs/algorithms.md, "COEC").
* :func:`pbm` fits the position-based model (PBM) by expectation-maximisation.
* :func:`format_rating` writes a rating the way the plugin stores it (docs/algorithms.md, "Rating
  format").
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from decimal import ROUND_HALF_UP, Context, Decimal

import numpy as np

__all__ = ["coec", "format_rating", "pbm", "rank_ctr"]

_THOUSANDTH = Decimal("0.001")
# Digits needed to write any finite double to three decimals without the context rounding it
# first: up to 309 integer digits (DBL_MAX ~ 1.8e308) plus the three decimals, with room to spare.
_FORMAT_PRECISION = 400
_FORMAT_CONTEXT = Context(prec=_FORMAT_PRECISION)


# --------------------------------------------------------------------------------------------
# COEC


def rank_ctr(
    clicks_by_rank: Mapping[int, int], impressions_by_rank: Mapping[int, int], max_rank: int
) -> np.ndarray:
    """COEC step 1: the click-through rate of each rank ``0 … max_rank-1`` over all queries.

    ``ctr[r] = clicks[r] / impressions[r]`` when rank ``r`` had impressions, else 0 (a rank that
    was never shown, or that the ``positions`` terms aggregation left out, explains no clicks).
    Ranks outside ``0 … max_rank-1`` are ignored: the filter admits ordinal ``max_rank`` but the
    plugin's array has no slot for it. A CTR above 1 (more clicks than impressions) is kept as is.
    """
    if max_rank < 0:
        raise ValueError(f"max_rank must be >= 0, got {max_rank}")
    ctr = np.zeros(max_rank, dtype=np.float64)
    for rank, shown in impressions_by_rank.items():
        if 0 <= rank < max_rank and shown > 0:
            ctr[rank] = clicks_by_rank.get(rank, 0) / shown
    return ctr


def coec(
    ctr: np.ndarray, clicks: np.ndarray, impressions: np.ndarray, best_rank: np.ndarray
) -> np.ndarray:
    """COEC step 3 for many (query, document) pairs at once: clicks over expected clicks.

    The arrays are aligned, one element per pair. ``best_rank`` is the best (smallest) ordinal at
    which the pair was clicked or shown, ``-1`` when it never was (the contract's +infinity).
    ``expected = ctr[best_rank] * impressions``, where the CTR of a rank outside
    ``0 … len(ctr)-1`` is 0, and ``rating = clicks / expected`` when ``expected > 0``, else 0.
    So a document seen only through other actions, or only below ``maxRank``, rates 0.
    Same operation order as the plugin's doubles, hence bit-identical ratings.
    """
    ctr = np.asarray(ctr, dtype=np.float64)
    clicks_f = np.asarray(clicks, dtype=np.float64)
    impressions_f = np.asarray(impressions, dtype=np.float64)
    ranks = _as_index_array(best_rank, "best_rank")
    if ctr.ndim != 1:
        raise ValueError("ctr must be a 1-D array")
    _check_aligned(clicks=clicks_f, impressions=impressions_f, best_rank=ranks)

    in_range = (ranks >= 0) & (ranks < ctr.size)
    ctr_at_rank = np.zeros(ranks.shape, dtype=np.float64)
    ctr_at_rank[in_range] = ctr[ranks[in_range]]
    expected = ctr_at_rank * impressions_f
    return _safe_ratio(clicks_f, expected)


# --------------------------------------------------------------------------------------------
# PBM


def pbm(
    pair: np.ndarray,
    rank: np.ndarray,
    clicks: np.ndarray,
    impressions: np.ndarray,
    n_pairs: int,
    n_ranks: int,
    max_iterations: int = 100,
    tolerance: float = 1e-6,
) -> tuple[np.ndarray, np.ndarray]:
    """Fit the position-based click model ``P(click | p at r) = alpha[p] * gamma[r]`` by EM.

    Input rows are aggregated cells: (pair index, rank, clicks, impressions) for each
    (query-document pair, rank). ``alpha`` (shape ``n_pairs``) is the attractiveness of a pair
    and is what the workbench uses as the PBM rating; ``gamma`` (shape ``n_ranks``) is the
    probability that a rank is examined, which is what separates "not clicked because unseen"
    from "not clicked because not relevant".

    EM as in Chuklin, Markov and de Rijke, *Click Models for Web Search* (PBM), over counts: a
    click means attracted and examined; a non-click counts ``P(A=1|C=0)`` towards alpha and
    ``P(E=1|C=0)`` towards gamma; each is divided by the impressions of its pair or rank.
    Starts at 0.5 and stops when no parameter moves by ``tolerance`` or more, or after
    ``max_iterations`` updates.

    * A cell with more clicks than impressions counts ``clicks`` impressions (a click implies the
      document was shown); a cell with no impressions and no clicks is ignored.
    * A pair or rank without any impression has no data and stays 0.
    * Only products ``alpha[p] * gamma[r]`` are identified: scaling alpha by ``c`` and gamma by
      ``1/c`` fits equally well. Ratings are thus comparable within one fit (pairs that share
      ranks), not as absolute probabilities or across fits.

    Memory and time per iteration are linear in the number of rows (``np.bincount``).
    """
    if max_iterations < 0:
        raise ValueError(f"max_iterations must be >= 0, got {max_iterations}")
    cells = _pbm_cells(pair, rank, clicks, impressions, n_pairs, n_ranks)
    pair_idx, rank_idx, _, n = cells
    pair_shown = np.bincount(pair_idx, weights=n, minlength=n_pairs)
    rank_shown = np.bincount(rank_idx, weights=n, minlength=n_ranks)
    alpha = np.where(pair_shown > 0, 0.5, 0.0)
    gamma = np.where(rank_shown > 0, 0.5, 0.0)
    for _ in range(max_iterations):
        new_alpha, new_gamma = _pbm_em_step(alpha, gamma, cells, pair_shown, rank_shown)
        change = max(_max_abs_change(alpha, new_alpha), _max_abs_change(gamma, new_gamma))
        alpha, gamma = new_alpha, new_gamma
        if change < tolerance:
            break
    return alpha, gamma


_Cells = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]


def _pbm_cells(
    pair: np.ndarray,
    rank: np.ndarray,
    clicks: np.ndarray,
    impressions: np.ndarray,
    n_pairs: int,
    n_ranks: int,
) -> _Cells:
    """Validate the rows and return (pair, rank, clicks, shown) of the cells that carry data."""
    if n_pairs < 0 or n_ranks < 0:
        raise ValueError(f"n_pairs and n_ranks must be >= 0, got {n_pairs} and {n_ranks}")
    pair_idx = _as_index_array(pair, "pair")
    rank_idx = _as_index_array(rank, "rank")
    k = np.asarray(clicks, dtype=np.float64)
    shown = np.asarray(impressions, dtype=np.float64)
    _check_aligned(pair=pair_idx, rank=rank_idx, clicks=k, impressions=shown)
    _check_range(pair_idx, n_pairs, "pair")
    _check_range(rank_idx, n_ranks, "rank")
    if np.any(k < 0) or np.any(shown < 0):
        raise ValueError("clicks and impressions must be >= 0")
    if not (np.all(np.isfinite(k)) and np.all(np.isfinite(shown))):
        raise ValueError("clicks and impressions must be finite")
    n = np.maximum(shown, k)
    keep = n > 0
    return pair_idx[keep], rank_idx[keep], k[keep], n[keep]


def _pbm_em_step(
    alpha: np.ndarray,
    gamma: np.ndarray,
    cells: _Cells,
    pair_shown: np.ndarray,
    rank_shown: np.ndarray,
) -> tuple[np.ndarray, np.ndarray]:
    """One EM update of (alpha, gamma) from the current estimates; linear in the cells."""
    pair_idx, rank_idx, k, n = cells
    a = alpha[pair_idx]
    g = gamma[rank_idx]
    not_clicked = n - k
    p_no_click = 1.0 - a * g
    # Posteriors given no click. Where 1 - alpha*gamma is 0 the model says every impression is
    # clicked, so such a cell has no non-clicks to distribute (0, not 0/0).
    attracted = _safe_ratio(a * (1.0 - g), p_no_click)
    examined = _safe_ratio(g * (1.0 - a), p_no_click)
    alpha_num = np.bincount(pair_idx, weights=k + not_clicked * attracted, minlength=alpha.size)
    gamma_num = np.bincount(rank_idx, weights=k + not_clicked * examined, minlength=gamma.size)
    return _safe_ratio(alpha_num, pair_shown), _safe_ratio(gamma_num, rank_shown)


def _max_abs_change(old: np.ndarray, new: np.ndarray) -> float:
    return float(np.max(np.abs(new - old))) if old.size else 0.0


# --------------------------------------------------------------------------------------------
# Formatting


def format_rating(x: float) -> str:
    """A rating as the plugin stores it: Java ``String.format("%.3f")``.

    Java rounds HALF_UP on the shortest decimal representation of the double, not on its exact
    binary value, so ``1.0005`` gives ``"1.001"`` where Python's ``f"{1.0005:.3f}"`` gives
    ``"1.000"``. Non-finite values are refused, as the latest plugin does.

    The shortest representation is ``repr``'s; a plain one (no exponent, as every rating of
    ordinary size has) is rounded on its digits, a few times faster than ``Decimal`` (a UBI
    judgment formats one rating per judged pair); one with an exponent goes through ``Decimal``.
    """
    value = float(x)  # numpy scalars: repr() of np.float64 is "np.float64(...)" in numpy 2
    if not math.isfinite(value):
        raise ValueError(f"rating must be a finite number, got {value!r}")
    text = repr(value)
    if "e" in text:
        rounded = Decimal(text).quantize(_THOUSANDTH, rounding=ROUND_HALF_UP,
                                         context=_FORMAT_CONTEXT)
        return f"{rounded:f}"
    sign = ""
    if text[0] == "-":
        sign, text = "-", text[1:]
    whole, _, fraction = text.partition(".")
    if len(fraction) <= 3:
        return f"{sign}{whole}.{fraction:0<3}"
    thousandths = f"{int(whole + fraction[:3]) + (fraction[3] >= '5'):04d}"
    return f"{sign}{thousandths[:-3]}.{thousandths[-3:]}"


# --------------------------------------------------------------------------------------------
# Shared helpers


def _safe_ratio(numerator: np.ndarray, denominator: np.ndarray) -> np.ndarray:
    """``numerator / denominator`` where the denominator is positive, else 0."""
    out = np.zeros(np.broadcast(numerator, denominator).shape, dtype=np.float64)
    np.divide(numerator, denominator, out=out, where=denominator > 0)
    return out


def _as_index_array(values: np.ndarray, name: str) -> np.ndarray:
    """A 1-D int64 array; an empty list is accepted although numpy reads it as floats."""
    array = np.asarray(values)
    if array.ndim != 1:
        raise ValueError(f"{name} must be a 1-D array")
    if array.size and array.dtype.kind not in "iu":
        raise ValueError(f"{name} must hold integers, got dtype {array.dtype}")
    return array.astype(np.int64, copy=False)


def _check_aligned(**arrays: np.ndarray) -> None:
    shapes = {name: array.shape for name, array in arrays.items()}
    if len(set(shapes.values())) > 1 or any(len(shape) != 1 for shape in shapes.values()):
        raise ValueError(f"arrays must be 1-D and aligned, got shapes {shapes}")


def _check_range(index: np.ndarray, size: int, name: str) -> None:
    if index.size and (index.min() < 0 or index.max() >= size):
        raise ValueError(f"{name} indices must lie in 0 … {size - 1}")
