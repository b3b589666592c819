"""Which queries people should label, and which documents of each: the sample behind a summary's
``humanJudgments`` figures (``summary_humans``).

The prediction-powered estimate is unbiased only when the labelled queries are a *uniform*
random sample of the query set, drawn without looking at the judge's ratings: then the labelled
queries' judge error is, on average, the error of every query. So ``draw`` samples uniformly
(seeded, so a sample can be drawn again). Sampling more where the judge is unsure can shrink
the interval further, but only with inverse-probability weights in the estimator (active
inference); the summary does not take weights, so the sampler does not offer it.

For each drawn query the documents to rate are the *pool*: the union of every configuration's
stored top-k hits, in rank order (every configuration's first hit, then every second hit, ...),
so that the human-judged metric of every configuration in the experiment can be computed from
the ratings.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from workbench.experiments.summary_build import Row

STRATEGY = "uniform"


def draw(queries: Sequence[str], budget: int, seed: int) -> list[str]:
    """``budget`` distinct queries drawn uniformly without replacement (all of them when the
    budget is larger), in query-set order."""
    if budget >= len(queries):
        return list(queries)
    chosen = np.random.default_rng(seed).choice(len(queries), size=budget, replace=False)
    return [queries[i] for i in sorted(int(i) for i in chosen)]


def pool(rows: Sequence[Row], queries: Sequence[str], chosen: Sequence[str],
         k: int) -> list[tuple[str, str, str]]:
    """(query, doc id, search configuration id that retrieved it first) for every document of
    the chosen queries' pools."""
    position = {q: i for i, q in enumerate(queries)}
    out: list[tuple[str, str, str]] = []
    for query in chosen:
        seen: set[str] = set()
        i = position[query]
        for rank in range(k):
            for row in rows:
                hits = row.hits[i]
                if rank < len(hits) and hits[rank] not in seen:
                    seen.add(hits[rank])
                    out.append((query, hits[rank], row.config_id))
    return out


def as_csv(rows: Sequence[Mapping[str, Any]], fields: Sequence[str]) -> str:
    """The sample as the CSV ``workbench judgments import`` reads back: ``query,docId,rating``
    (rating left empty for people to fill in) and the requested document fields after them."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(["query", "docId", "rating", *fields])
    for row in rows:
        writer.writerow([row["query"], row["docId"], "",
                         *(_cell(row.get("fields", {}).get(f)) for f in fields)])
    return out.getvalue()


def _cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, list):
        return " | ".join(str(v) for v in value)
    return str(value)
