"""Agreement between two judgment lists: does a candidate (say an LLM list) rate like a reference
(say an imported human list)?

Pure computation over two ``judgmentRatings`` lists (docs/contract.md, "Stored documents"); the
route loads them. Choices, each made once here:

* **Merging.** Within one list, entries whose query keys match (below) are merged: a query may
  repeat as separate entries. A (query, docId) rated more than once keeps its *last* rating in
  list order, as IMPORT does within one entry ("duplicate docIds collapse, last value wins").
* **Query keys.** Keys match by exact string after dropping an LLM-style custom-fields suffix:
  ``tv#{"referenceAnswer":"a television"}`` becomes ``tv`` (the text before the first ``#`` that
  is followed by a whole JSON object). ``#`` followed by anything else is kept (``c#`` stays
  ``c#``), so the 3.1 ``query#reference`` form is not stripped. Keys that differ only in their
  custom fields therefore merge, last rating wins. Reported keys are the stripped ones.
* **Binary.** Relevant = rating >= the list's own threshold; the reference is the truth.
* **Graded** (only when both lists show more than two distinct values over the pairs both
  rated): ratings become ordinal levels by rank, because two scales (LLM 0..1, ESCI 0/1/10/100)
  share no unit. ``dense_rank``: both lists have k distinct values; the i-th smallest of each is
  level i. ``quantile_matched_candidate`` / ``..._reference``: the counts differ; the list with
  fewer values (k) is dense-ranked, and the named list is cut into k levels where the other's
  cumulative level proportions fall, by mid-rank, ties kept together (a mid-rank exactly on a cut
  goes to the lower level). Then weighted kappa follows Cohen (1968) with weights |i-j| (linear)
  and (i-j)^2 (quadratic) - with quantile matching it measures agreement in ordering, not
  calibration.
* **Rank correlation.** Kendall's tau-b (scipy) of the raw ratings per query over the docs both
  lists rated. ``per_query`` lists every query both lists have, in reference order (``pairs`` 0
  when they share no doc); ``queries`` counts those with a defined tau, which the mean is over.
* **Undefined figures** (no pairs, a zero denominator such as precision without predicted
  positives, kappa when chance agreement is 1, tau with under 2 pairs or one side all tied) are
  ``None``, never NaN (not valid JSON) and never 0 (which would read as measured disagreement).
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable
from typing import Any

import numpy as np
from scipy.stats import kendalltau

from workbench.schemas.javafmt import JAVA_BLANK, JAVA_DECIMAL

_DECODER = json.JSONDecoder()

Ratings = dict[str, dict[str, float]]  # query key -> docId -> rating


def query_key(text: str) -> str:
    """The key a query is matched on: ``text`` without an LLM-style ``#{json}`` suffix."""
    start = text.find("#{")
    while start >= 0:
        rest = text[start + 1:]
        try:
            value, end = _DECODER.raw_decode(rest)
        except ValueError:
            value, end = None, 0
        if isinstance(value, dict) and not rest[end:].strip():
            return text[:start]
        start = text.find("#{", start + 1)
    return text


def parse_rating(value: Any, query: str, doc_id: str) -> float:
    """A rating as a finite float; stored ratings are strings, imported ones may be numbers."""
    number: float | None = None
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        number = float(value)
    elif isinstance(value, str) and JAVA_DECIMAL.fullmatch(value.strip(JAVA_BLANK)):
        number = float(value.strip(JAVA_BLANK).rstrip("fFdD"))
    if number is None or not math.isfinite(number):
        raise ValueError(
            f"rating {value!r} for query {query!r}, docId {doc_id!r} is not a finite number")
    return number


