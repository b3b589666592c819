"""HYBRID_OPTIMIZER scoring: the 82-variant grid and neural-search's hybrid score fusion, in Python.

The plugin runs a two-clause ``hybrid`` query under a temporary search pipeline per variant
(docs/algorithms.md, "Hybrid optimizer"). A cluster without the neural-search plugin cannot run
``hybrid`` queries, so the workbench runs each clause as an ordinary search and fuses the hit lists
here, following the newest neural-search ``main`` sources (paths under
``src/main/java/org/opensearch/neuralsearch/``):

* normalization-processor: ``processor/NormalizationProcessorWorkflow.java`` normalises every
  sub-query over all its collected hits, then ``processor/combination/ScoreCombiner.java``
  combines per document. The per-document input is a ``float[]`` that Java zero-initialises, so a
  document missing from a sub-query takes part with score 0.0.
* score-ranker-processor (RRF): ``processor/RRFProcessor.java`` and
  ``processor/factory/RRFProcessorFactory.java``; rank scores from
  ``processor/normalization/RRFNormalizationTechnique.java`` / ``RRFScoreNormalizer.java``,
  summed by ``processor/combination/RRFScoreCombinationTechnique.java``.

Arithmetic is Java's: scores are ``float`` (IEEE binary32) and every step rounds to float where
the Java code does (numpy ``float32`` here), so combined scores are bit-identical and ties fall
out the same way. Only ``Math.log``/``Math.exp`` (geometric mean) may differ from libm by an ulp
of a double, which almost never survives the narrowing to float.

What is identical and what can differ: neural-search normalises a sub-query over the hits it
collected from each shard, up to the hybrid query's depth (``pagination_depth`` if set, else
``from + size``), then combines and ranks per shard and merges the shards' lists. Results are
therefore identical when the index has one shard and each list given here is that sub-query's
top-``depth`` hit list (which an ordinary search returns with the same scores and order). With
several shards neural-search's statistics cover up to ``depth`` hits per shard (more than one
global top-``depth`` list), RRF ranks are per shard, and each shard is combined separately, so
scores and order can differ. Ties in the combined score keep Java ``HashMap`` order of Lucene doc
ids, see :func:`hybrid_scores`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from decimal import ROUND_HALF_EVEN, Decimal
from typing import Any

import numpy as np

NORMALIZATIONS = ("min_max", "l2", "z_score")
COMBINATIONS = ("arithmetic_mean", "geometric_mean", "harmonic_mean", "rrf")
RRF_RANK_CONSTANTS = (1, 5, 10, 20, 60)

_SCORE_COMBINATIONS = ("arithmetic_mean", "geometric_mean", "harmonic_mean")
_WEIGHTS = tuple(round(step / 10, 1) for step in range(11))
_RRF_DEFAULT_RANK_CONSTANT = 60
_RRF_RANK_CONSTANT_RANGE = (1, 10_000)

_F32 = np.float32
_ZERO = _F32(0.0)
_ONE = _F32(1.0)
_MIN_MAX_FLOOR = _F32(0.001)  # MIN_SCORE of MinMaxScoreNormalizer / ZScoreNormalizer
_FLOAT_MIN_VALUE = _F32(1.4e-45)  # Java Float.MIN_VALUE, the seed of min-max's maximum
_FLOAT_MAX_VALUE = _F32(3.4028235e38)  # Java Float.MAX_VALUE, the seed of min-max's minimum


# --------------------------------------------------------------------------------------------
# Variant grid, parameter strings, pipelines (docs/algorithms.md, "Hybrid optimizer")


def variant_grid() -> list[dict[str, Any]]:
    """The 82 variants (docs/algorithms.md, "Hybrid optimizer") in a stable order.

    Five RRF variants (one per rank constant), then ``min_max`` and ``l2`` x arithmetic /
    geometric / harmonic mean x 11 weights, then ``z_score`` x ``arithmetic_mean`` x 11 weights
    (neural-search refuses z_score with any other combination). Weights are ``[w, 1 - w]`` with
    both rounded to one decimal, so ``0.7`` never becomes ``0.30000000000000004``.
    """
    grid: list[dict[str, Any]] = [
        {"combination": "rrf", "rank_constant": k} for k in RRF_RANK_CONSTANTS
    ]
    pairs = [(n, c) for n in ("min_max", "l2") for c in _SCORE_COMBINATIONS]
    pairs.append(("z_score", "arithmetic_mean"))
    for normalization, combination in pairs:
        grid.extend(
            {"normalization": normalization, "combination": combination,
             "weights": [w, round(1.0 - w, 1)]}
            for w in _WEIGHTS
        )
    return grid


def variant_parameters_string(params: Mapping[str, Any]) -> str:
    """The evaluation result's ``experimentVariantParameters`` (docs/algorithms.md, "Hybrid
    optimizer").

    Follows the plugin's ``ExperimentVariant.getTextualParameters`` (search-relevance,
    ``model/ExperimentVariant.java``): ``key=value`` pairs joined by ``", "`` in the order
    combination, normalization, weights, rank_constant, absent keys skipped. Weights are Java
    ``float`` values printed with ``NumberFormat`` (``Locale.ROOT``, 0 to 2 fraction digits,
    HALF_EVEN) and joined by ``;``: 0.3 -> ``0.3``, 0.0 -> ``0``, 1.0 -> ``1``. That is what the
    plugin writes, so it is used instead of ``Double.toString`` (which would give ``0.0``/``1.0``
    and split Dashboards' grouping by this string from the plugin's own documents).
    """
    parts: list[str] = []
    for key in ("combination", "normalization"):
        if params.get(key) is not None:
            parts.append(f"{key}={params[key]}")
    weights = params.get("weights")
    if weights:
        parts.append("weights=" + ";".join(_java_number_format(w) for w in weights))
    if params.get("rank_constant") is not None:
        parts.append(f"rank_constant={int(params['rank_constant'])}")
    return ", ".join(parts)


def pipeline_body(params: Mapping[str, Any]) -> dict[str, Any]:
    """The temporary search pipeline of a variant, for clusters that have neural-search.

    RRF puts ``rank_constant`` directly in the combination clause, where
    ``RRFProcessorFactory`` reads it. Weights are sent as the rounded decimals; neural-search
    reads them as ``Double`` and narrows to ``float``, the same floats the plugin's ``(double)
    0.3f`` values give.
    """
    _validate(params, None)
    if params["combination"] == "rrf":
        combination: dict[str, Any] = {
            "technique": "rrf",
            "rank_constant": int(params.get("rank_constant", _RRF_DEFAULT_RANK_CONSTANT)),
        }
        return {"phase_results_processors": [{"score-ranker-processor": {
            "combination": combination}}]}
    score_combination: dict[str, Any] = {"technique": params["combination"]}
    if params.get("weights") is not None:
        score_combination["parameters"] = {"weights": [float(w) for w in params["weights"]]}
    return {"phase_results_processors": [{"normalization-processor": {
        "normalization": {"technique": params["normalization"]},
        "combination": score_combination,
    }}]}


def _java_number_format(value: float) -> str:
    """``NumberFormat.getNumberInstance(Locale.ROOT)``, at most 2 fraction digits, of a float."""
    exact = Decimal(float(_F32(value)))
    rounded = exact.quantize(Decimal("0.01"), rounding=ROUND_HALF_EVEN)
    text = f"{abs(rounded):,f}"
    if "." in text:
        text = text.rstrip("0").rstrip(".")
    return ("-" if rounded.is_signed() else "") + text


# --------------------------------------------------------------------------------------------
# Fusion


def hybrid_scores(
    subquery_hits: Sequence[Sequence[tuple[str, float]]],
    params: Mapping[str, Any],
    size: int,
    *,
    lucene_doc_ids: Mapping[str, int] | None = None,
) -> list[tuple[str, float]]:
    """Fuse the ranked hits of each sub-query into the result neural-search would return.

    ``subquery_hits[j]`` is sub-query ``j``'s hit list in rank order as ``(doc id, raw score)``
    (its top ``depth`` hits, see the module docstring). Every sub-query is normalised on its own,
    each document's scores are combined with the weights (a sub-query that did not return the
    document contributes 0.0), and documents are ranked by combined score, highest first. The
    top ``size`` come back as ``(doc id, combined score)``; scores are the exact float32 values.

    Ties: ``ScoreCombiner`` lists documents in the iteration order of a ``java.util.HashMap``
    keyed by Lucene doc id and sorts that list stably by score. With ``lucene_doc_ids`` (doc id
    -> shard-level Lucene doc id, e.g. the ``_doc`` sort value of a ``"sort": ["_score",
    "_doc"]`` search on a single-shard index) that order is reproduced exactly (unless a
    ``HashMap`` bin grows to treeification, at 8+ colliding ids in a table of 64+ buckets).
    Without it, tied documents keep first-seen order: sub-query 0's hits in rank order, then
    the documents only later sub-queries returned.
    """
    _validate(params, len(subquery_hits))
    if size <= 0:
        return []
    raw = [[_F32(score) for _, score in hits] for hits in subquery_hits]
    ids = [[doc for doc, _ in hits] for hits in subquery_hits]
    for doc_ids in ids:
        if len(set(doc_ids)) != len(doc_ids):
            raise ValueError("a sub-query returned the same document id twice; "
                             "key hits by index and id when searching several indices")
    if not any(ids):
        return []
    with np.errstate(all="ignore"):
        if params["combination"] == "rrf":
            rank_constant = int(params.get("rank_constant", _RRF_DEFAULT_RANK_CONSTANT))
            normalized = [[_rrf_rank_score(rank, rank_constant) for rank in range(len(s))]
                          for s in raw]
        else:
            normalized = _NORMALIZERS[params["normalization"]](raw)
        weights = [_F32(w) for w in params.get("weights") or [1.0] * len(raw)]
        per_doc: dict[str, list[np.float32]] = {}
        for j, doc_ids in enumerate(ids):
            for doc, score in zip(doc_ids, normalized[j], strict=True):
                per_doc.setdefault(doc, [_ZERO] * len(raw))[j] = score
        combine = _COMBINERS[params["combination"]]
        combined = {doc: combine(scores, weights) for doc, scores in per_doc.items()}
    order = list(per_doc) if lucene_doc_ids is None else _java_order(ids, lucene_doc_ids)
    ranked = sorted(order, key=lambda doc: _java_float_key(combined[doc]), reverse=True)
    return [(doc, float(combined[doc])) for doc in ranked[:size]]


def _validate(params: Mapping[str, Any], subqueries: int | None) -> None:
    """Refuse what neural-search's processor factories refuse, with their messages."""
    combination = params.get("combination")
    if combination not in COMBINATIONS:
        raise ValueError(f"provided combination technique is not supported: {combination}")
    if combination == "rrf":
        k = params.get("rank_constant", _RRF_DEFAULT_RANK_CONSTANT)
        low, high = _RRF_RANK_CONSTANT_RANGE
        if isinstance(k, bool) or not isinstance(k, int) or not low <= k <= high:
            raise ValueError("rank constant must be in the interval between 1 and 10000, "
                             f"submitted rank constant: {k}")
        return
    normalization = params.get("normalization")
    if normalization not in NORMALIZATIONS:
        raise ValueError(f"provided normalization technique is not supported: {normalization}")
    if normalization == "z_score" and combination != "arithmetic_mean":
        raise ValueError("Z Score supports only arithmetic_mean combination technique")
    weights = params.get("weights")
    if weights is None:
        return
    floats = [_F32(w) for w in weights]
    if any(not 0.0 <= w <= 1.0 for w in floats):
        raise ValueError("all weights must be in range [0.0 ... 1.0], "
                         f"submitted weights: {weights}")
    if abs(float(sum(floats, _ZERO)) - 1.0) > 0.01:
        raise ValueError("sum of weights for combination must be equal to 1.0, "
                         f"submitted weights: {weights}")
    if subqueries is not None and len(floats) != subqueries:
        raise ValueError(f"number of weights [{len(floats)}] must match number of sub-queries "
                         f"[{subqueries}] in hybrid query")


