"""The metrics of one judged list: NDCG@k on the judge's graded ratings (gain ``2**r - 1``),
MAP@k, MRR and Precision@k on its relevant flags."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from workbench.judges.base import Verdict
from workbench.metrics import average_precision, ndcg, precision, reciprocal_rank


def list_metrics(verdicts: Sequence[Verdict], k: int) -> dict[str, float]:
    """NDCG@k against the ideal ordering of the same ratings, MAP@k over the relevant results
    found, MRR and Precision@k over the judged list."""
    ratings = np.array([v.rating or 0.0 for v in verdicts], dtype=np.float64)
    relevant = np.array([v.relevant for v in verdicts], dtype=bool)
    ideal = np.sort(ratings)[::-1][:k]
    n_relevant = int(relevant.sum())
    return {
        f"NDCG@{k}": float(ndcg(ratings, ideal)),
        f"MAP@{k}": float(average_precision(relevant, n_relevant)),
        "MRR": float(reciprocal_rank(relevant)),
        f"Precision@{k}": float(precision(relevant)),
    }