def merge(judgment_ratings: Iterable[Any]) -> Ratings:
    """One rating per (query key, docId): repeated queries merge, the last rating wins."""
    out: Ratings = {}
    for entry in judgment_ratings:
        if not isinstance(entry, dict) or not isinstance(entry.get("query"), str):
            raise ValueError("each judgmentRatings entry needs a string query")
        query = entry["query"]
        ratings = entry.get("ratings")
        if not isinstance(ratings, list):
            raise ValueError(f"ratings of query {query!r} must be a list")
        docs = out.setdefault(query_key(query), {})
        for rating in ratings:
            if not isinstance(rating, dict):
                raise ValueError(f"ratings of query {query!r} must be {{docId, rating}} objects")
            doc_id = rating.get("docId")
            if isinstance(doc_id, int) and not isinstance(doc_id, bool):
                doc_id = str(doc_id)
            if not isinstance(doc_id, str) or not doc_id.strip():
                raise ValueError(f"docId for query {query!r} must be a non-empty string")
            docs[doc_id] = parse_rating(rating.get("rating"), query, doc_id)
    return out


def _ratio(numerator: float, denominator: float) -> float | None:
    return float(numerator / denominator) if denominator else None


def kappa(levels_a: np.ndarray, levels_b: np.ndarray, k: int, power: int = 0) -> float | None:
    """Cohen's kappa over levels 0..k-1: unweighted (power 0), linear (1) or quadratic (2).

    1 - sum(w * observed) / sum(w * expected), expected from the two marginals; None when the
    expected disagreement is 0 (both lists put every pair in one and the same level).
    """
    n = len(levels_a)
    if n == 0:
        return None
    observed = np.zeros((k, k))
    np.add.at(observed, (levels_a, levels_b), 1.0)
    observed /= n
    expected = np.outer(observed.sum(axis=1), observed.sum(axis=0))
    i, j = np.indices((k, k))
    weights = (i != j).astype(float) if power == 0 else np.abs(i - j).astype(float) ** power
    chance = float((weights * expected).sum())
    if chance == 0.0:
        return None
    return 1.0 - float((weights * observed).sum()) / chance


def binary_agreement(reference: np.ndarray, candidate: np.ndarray) -> dict[str, Any]:
    """Candidate's relevant/not-relevant calls against the reference's as truth."""
    tp = int(np.sum(reference & candidate))
    fp = int(np.sum(~reference & candidate))
    tn = int(np.sum(~reference & ~candidate))
    fn = int(np.sum(reference & ~candidate))
    return {
        "accuracy": _ratio(tp + tn, tp + fp + tn + fn),
        "cohen_kappa": kappa(reference.astype(int), candidate.astype(int), 2),
        "precision": _ratio(tp, tp + fp),
        "recall": _ratio(tp, tp + fn),
        "f1": _ratio(2 * tp, 2 * tp + fp + fn),
        "false_positive_rate": _ratio(fp, fp + tn),
        "false_negative_rate": _ratio(fn, fn + tp),
        "confusion_matrix": {"true_positive": tp, "false_positive": fp,
                             "true_negative": tn, "false_negative": fn},
    }


def dense_levels(values: np.ndarray) -> np.ndarray:
    """Level i for the i-th smallest distinct value."""
    return np.unique(values, return_inverse=True)[1].reshape(-1)


def quantile_levels(values: np.ndarray, target_levels: np.ndarray, k: int) -> np.ndarray:
    """Cut ``values`` into k levels at the cumulative proportions of ``target_levels``.

    Each distinct value goes by its mid-rank (fraction of values below it plus half of its
    ties), so equal ratings share a level; a mid-rank exactly on a cut takes the lower level.
    """
    n = len(values)
    cuts = np.cumsum(np.bincount(target_levels, minlength=k))[:-1] / n
    _, inverse, counts = np.unique(values, return_inverse=True, return_counts=True)
    mid_ranks = (np.cumsum(counts) - counts / 2.0) / n
    return np.searchsorted(cuts, mid_ranks, side="left")[inverse.reshape(-1)]


