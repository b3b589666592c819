"""Pointwise evaluation metrics of one ranked result list against graded judgments
(docs/algorithms.md, "Pointwise metrics").

Every metric is one function over numpy arrays laid out by rank along the last axis, so the same
function serves one list (1-D arrays) and a batch of lists (2-D arrays, one row per query, padded
past each list's end with ``False`` / ``0.0``). Results are unrounded; the experiment code rounds
them with ``rounding.round_metric``. ``HitRate@k`` is the workbench's own, written after the
plugin's seven.

Sums run left to right (``np.cumsum``), as the plugin's Java loops do, so a value that lands on a
rounding boundary rounds the same way, and zero padding cannot change a row's total: ``evaluate``
and ``evaluate_many`` give bit-identical numbers.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Mapping, Sequence
from functools import lru_cache
from itertools import chain, islice, repeat
from numbers import Real
from typing import Any

import numpy as np
import numpy.typing as npt

from workbench.metrics.errors import MetricError
from workbench.schemas.javafmt import (
    JAVA_BLANK,
    JAVA_DECIMAL,
    JAVA_HEX,
    double_to_string,
    java_string,
)

FloatArray = npt.NDArray[np.float64]

# The plugin's metric set, in the order the plugin writes it. ``True``: the name carries ``@k``.
PLUGIN_METRIC_ORDER: tuple[tuple[str, bool], ...] = (
    ("Coverage", True),
    ("Precision", True),
    ("Recall", True),
    ("MAP", True),
    ("MRR", False),
    ("DCG", True),
    ("NDCG", True),
)
# What the workbench writes besides, always after the plugin's seven, so every reader that finds
# a metric by name or by position among those seven (Dashboards' views and scripted fields) is
# unaffected.
WORKBENCH_METRIC_ORDER: tuple[tuple[str, bool], ...] = (("HitRate", True),)
# Every pointwise metric an experiment writes, in order: the one list the names come from.
METRIC_ORDER: tuple[tuple[str, bool], ...] = PLUGIN_METRIC_ORDER + WORKBENCH_METRIC_ORDER

# A batch is evaluated in slices of at most this many matrix cells (rows x widest row), so memory
# stays bounded (about 16 MB per float matrix) whatever k and the judgment counts are.
_BATCH_CELLS = 1 << 21


# ---------------------------------------------------------------------------------------------
# Threshold and the metrics, one function each


def relevance_threshold(ratings: npt.ArrayLike) -> float:
    """Binary-relevance threshold ``T = max(0.5 * max, P90)`` over all ratings of one query.

    P90 is the nearest-rank percentile ``sorted[ceil(0.9 * m) - 1]`` (ascending, m ratings). No
    ratings, or a maximum of 0, gives 0 (relevance then falls back to ``rating > 0``).
    ``ceil(0.9 * m)`` is taken in floating point as the plugin does; it equals the exact integer
    ceiling for every m below two million.
    """
    values = np.sort(np.asarray(ratings, dtype=np.float64).ravel())
    m = values.size
    if m == 0:
        return 0.0
    top = float(values[-1])
    if top == 0:
        return 0.0
    index = min(math.ceil(0.9 * m) - 1, m - 1)
    return max(0.5 * top, float(values[index]))


def coverage(judged: npt.ArrayLike, n: npt.ArrayLike | None = None) -> FloatArray:
    """Coverage@k = |{d in docIds : d judged}| / n over ALL n results (not cut at k); 0 if n = 0.

    ``judged``: bool (..., w), one flag per result in rank order. ``n``: results per list
    (defaults to w, one unpadded list).
    """
    flags = np.asarray(judged, dtype=bool)
    return _ratio(np.count_nonzero(flags, axis=-1), flags.shape[-1] if n is None else n)


def precision(relevant: npt.ArrayLike, depth: npt.ArrayLike | None = None) -> FloatArray:
    """Precision@k = (#relevant in the first min(k, n)) / min(k, n); 0 if min(k, n) = 0.

    Divides by the number of results looked at, not by k (docs/algorithms.md, "Formulas"): two
    results, both relevant, give Precision@10 = 1. ``relevant``: bool (..., w) for the first min(k,
    n) results;
    ``depth``: min(k, n) per list (defaults to w).
    """
    flags = np.asarray(relevant, dtype=bool)
    return _ratio(np.count_nonzero(flags, axis=-1), flags.shape[-1] if depth is None else depth)


def recall(relevant: npt.ArrayLike, n_relevant: npt.ArrayLike) -> FloatArray:
    """Recall@k = (#relevant in the first min(k, n)) / R; 0 if R = 0.

    R counts the relevant documents of the WHOLE judgment set, retrieved or not, so recall can
    stay below 1 when every result is relevant.
    """
    flags = np.asarray(relevant, dtype=bool)
    return _ratio(np.count_nonzero(flags, axis=-1), n_relevant)


def average_precision(relevant: npt.ArrayLike, n_relevant: npt.ArrayLike) -> FloatArray:
    """MAP@k for one query: (sum over relevant ranks i <= min(k, n) of hits(i) / i) / R.

    R is over the whole judgment set (not min(R, k) as in some definitions); 0 when no relevant
    document is retrieved.
    """
    flags = np.asarray(relevant, dtype=bool)
    hits = np.cumsum(flags, axis=-1)
    ranks = np.arange(1, flags.shape[-1] + 1, dtype=np.float64)
    terms = np.where(flags, hits / ranks, 0.0)
    found = hits[..., -1] if flags.shape[-1] else np.zeros(flags.shape[:-1], dtype=np.int64)
    return np.where(found > 0, _ratio(_sequential_sum(terms), n_relevant), 0.0)


def reciprocal_rank(relevant: npt.ArrayLike) -> FloatArray:
    """MRR for one query: 1 / rank of the first relevant result within min(k, n), else 0."""
    flags = np.asarray(relevant, dtype=bool)
    if flags.shape[-1] == 0:
        return np.zeros(flags.shape[:-1])
    first = np.argmax(flags, axis=-1)
    return np.where(flags.any(axis=-1), 1.0 / (first + 1.0), 0.0)


def hit_rate(relevant: npt.ArrayLike) -> FloatArray:
    """HitRate@k for one query: 1 when any of the first min(k, n) results is relevant, else 0.

    The relevant flags are exactly those Precision@k and MAP@k count, so HitRate@k is 1 exactly
    when MRR is above 0; over a query set its mean is the share of queries with a relevant hit.
    """
    flags = np.asarray(relevant, dtype=bool)
    return np.asarray(flags.any(axis=-1), dtype=np.float64)


def dcg(ratings: npt.ArrayLike) -> FloatArray:
    """DCG@k = sum over i = 1..min(k, n) of (2^rel_i - 1) / log2(i + 1), exponential gain.

    ``rel_i`` is the raw graded rating of the result at rank i (unjudged -> 0, gain 0); ESCI's 100
    gives 2^100 - 1, still finite. ``log2`` is ``ln(i + 1) / ln 2`` like the plugin's.
    """
    values = np.asarray(ratings, dtype=np.float64)
    with np.errstate(invalid="ignore"):
        terms = (_exp2(values) - 1.0) / _discount(values.shape[-1])
    return _sequential_sum(terms)


def ndcg(ratings: npt.ArrayLike, ideal: npt.ArrayLike) -> FloatArray:
    """NDCG@k = DCG@k / IDCG@k, 0 when IDCG <= 0; exponential gain, log2 discount.

    ``ideal``: ALL ratings of the judgment set sorted descending and cut at k (not only the
    retrieved ones), padded with 0. The DCG in the ratio is unrounded.
    """
    gained, best = dcg(ratings), dcg(ideal)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(best > 0, gained / np.where(best > 0, best, 1.0), 0.0)


def _ratio(num: npt.ArrayLike, den: npt.ArrayLike) -> FloatArray:
    """num / den elementwise, 0 where den <= 0."""
    top, bottom = np.broadcast_arrays(
        np.asarray(num, dtype=np.float64), np.asarray(den, dtype=np.float64)
    )
    out = np.zeros(top.shape)
    np.divide(top, bottom, out=out, where=bottom > 0)
    return out


def _sequential_sum(terms: FloatArray) -> FloatArray:
    """Left-to-right sum over the last axis (as a Java loop adds); trailing zeros change nothing."""
    if terms.shape[-1] == 0:
        return np.zeros(terms.shape[:-1])
    return np.asarray(np.cumsum(terms, axis=-1)[..., -1], dtype=np.float64)


def _exp2(values: FloatArray) -> FloatArray:
    """2^r, the same on every machine: exact for whole r, the C library's ``pow`` otherwise.

    numpy's vectorised ``power`` may differ from ``pow`` in the last bit, and by CPU; a whole
    rating (the usual case) is an exact ``ldexp``; other ratings repeat a lot, so ``pow`` runs
    once per distinct value.
    """
    out = np.empty(values.shape)
    whole = values == np.floor(values)
    exponents = np.clip(values[whole], -1100, 1100).astype(np.int64)
    with np.errstate(over="ignore"):
        out[whole] = np.ldexp(1.0, exponents)
    rest = values[~whole]
    if rest.size:
        distinct, inverse = np.unique(rest, return_inverse=True)
        out[~whole] = np.array([_pow2(float(r)) for r in distinct])[inverse]
    return out


def _pow2(r: float) -> float:
    try:
        return 2.0**r
    except OverflowError:
        return math.inf


@lru_cache(maxsize=64)
def _discount(width: int) -> FloatArray:
    """log2(i + 1) for ranks i = 1..width, as ``Math.log(i + 1) / Math.log(2)``."""
    values = np.array([math.log(i + 1) / math.log(2) for i in range(1, width + 1)])
    values.flags.writeable = False
    return values


# ---------------------------------------------------------------------------------------------
# Ratings




def validate_ratings(judgments: Mapping[str, Any]) -> dict[str, float]:
    """Parse every rating as a finite float, or fail naming the first bad one (docs/algorithms.md,
    "Formulas").

    Strings follow Java's ``Double.parseDouble`` (``"0.7"``, ``" 100.000 "``, ``"1e2"``, ``"3d"``;
    not Python-only forms such as ``"1_0"``); numbers are taken as they are; booleans and other
    types are refused. Checked over the whole set, because a rating of a document that is not
    retrieved still feeds the threshold, R and the IDCG.
    """
    parsed: dict[str, float] = {}
    for doc_id, raw in judgments.items():
        value = _parse_text(raw) if type(raw) is str else _parse_rating(raw)
        if value is None or not math.isfinite(value):
            shown = raw if isinstance(raw, str) else java_string(raw)
            raise MetricError(
                f"Invalid judgment rating [{shown}] for document [{doc_id}]: "
                "rating must be a finite number"
            )
        parsed[doc_id] = value
    return parsed


def _parse_rating(raw: Any) -> float | None:
    """A rating as a float (possibly infinite or NaN), or None when it is not a number at all."""
    if isinstance(raw, bool):
        return None
    if isinstance(raw, Real):
        try:
            return float(raw)
        except OverflowError:  # an int beyond the double range, Java's Infinity
            return math.inf
    if not isinstance(raw, str):
        return None
    return _parse_text(raw)


@lru_cache(maxsize=4096)
def _parse_text(raw: str) -> float | None:
    """``_parse_rating`` of a string, remembered: a judgment list repeats a few rating strings
    ("0.000", "1.000" ...) thousands of times, and a run parses each list once per query."""
    text = raw.strip(JAVA_BLANK)
    if JAVA_DECIMAL.fullmatch(text):
        return float(text.rstrip("fFdD"))
    if JAVA_HEX.fullmatch(text):
        return float.fromhex(text.rstrip("fFdD"))
    return None


def _check_finite(doc_ids: Sequence[str], ratings: FloatArray) -> None:
    """Refuse NaN or infinite ratings handed in as floats (``validate_ratings`` was skipped)."""
    bad = np.flatnonzero(~np.isfinite(ratings))
    if bad.size:
        i = int(bad[0])
        raise MetricError(
            f"Invalid judgment rating [{double_to_string(float(ratings[i]))}] for document "
            f"[{doc_ids[i]}]: rating must be a finite number"
        )


# ---------------------------------------------------------------------------------------------
# The metric set of one query, and of many


def metric_names(k: int) -> list[str]:
    """``Coverage@k, Precision@k, Recall@k, MAP@k, MRR, DCG@k, NDCG@k, HitRate@k``."""
    return [f"{base}@{k}" if at_k else base for base, at_k in METRIC_ORDER]


def plugin_metric_names(k: int) -> list[str]:
    """The plugin's seven, ``Coverage@k`` to ``NDCG@k``: what a plugin-written result holds."""
    return metric_names(k)[: len(PLUGIN_METRIC_ORDER)]


def evaluate(
    doc_ids: Sequence[str], judgments: Mapping[str, float], k: int
) -> list[tuple[str, float]]:
    """The plugin's metric set of one result list, then HitRate@k, in order, unrounded.

    ``doc_ids``: result ids in rank order (n of them; Coverage uses all n, the rest the first
    min(k, n)); ``judgments``: doc id -> finite rating (see ``validate_ratings``); ``k``: the
    experiment's ``size``.
    """
    _check_k(k)
    ratings = np.fromiter(judgments.values(), dtype=np.float64, count=len(judgments))
    _check_finite(list(judgments), ratings)
    threshold = relevance_threshold(ratings)
    n_relevant = int(np.count_nonzero((ratings >= threshold) & (ratings > 0)))

    depth = min(k, len(doc_ids))
    judged = np.fromiter((d in judgments for d in doc_ids), dtype=bool, count=len(doc_ids))
    at_rank = np.fromiter(
        (judgments.get(d, 0.0) for d in islice(doc_ids, depth)), dtype=np.float64, count=depth
    )
    relevant = (at_rank >= threshold) & (at_rank > 0)
    ideal = np.sort(ratings)[::-1][:k]

    values = (
        coverage(judged),
        precision(relevant),
        recall(relevant, n_relevant),
        average_precision(relevant, n_relevant),
        reciprocal_rank(relevant),
        dcg(at_rank),
        ndcg(at_rank, ideal),
        hit_rate(relevant),
    )
    return list(zip(metric_names(k), (float(v) for v in values), strict=True))


def evaluate_many(
    queries: Sequence[tuple[Sequence[str], Mapping[str, float]]], k: int
) -> list[list[tuple[str, float]]]:
    """``evaluate`` for many (doc_ids, judgments) pairs at once, with identical numbers.

    Vectorised: one Python pass reads the ids and ratings, then thresholds, R, the ideal lists and
    every metric are computed on padded (queries x ranks) arrays.
    """
    return in_slices(queries, k, _evaluate_batch)


def _evaluate_batch(
    queries: Sequence[tuple[Sequence[str], Mapping[str, float]]], k: int
) -> list[list[tuple[str, float]]]:
    threshold, n_relevant, ideal = judgment_stats(queries, k)
    looked_up, n = ranked_ratings(queries)
    judged = ~np.isnan(looked_up)
    depth = np.minimum(n, k)
    at_rank = np.where(judged, looked_up, 0.0)[:, : int(depth.max(initial=0))]
    relevant = (at_rank >= threshold[:, None]) & (at_rank > 0)

    table = np.stack(
        [
            coverage(judged, n),
            precision(relevant, depth),
            recall(relevant, n_relevant),
            average_precision(relevant, n_relevant),
            reciprocal_rank(relevant),
            dcg(at_rank),
            ndcg(at_rank, ideal),
            hit_rate(relevant),
        ],
        axis=-1,
    )
    names = metric_names(k)
    return [list(zip(names, row, strict=True)) for row in table.tolist()]


def judgment_stats(
    queries: Sequence[tuple[Sequence[str], Mapping[str, float]]], k: int
) -> tuple[FloatArray, FloatArray, FloatArray]:
    """Per query of a batch, from ALL its ratings: the relevance threshold, R (relevant
    documents of the whole set) and the ideal ratings cut at k (queries x min(k, widest set)),
    padded with 0. Refuses a rating that is not finite."""
    count = len(queries)
    rows = np.arange(count)
    m = np.fromiter((len(j) for _, j in queries), dtype=np.int64, count=count)

    # Ratings of every query, sorted ascending within each query.
    ratings = np.fromiter(
        chain.from_iterable(j.values() for _, j in queries), dtype=np.float64, count=int(m.sum())
    )
    if not np.isfinite(ratings).all():
        _check_finite([d for _, j in queries for d in j], ratings)
    owner = np.repeat(rows, m)
    ascending = ratings[np.lexsort((ratings, owner))]
    ends = np.cumsum(m)
    has = m > 0
    last = np.where(has, ends - 1, 0)
    p90 = ends - m + np.clip(np.ceil(0.9 * m).astype(np.int64) - 1, 0, np.maximum(m - 1, 0))
    if ascending.size:
        top = np.where(has, ascending[last], 0.0)
        threshold = np.where(has & (top != 0), np.maximum(0.5 * top, ascending[p90 * has]), 0.0)
    else:
        threshold = np.zeros(count)
    is_relevant = (ratings >= threshold[owner]) & (ratings > 0)
    n_relevant = np.bincount(owner, weights=is_relevant, minlength=count)

    ideal_width = int(min(k, m.max(initial=0)))
    column = np.arange(ideal_width)
    in_ideal = column < np.minimum(m, k)[:, None]
    ideal = np.where(in_ideal, ascending[np.where(in_ideal, last[:, None] - column, 0)], 0.0)
    return threshold, n_relevant.astype(np.float64), np.asarray(ideal, dtype=np.float64)


def ranked_ratings(
    queries: Sequence[tuple[Sequence[str], Mapping[str, float]]],
) -> tuple[FloatArray, npt.NDArray[np.int64]]:
    """(ratings of every result in rank order, queries x widest list, NaN for an unjudged
    document and past each list's end; n, the results per list)."""
    count = len(queries)
    n = np.fromiter((len(ids) for ids, _ in queries), dtype=np.int64, count=count)
    looked_up = np.fromiter(
        chain.from_iterable(map(j.get, ids, repeat(math.nan)) for ids, j in queries),
        dtype=np.float64,
        count=int(n.sum()),
    )
    out = np.full((count, int(n.max(initial=0))), math.nan)
    out[np.arange(out.shape[1]) < n[:, None]] = looked_up
    return out, n


def in_slices(
    queries: Sequence[tuple[Sequence[str], Mapping[str, float]]],
    k: int,
    batch: Callable[
        [Sequence[tuple[Sequence[str], Mapping[str, float]]], int], list[list[tuple[str, float]]]
    ],
) -> list[list[tuple[str, float]]]:
    """``batch`` (one batch's metrics) over ``queries`` in slices whose padded matrices stay
    within ``_BATCH_CELLS``, the results in order."""
    _check_k(k)
    results: list[list[tuple[str, float]]] = []
    for start, stop in _slices(queries, k):
        results.extend(batch(queries[start:stop], k))
    return results


def _slices(
    queries: Sequence[tuple[Sequence[str], Mapping[str, float]]], k: int
) -> Iterator[tuple[int, int]]:
    """Consecutive [start, stop) ranges whose padded matrices stay within ``_BATCH_CELLS``."""
    start, widest = 0, 1
    for i, (ids, judgments) in enumerate(queries):
        width = max(len(ids), min(k, len(judgments)), 1)
        if i > start and (i - start + 1) * max(widest, width) > _BATCH_CELLS:
            yield start, i
            start, widest = i, width
        else:
            widest = max(widest, width)
    if start < len(queries):
        yield start, len(queries)


def _check_k(k: int) -> None:
    if isinstance(k, bool) or not isinstance(k, int | np.integer) or k < 0:
        raise ValueError(f"k must be a non-negative integer, got {k!r}")
