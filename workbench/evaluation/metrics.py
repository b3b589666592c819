"""The metrics of one judged list: NDCG@k on graded ratings (gain ``2**r - 1``), MAP@k, MRR,
Precision@k and HitRate@k on relevant flags, and Recall@k when the number of relevant documents
is known.

By default the judge's verdicts are counted: its ratings for NDCG, its ``relevant`` flags for the
rest. The caller may count other flags and gains instead (the expected ids' flags, or the
one-to-one crediting of reference answers, see ``run``).

``total`` is R, the number of relevant documents of the query, retrieved or not. Unknown (None),
the figures are those of the list alone, as they always were: MAP@k divides by the relevant
results found and NDCG's ideal ranking is the same ratings sorted. Known, they follow Evret (and
TREC): Recall@k = found / R, MAP@k = sum of P(i) over relevant ranks / R, and the ideal ranking
holds R relevant documents: the list's own ratings plus, for each relevant document the list
missed, the lowest gain among the relevant results found (1 when none was found), sorted and cut
at k; with a binary judge that is min(R, k) ones. A list that shows more relevant results than R
proves there are that many, so R is raised to their number (every figure stays within 0..1).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from workbench.judges.base import Verdict
from workbench.metrics import average_precision, ndcg, precision, recall, reciprocal_rank


def list_metrics(verdicts: Sequence[Verdict], k: int, *,
                 relevant: Sequence[bool] | None = None, gains: Sequence[float] | None = None,
                 total: int | None = None) -> dict[str, float]:
    """``NDCG@k, MAP@k, MRR, Precision@k, HitRate@k`` and, with ``total``, ``Recall@k``.

    ``relevant`` / ``gains``: what to count instead of the verdicts' flags / ratings (one per
    verdict, in rank order). Precision@k divides by the number of results looked at,
    min(k, n), as the workbench always has (Evret divides by k).
    """
    ratings = np.array([v.rating or 0.0 for v in verdicts] if gains is None else list(gains),
                       dtype=np.float64)
    flags = np.array([v.relevant for v in verdicts] if relevant is None else list(relevant),
                     dtype=bool)
    found = int(flags.sum())
    if total is None:
        ideal = np.sort(ratings)[::-1][:k]
        denominator = found
    else:
        denominator = max(total, found)
        fill = float(ratings[flags].min()) if found else 1.0
        padded = np.concatenate([ratings, np.full(min(denominator - found, k), fill)])
        ideal = np.sort(padded)[::-1][:k]
    out = {
        f"NDCG@{k}": float(ndcg(ratings, ideal)),
        f"MAP@{k}": float(average_precision(flags, denominator)),
        "MRR": float(reciprocal_rank(flags)),
        f"Precision@{k}": float(precision(flags)),
        f"HitRate@{k}": 1.0 if found else 0.0,
    }
    if total is not None:
        out[f"Recall@{k}"] = float(recall(flags, denominator))
    return out