# --------------------------------------------------------------------------------------------
# Normalizations: one list of float32 scores per sub-query in, the same shape out


def _min_max(raw: list[list[np.float32]]) -> list[list[np.float32]]:
    """(score - min) / (max - min) per sub-query; 1.0 for a lone score; exact 0 becomes 0.001.

    ``normalization/MinMaxScoreNormalizationTechnique.java`` and ``MinMaxScoreNormalizer.java``
    without bounds (the optimizer sets none). The maximum is seeded with ``Float.MIN_VALUE``, so a
    sub-query whose scores are all <= 0 gets max = 1.4e-45 rather than its own maximum: all-zero
    scores normalise to 0.001 each, not 1.0.
    """
    out: list[list[np.float32]] = []
    for scores in raw:
        low = min([_FLOAT_MAX_VALUE, *scores])
        high = max([_FLOAT_MIN_VALUE, *scores])
        out.append([_min_max_one(s, low, high) for s in scores])
    return out


def _min_max_one(score: np.float32, low: np.float32, high: np.float32) -> np.float32:
    # The lone-score case (max == min == score) and the equal-bounds case both give 1.0.
    if _same_float(high, low):
        return _ONE
    value = _F32(_F32(score - low) / _F32(high - low))
    return _MIN_MAX_FLOOR if value == 0.0 else value