def ordinal_levels(reference: np.ndarray, candidate: np.ndarray
                   ) -> tuple[np.ndarray, np.ndarray, int, str]:
    """Both lists' ratings as levels 0..k-1 on a common k, and the method's name."""
    k_ref = len(np.unique(reference))
    k_cand = len(np.unique(candidate))
    if k_ref == k_cand:
        return dense_levels(reference), dense_levels(candidate), k_ref, "dense_rank"
    if k_ref < k_cand:
        ref = dense_levels(reference)
        return ref, quantile_levels(candidate, ref, k_ref), k_ref, "quantile_matched_candidate"
    cand = dense_levels(candidate)
    return quantile_levels(reference, cand, k_cand), cand, k_cand, "quantile_matched_reference"


def graded_agreement(reference: np.ndarray, candidate: np.ndarray) -> dict[str, Any] | None:
    """Weighted kappas on ordinal levels, or None unless both lists are graded (> 2 values)."""
    if len(np.unique(reference)) <= 2 or len(np.unique(candidate)) <= 2:
        return None
    ref, cand, k, method = ordinal_levels(reference, candidate)
    return {"weighted_kappa_linear": kappa(ref, cand, k, power=1),
            "weighted_kappa_quadratic": kappa(ref, cand, k, power=2),
            "levels": k, "method": method}


def kendall_tau(reference: list[float], candidate: list[float]) -> float | None:
    """Tau-b of one query's ratings; None with under 2 docs or when either side is all ties."""
    if len(reference) < 2 or len(set(reference)) < 2 or len(set(candidate)) < 2:
        return None
    tau = float(kendalltau(reference, candidate).statistic)
    return tau if math.isfinite(tau) else None


def compare(reference: list[dict], candidate: list[dict], reference_threshold: float,
            candidate_threshold: float) -> dict:
    """Agreement report of ``candidate`` against ``reference`` (see the module docstring).

    Raises ValueError for malformed lists, non-numeric ratings (naming query and docId) or a
    non-finite threshold.
    """
    for name, threshold in (("reference", reference_threshold),
                            ("candidate", candidate_threshold)):
        if isinstance(threshold, bool) or not isinstance(threshold, (int, float)) \
                or not math.isfinite(threshold):
            raise ValueError(f"{name} threshold must be a finite number")
    ref, cand = merge(reference), merge(candidate)

    pairs = {"both": 0, "reference_only": 0, "candidate_only": 0,
             "queries_both": 0, "queries_reference_only": 0, "queries_candidate_only": 0}
    ref_values: list[float] = []
    cand_values: list[float] = []
    per_query: list[dict[str, Any]] = []
    for query, ref_docs in ref.items():
        cand_docs = cand.get(query)
        if cand_docs is None:
            pairs["queries_reference_only"] += 1
            pairs["reference_only"] += len(ref_docs)
            continue
        pairs["queries_both"] += 1
        shared = [doc for doc in ref_docs if doc in cand_docs]
        pairs["both"] += len(shared)
        pairs["reference_only"] += len(ref_docs) - len(shared)
        pairs["candidate_only"] += len(cand_docs) - len(shared)
        q_ref = [ref_docs[doc] for doc in shared]
        q_cand = [cand_docs[doc] for doc in shared]
        ref_values += q_ref
        cand_values += q_cand
        per_query.append({"query": query, "kendall_tau": kendall_tau(q_ref, q_cand),
                          "pairs": len(shared)})
    for query, cand_docs in cand.items():
        if query not in ref:
            pairs["queries_candidate_only"] += 1
            pairs["candidate_only"] += len(cand_docs)

    ref_array = np.asarray(ref_values, dtype=float)
    cand_array = np.asarray(cand_values, dtype=float)
    taus = [q["kendall_tau"] for q in per_query if q["kendall_tau"] is not None]
    return {
        "pairs": pairs,
        "binary": binary_agreement(ref_array >= reference_threshold,
                                   cand_array >= candidate_threshold),
        "graded": graded_agreement(ref_array, cand_array),
        "rank_correlation": {"kendall_tau_mean": float(np.mean(taus)) if taus else None,
                             "queries": len(taus), "per_query": per_query},
    }
