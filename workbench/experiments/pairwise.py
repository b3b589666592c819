"""PAIRWISE_COMPARISON (docs/algorithms.md, "Pairwise metrics"): how much the top results of two
configurations agree."""

from __future__ import annotations

from typing import Any

from workbench.experiments.context import RunContext, Writer
from workbench.experiments.searching import failed_entry, run_searches
from workbench.metrics import pairwise_metrics, round2
from workbench.remote.search import RemoteFailure


def run(ctx: RunContext, writer: Writer) -> list[dict[str, Any]]:
    """One result per query: both snapshots and the four agreement metrics, rounded as the
    plugin stores them (``metrics``) and unrounded for the summary (``exactMetrics``, the
    workbench's added field; docs/algorithms.md, "Exact per-query values"). A query whose
    remote search failed (issue 47) has no comparison: its stand-in entries
    (``searching.failed_entry``) are taken out by the runner."""
    answers = run_searches(ctx, [(entry, config) for entry in ctx.entries
                                 for config in ctx.configs])
    results: list[dict[str, Any]] = []
    for position, entry in enumerate(ctx.entries):
        found = answers[position * len(ctx.configs):(position + 1) * len(ctx.configs)]
        failed = [failed_entry(entry, config_id, answer)
                  for (config_id, _), answer in zip(ctx.configs, found, strict=True)
                  if isinstance(answer, RemoteFailure)]
        if failed:  # no comparison for this query; recorded by the runner
            results.extend(failed)
            continue
        snapshots = []
        lists = []
        for (config_id, _), answer in zip(ctx.configs, found, strict=True):
            assert not isinstance(answer, RemoteFailure)
            doc_ids, took = answer
            snapshot: dict[str, Any] = {"searchConfigurationId": config_id, "docIds": doc_ids}
            if took is not None:  # a remote search has no engine's took
                snapshot["took"] = took
            snapshots.append(snapshot)
            lists.append(doc_ids)
        values = pairwise_metrics(lists[0], lists[1])
        metrics = [{"metric": name, "value": round2(value)} for name, value in values]
        exact = [{"metric": name, "value": float(value)} for name, value in values]
        results.append({"snapshots": snapshots, "metrics": metrics, "exactMetrics": exact,
                        "query_text": entry.query_text})
    return results