def _l2(raw: list[list[np.float32]]) -> list[list[np.float32]]:
    """score / sqrt(sum of squares) per sub-query; 0.0 when the norm is 0.

    ``normalization/L2ScoreNormalizationTechnique.java`` / ``L2ScoreNormalizer.java``: the sum of
    squares is a float accumulated in hit order, the square root is taken in double and narrowed.
    Negative scores stay negative (the means then skip them).
    """
    out: list[list[np.float32]] = []
    for scores in raw:
        total = _ZERO
        for s in scores:
            total = _F32(total + _F32(s * s))
        norm = _F32(math.sqrt(float(total)))
        out.append([_ZERO if norm == 0 else _F32(s / norm) for s in scores])
    return out


def _z_score(raw: list[list[np.float32]]) -> list[list[np.float32]]:
    """(score - mean) / std per sub-query, floored at 0.001, with neural-search's edge cases.

    ``normalization/ZScoreNormalizationTechnique.java`` / ``ZScoreNormalizer.java``, statistics
    from commons-math3 ``DescriptiveStatistics`` in double: two-pass corrected mean, *sample*
    (n - 1) standard deviation (0 for one value), all narrowed to float. A score equal to the
    mean returns the sub-query's raw maximum (so a lone hit keeps its raw score), a zero standard
    deviation returns the raw minimum, and a z-score <= 0 (every below-mean and negative value)
    becomes 0.001.
    """
    out: list[list[np.float32]] = []
    for scores in raw:
        if not scores:
            out.append([])
            continue
        values = [float(s) for s in scores]
        mean = _commons_mean(values)
        std = math.sqrt(_commons_variance(values, mean)) if len(values) > 1 else 0.0
        mean32, std32 = _F32(mean), _F32(std)
        high, low = _F32(max(values)), _F32(min(values))
        out.append([_z_score_one(s, mean32, std32, high, low) for s in scores])
    return out


