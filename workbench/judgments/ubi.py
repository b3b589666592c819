"""UBI_JUDGMENT: ratings from user clicks with a click model (docs/contract.md, "UBI judgments").

``coec`` is the plugin's clicks-over-expected-clicks; ``pbm`` is the position-based model fitted
by EM on the same counts. Both read only aggregated counts (``store.ubi_events``).
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np
from opensearchpy import OpenSearch

from workbench.judgments import click_models
from workbench.store import ubi_events
from workbench.store.identity import carry

CLICK_MODELS = ("coec", "pbm")


class _Pairs:
    """Accumulates cells into per-pair arrays, keeping first-seen order of queries and docs."""

    def __init__(self) -> None:
        self.index: dict[tuple[str, str], int] = {}
        self.clicks: list[int] = []
        self.impressions: list[int] = []
        self.best_rank: list[int] = []
        self.rows: list[tuple[int, int, int, int]] = []  # pair, rank, clicks, impressions

    def add(self, cell: ubi_events.Cell) -> None:
        key = (cell.query, cell.doc)
        pair = self.index.get(key)
        if pair is None:
            pair = self.index[key] = len(self.clicks)
            self.clicks.append(0)
            self.impressions.append(0)
            self.best_rank.append(-1)
        self.clicks[pair] += cell.clicks
        self.impressions[pair] += cell.impressions
        if cell.clicks or cell.impressions:
            best = self.best_rank[pair]
            self.best_rank[pair] = cell.rank if best < 0 else min(best, cell.rank)
            if cell.rank >= 0:  # a negative ordinal is bad data: no rank to examine
                self.rows.append((pair, cell.rank, cell.clicks, cell.impressions))


def generate(client: OpenSearch, metadata: dict[str, Any]) -> list[dict[str, Any]]:
    """``judgmentRatings`` for every user query seen in the events."""
    model = str(metadata["clickModel"]).lower()
    max_rank = int(metadata["maxRank"])
    index = metadata.get("ubiEventsIndex") or "ubi_events"
    query = ubi_events.event_filter(max_rank, metadata.get("startDate") or None,
                                    metadata.get("endDate") or None)
    pairs = _Pairs()
    with ThreadPoolExecutor(1) as pool:
        # COEC's rank click-through rates are asked for while the cells are paged through, so
        # the cluster works on both at once.
        rank_counts = pool.submit(carry(ubi_events.rank_counts), client, index, query, max_rank) \
            if model == "coec" else None
        for cell in ubi_events.cells(client, index, query):
            pairs.add(cell)
        rates = rank_counts.result() if rank_counts else None
    if not pairs.index:
        return []
    if rates is not None:
        clicks_by_rank, impressions_by_rank = rates
        ctr = click_models.rank_ctr(clicks_by_rank, impressions_by_rank, max_rank)
        ratings = click_models.coec(ctr, np.array(pairs.clicks), np.array(pairs.impressions),
                                    np.array(pairs.best_rank))
    else:
        rows = np.array(pairs.rows, dtype=np.int64).reshape(-1, 4)
        alpha, _ = click_models.pbm(rows[:, 0], rows[:, 1], rows[:, 2], rows[:, 3],
                                    n_pairs=len(pairs.clicks), n_ranks=max_rank + 1)
        ratings = alpha
    by_query: dict[str, list[dict[str, str]]] = {}
    for (user_query, doc), pair in pairs.index.items():
        by_query.setdefault(user_query, []).append(
            {"docId": doc, "rating": click_models.format_rating(float(ratings[pair]))})
    return [{"query": q, "ratings": docs} for q, docs in by_query.items()]
