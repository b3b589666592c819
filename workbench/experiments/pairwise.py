"""PAIRWISE_COMPARISON (docs/algorithms.md, "Pairwise metrics"): how much the top results of two
configurations agree."""

from __future__ import annotations

from typing import Any

from workbench.experiments.context import RunContext, Writer
from workbench.experiments.searching import run_searches
from workbench.metrics import pairwise_metrics, round2


def run(ctx: RunContext, writer: Writer) -> list[dict[str, Any]]:
    """One result per query: both snapshots and the four agreement metrics, rounded as the
    plugin stores them (``metrics``) and unrounded for the summary (``exactMetrics``, the
    workbench's added field; docs/algorithms.md, "Exact per-query values")."""
    answers = run_searches(ctx, [(entry, config) for entry in ctx.entries
                                 for config in ctx.configs])
    results = []
    for position, entry in enumerate(ctx.entries):
        snapshots = []
        lists = []
        for offset, (config_id, _) in enumerate(ctx.configs):
            doc_ids, took = answers[position * len(ctx.configs) + offset]
            snapshots.append({"searchConfigurationId": config_id, "docIds": doc_ids,
                              "took": took})
            lists.append(doc_ids)
        values = pairwise_metrics(lists[0], lists[1])
        metrics = [{"metric": name, "value": round2(value)} for name, value in values]
        exact = [{"metric": name, "value": float(value)} for name, value in values]
        results.append({"snapshots": snapshots, "metrics": metrics, "exactMetrics": exact,
                        "query_text": entry.query_text})
    return results