def _z_score_one(score: np.float32, mean: np.float32, std: np.float32, high: np.float32,
                 low: np.float32) -> np.float32:
    if _same_float(mean, score):
        return high
    if _same_float(std, _ZERO):
        return low
    value = _F32(_F32(score - mean) / std)
    return _MIN_MAX_FLOOR if value <= 0.0 else value


def _commons_mean(values: list[float]) -> float:
    """commons-math3 ``Mean``: sum / n, then the second-pass correction."""
    total = 0.0
    for v in values:
        total += v
    xbar = total / len(values)
    correction = 0.0
    for v in values:
        correction += v - xbar
    return xbar + correction / len(values)


def _commons_variance(values: list[float], mean: float) -> float:
    """commons-math3 bias-corrected ``Variance`` around ``mean`` (two or more values)."""
    accum = accum2 = 0.0
    for v in values:
        dev = v - mean
        accum += dev * dev
        accum2 += dev
    n = float(len(values))
    return (accum - accum2 * accum2 / n) / (n - 1.0)


def _rrf_rank_score(rank: int, rank_constant: int) -> np.float32:
    """1 / (rank_constant + rank + 1) for a 0-based rank, rounded HALF_UP to 10 decimals.

    ``normalization/RRFScoreNormalizer.java`` (``scoreForRank``), equal to the
    ``BigDecimal.divide(..., 10, HALF_UP).floatValue()`` of ``RRFNormalizationTechnique.java``.
    """
    denominator = rank_constant + rank + 1
    numerator = (2 * 10**10 + denominator) // (2 * denominator)
    return _F32(numerator / 1e10)


