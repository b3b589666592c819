"""Condensed-list metrics and Judged@k, for judgment lists with holes (docs/algorithms.md,
"Condensed metrics and Judged@k"; issue 45).

A judgment list is made once, for the configurations of that day; a later configuration
retrieves documents nobody judged, which the standard metrics count as irrelevant. The condensed
metrics of Sakai (2007, "Alternatives to Bpref") and Sakai & Kando (2008) drop the unjudged
documents from the ranking, keeping the order of the rest, and compute the standard metric on
that condensed list cut at k: ``NDCG'@k``, ``MAP'@k``, ``Precision'@k``. ``Judged@k`` says how
much of the top k was judged at all.

Not in ``pointwise.METRIC_ORDER``, the list of the plugin's ``metrics`` (and the workbench's
``exactMetrics``): experiments store these apart, as ``condensedMetrics``
(``experiments/pointwise.metrics_docs``), so the plugin's list stays as the plugin writes it.

Same layout as ``pointwise``: arrays by rank along the last axis, one list (1-D) or a batch of
lists (2-D, padded past each list's end with ``False`` / ``0.0``). Unlike the standard functions,
which take the first min(k, n) results already cut, these take ALL n results of a list and k,
because the cut at k comes after the condensing.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import numpy.typing as npt

from workbench.metrics.pointwise import (
    FloatArray,
    _check_finite,
    _check_k,
    _ratio,
    average_precision,
    in_slices,
    judgment_stats,
    ndcg,
    precision,
    ranked_ratings,
    relevance_threshold,
)

# The opt-in metric set, in order. ``True``: the name carries ``@k`` (all four do).
CONDENSED_METRIC_ORDER: tuple[tuple[str, bool], ...] = (
    ("Judged", True),
    ("NDCG'", True),
    ("MAP'", True),
    ("Precision'", True),
)


def judged_at_k(judged: npt.ArrayLike, k: int, n: npt.ArrayLike | None = None) -> FloatArray:
    """Judged@k = (#judged in the first min(k, n)) / min(k, n); 0 when min(k, n) = 0.

    ``judged``: bool (..., w), one flag per result in rank order (all n results, or at least the
    first k); ``n``: results per list (defaults to w, one unpadded list). The denominator is
    min(k, n), as Precision@k's, and as ir_measures' ``Judged@k``: two results, both judged, give
    Judged@10 = 1.

    Not Coverage@k: Coverage@k counts ALL n results and ignores k. The two agree whenever n <= k,
    which an experiment's lists are (it asks for ``size`` = k hits).
    """
    flags = np.asarray(judged, dtype=bool)
    width = flags.shape[-1]
    depth = np.minimum(width if n is None else np.asarray(n), k)
    return _ratio(np.count_nonzero(flags[..., :k], axis=-1), depth)


def condense(
    values: npt.ArrayLike, judged: npt.ArrayLike, k: int
) -> tuple[npt.NDArray[np.generic], npt.NDArray[np.int64]]:
    """The judged entries of ``values`` moved to the front in rank order, cut at k, and their
    count per list.

    ``values`` and ``judged``: (..., w), aligned by rank. Returns ``(condensed, depth)``:
    ``condensed`` (..., min(k, w)), padded with the zero of the dtype (``False`` / ``0.0``) past
    each list's judged results; ``depth`` = min(k, number judged), the condensed list's length.
    """
    array = np.asarray(values)
    flags = np.broadcast_to(np.asarray(judged, dtype=bool), array.shape)
    order = np.argsort(~flags, axis=-1, kind="stable")  # judged first, each group in rank order
    moved = np.take_along_axis(array, order, axis=-1)[..., :k]
    count = np.count_nonzero(flags, axis=-1)
    depth = np.minimum(count, k).astype(np.int64)
    keep = np.arange(moved.shape[-1]) < depth[..., None]
    return np.where(keep, moved, np.zeros((), dtype=array.dtype)), depth


def condensed_precision(relevant: npt.ArrayLike, judged: npt.ArrayLike, k: int) -> FloatArray:
    """Precision'@k: Precision@k of the condensed list, relevant / min(k, n'), n' = #judged.

    ``relevant``: bool (..., w) over all results (an unjudged result is dropped whatever its
    flag); 0 when nothing is judged.
    """
    flags, depth = condense(np.asarray(relevant, dtype=bool), judged, k)
    return precision(flags, depth)


def condensed_average_precision(
    relevant: npt.ArrayLike, judged: npt.ArrayLike, k: int, n_relevant: npt.ArrayLike
) -> FloatArray:
    """MAP'@k: MAP@k of the condensed list, (sum over relevant condensed ranks i <= k of
    hits(i) / i) / R, R the relevant documents of the whole judgment set."""
    flags, _ = condense(np.asarray(relevant, dtype=bool), judged, k)
    return average_precision(flags, n_relevant)


def condensed_ndcg(
    ratings: npt.ArrayLike, judged: npt.ArrayLike, k: int, ideal: npt.ArrayLike
) -> FloatArray:
    """NDCG'@k: NDCG@k of the condensed list (gain 2^r - 1, log2 discount over condensed ranks).

    ``ideal``: ALL ratings of the judgment set sorted descending and cut at k, as for NDCG@k; it
    does not change with condensing, since the ideal list holds judged documents only.
    """
    gains, _ = condense(np.asarray(ratings, dtype=np.float64), judged, k)
    return ndcg(gains, ideal)


def condensed_metric_names(k: int) -> list[str]:
    """``Judged@k, NDCG'@k, MAP'@k, Precision'@k``."""
    return [f"{base}@{k}" if at_k else base for base, at_k in CONDENSED_METRIC_ORDER]