_NORMALIZERS: dict[str, Callable[[list[list[np.float32]]], list[list[np.float32]]]] = {
    "min_max": _min_max, "l2": _l2, "z_score": _z_score,
}


# --------------------------------------------------------------------------------------------
# Combinations: one document's per-sub-query scores (0.0 where it was not returned) in


def _arithmetic_mean(scores: list[np.float32], weights: list[np.float32]) -> np.float32:
    """sum(w * s) / sum(w) over scores >= 0; a missing document's 0.0 counts with its weight.

    ``combination/ArithmeticMeanScoreCombinationTechnique.java``; 0.0 if no weight is counted.
    """
    total = weight_sum = _ZERO
    for score, weight in zip(scores, weights, strict=True):
        if score >= 0.0:
            total = _F32(total + _F32(score * weight))
            weight_sum = _F32(weight_sum + weight)
    return _ZERO if weight_sum == 0.0 else _F32(total / weight_sum)


def _geometric_mean(scores: list[np.float32], weights: list[np.float32]) -> np.float32:
    """exp(sum(w * ln s) / sum(w)) over scores > 0: zero and missing scores are skipped.

    ``combination/GeometricMeanScoreCombinationTechnique.java``: the log sum is a float that
    each ``w * Math.log(s)`` (double) is added to, the quotient is float, ``Math.exp`` narrows.
    """
    ln_sum = weight_sum = _ZERO
    for score, weight in zip(scores, weights, strict=True):
        if score <= 0:
            continue
        weight_sum = _F32(weight_sum + weight)
        ln_sum = _F32(float(ln_sum) + float(weight) * math.log(float(score)))
    if weight_sum == 0:
        return _ZERO
    return _F32(math.exp(float(_F32(ln_sum / weight_sum))))


def _harmonic_mean(scores: list[np.float32], weights: list[np.float32]) -> np.float32:
    """sum(w) / sum(w / s) over scores > 0: zero and missing scores are skipped.

    ``combination/HarmonicMeanScoreCombinationTechnique.java``; 0.0 unless sum(w / s) > 0.
    """
    weight_sum = harmonics = _ZERO
    for score, weight in zip(scores, weights, strict=True):
        if score <= 0:
            continue
        weight_sum = _F32(weight_sum + weight)
        harmonics = _F32(harmonics + _F32(weight / score))
    return _F32(weight_sum / harmonics) if harmonics > 0 else _ZERO


def _rrf_sum(scores: list[np.float32], weights: list[np.float32]) -> np.float32:
    """Sum of rank scores (weight 1.0 each): ``combination/RRFScoreCombinationTechnique.java``."""
    total = weight_sum = _ZERO
    for score, weight in zip(scores, weights, strict=True):
        if score >= 0.0:
            total = _F32(total + _F32(score * weight))
            weight_sum = _F32(weight_sum + weight)
    return _ZERO if weight_sum == 0.0 else total


_COMBINERS: dict[str, Callable[[list[np.float32], list[np.float32]], np.float32]] = {
    "arithmetic_mean": _arithmetic_mean, "geometric_mean": _geometric_mean,
    "harmonic_mean": _harmonic_mean, "rrf": _rrf_sum,
}


# --------------------------------------------------------------------------------------------
# Java float comparison and HashMap<Integer, ?> iteration order