def evaluate_condensed(
    doc_ids: Sequence[str], judgments: Mapping[str, float], k: int
) -> list[tuple[str, float]]:
    """The opt-in set of one result list, in ``CONDENSED_METRIC_ORDER``, unrounded.

    Arguments as ``pointwise.evaluate``: ``doc_ids`` all n results in rank order, ``judgments``
    doc id -> finite rating (``validate_ratings``), ``k`` the experiment's ``size``. Relevance is
    the query's threshold rule (docs/algorithms.md, "Relevance threshold") over all its ratings.
    """
    _check_k(k)
    ratings = np.fromiter(judgments.values(), dtype=np.float64, count=len(judgments))
    _check_finite(list(judgments), ratings)
    threshold = relevance_threshold(ratings)
    n_relevant = int(np.count_nonzero((ratings >= threshold) & (ratings > 0)))
    ideal = np.sort(ratings)[::-1][:k]

    n = len(doc_ids)
    judged = np.fromiter((d in judgments for d in doc_ids), dtype=bool, count=n)
    at_rank = np.fromiter((judgments.get(d, 0.0) for d in doc_ids), dtype=np.float64, count=n)
    relevant = (at_rank >= threshold) & (at_rank > 0)

    values = (
        judged_at_k(judged, k),
        condensed_ndcg(at_rank, judged, k, ideal),
        condensed_average_precision(relevant, judged, k, n_relevant),
        condensed_precision(relevant, judged, k),
    )
    return list(zip(condensed_metric_names(k), (float(v) for v in values), strict=True))


def evaluate_condensed_many(
    queries: Sequence[tuple[Sequence[str], Mapping[str, float]]], k: int
) -> list[list[tuple[str, float]]]:
    """``evaluate_condensed`` for many (doc_ids, judgments) pairs at once, with identical numbers
    (as ``pointwise.evaluate_many`` is to ``pointwise.evaluate``): the thresholds, R and ideal
    lists of the whole batch at once, then the condensing and every metric on padded
    (queries x ranks) arrays, in slices of bounded size."""
    return in_slices(queries, k, _condensed_batch)


def _condensed_batch(
    queries: Sequence[tuple[Sequence[str], Mapping[str, float]]], k: int
) -> list[list[tuple[str, float]]]:
    threshold, n_relevant, ideal = judgment_stats(queries, k)
    looked_up, n = ranked_ratings(queries)
    judged = ~np.isnan(looked_up)  # padding past a list's end is NaN: never judged
    at_rank = np.where(judged, looked_up, 0.0)
    relevant = (at_rank >= threshold[:, None]) & (at_rank > 0)
    table = np.stack(
        [
            judged_at_k(judged, k, n),
            condensed_ndcg(at_rank, judged, k, ideal),
            condensed_average_precision(relevant, judged, k, n_relevant),
            condensed_precision(relevant, judged, k),
        ],
        axis=-1,
    )
    names = condensed_metric_names(k)
    return [list(zip(names, row, strict=True)) for row in table.tolist()]