def _same_float(a: np.float32, b: np.float32) -> bool:
    """``Float.compare(a, b) == 0``: NaN equals NaN, -0.0 differs from 0.0."""
    if math.isnan(a) or math.isnan(b):
        return bool(math.isnan(a) and math.isnan(b))
    return bool(a == b) and math.copysign(1.0, a) == math.copysign(1.0, b)


def _java_float_key(x: np.float32) -> tuple[bool, float, bool]:
    """Sort key ordering floats as ``Float.compare`` does (-0.0 < 0.0, NaN above all)."""
    nan = math.isnan(x)
    return nan, 0.0 if nan else float(x), math.copysign(1.0, x) > 0


def _java_order(ids: Sequence[Sequence[str]], lucene_doc_ids: Mapping[str, int]) -> list[str]:
    """``ScoreCombiner``'s pre-sort order: the key order of its two HashMaps.

    ``getNormalizedScoresPerDocument`` fills a ``HashMap`` with ``computeIfAbsent`` per hit,
    sub-query by sub-query; ``Collectors.toMap`` then copies it into a second ``HashMap`` with
    ``putIfAbsent``; ``new ArrayList<>(keySet())`` reads that map's order.
    """
    docs = {doc for doc_ids in ids for doc in doc_ids}
    missing = docs - set(lucene_doc_ids)
    if missing:
        raise ValueError(f"no Lucene doc id for {sorted(missing)}")
    by_key = {int(lucene_doc_ids[doc]): doc for doc in docs}
    if len(by_key) != len(docs):
        raise ValueError("two documents share a Lucene doc id")
    first = _JavaHashMapOrder()
    for doc_ids in ids:
        for doc in doc_ids:
            first.compute_if_absent(int(lucene_doc_ids[doc]))
    second = _JavaHashMapOrder()
    for key in first.order():
        second.put_if_absent(key)
    return [by_key[key] for key in second.order()]


class _JavaHashMapOrder:
    """Key order of a ``java.util.HashMap<Integer, ?>`` (JDK 8+ table, 16 buckets, load 0.75).

    Only what decides iteration order is modelled: bucket = (h ^ h >>> 16) & (n - 1), bins in
    bucket order, ``putVal`` appending to a bin and resizing after the insert, ``computeIfAbsent``
    resizing before the lookup and inserting at the head of the bin, and a bin reaching the
    treeify threshold in a table under 64 buckets doubling the table. Order inside treeified bins
    (64+ buckets) is approximated by list order.
    """

    def __init__(self) -> None:
        self._bins: list[list[int]] = []
        self._size = 0
        self._threshold = 0
        self.approximate = False  # a bin was treeified: its order is list order, not Java's

    def order(self) -> list[int]:
        return [key for bin_ in self._bins for key in bin_]

    def compute_if_absent(self, key: int) -> None:
        if self._size > self._threshold or not self._bins:
            self._resize()
        bin_ = self._bins[self._bucket(key)]
        if key in bin_:
            return
        bin_.insert(0, key)
        if len(bin_) - 1 >= 7:
            self._treeify_bin()
        self._size += 1

    def put_if_absent(self, key: int) -> None:
        if not self._bins:
            self._resize()
        bin_ = self._bins[self._bucket(key)]
        if key in bin_:
            return
        bin_.append(key)
        if len(bin_) - 2 >= 7:
            self._treeify_bin()
        self._size += 1
        if self._size > self._threshold:
            self._resize()

    def _bucket(self, key: int) -> int:
        h = key & 0xFFFFFFFF
        return (h ^ (h >> 16)) & (len(self._bins) - 1)

    def _treeify_bin(self) -> None:
        if len(self._bins) < 64:
            self._resize()
        else:
            self.approximate = True

    def _resize(self) -> None:
        old = self._bins
        if not old:
            self._bins, self._threshold = [[] for _ in range(16)], 12
            return
        self._bins = [[] for _ in range(2 * len(old))]
        self._threshold *= 2
        for bin_ in old:
            for key in bin_:
                self._bins[self._bucket(key)].append(key)
