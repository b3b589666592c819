"""POINTWISE_EVALUATION (docs/contract.md, "Evaluation results"): IR metrics of each configuration
against judgments.

Writes one evaluation result and one variant per (query, configuration), where Dashboards reads
them, and returns the experiment's ``results`` index into them. A (query, remote configuration)
whose search failed writes nothing (issue 47; the runner records it on the experiment).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from workbench.experiments.context import RunContext, Writer, stable_id
from workbench.experiments.searching import failed_entry, stream_searches
from workbench.metrics import evaluate_condensed_many, evaluate_many, round_metric
from workbench.remote.search import RemoteFailure
from workbench.store.indices import EVALUATION_INDEX, VARIANT_INDEX
from workbench.store.repository import now_iso

TYPE = "POINTWISE_EVALUATION"


def metrics_docs(lists: list[tuple[list[str], dict[str, float]]],
                 k: int) -> list[dict[str, list[dict[str, Any]]]]:
    """The metric set (docs/algorithms.md, "Pointwise metrics") and HitRate@k of each (doc ids,
    ratings), computed together: ``metrics`` rounded to two decimals as the plugin stores them
    (what Dashboards shows), ``exactMetrics`` unrounded, for the summary's statistics
    (docs/algorithms.md, "Exact per-query values"); and, in a list of their own so that the
    plugin's list stays as the plugin writes it, ``condensedMetrics``: Judged@k, NDCG'@k, MAP'@k
    and Precision'@k unrounded (docs/algorithms.md, "Condensed metrics and Judged@k")."""
    out = []
    for metrics, condensed in zip(evaluate_many(lists, k), evaluate_condensed_many(lists, k),
                                  strict=True):
        rounded = [{"metric": name, "value": round_metric(value)} for name, value in metrics]
        out.append({"metrics": rounded,
                    "exactMetrics": [{"metric": name, "value": float(value)}
                                     for name, value in metrics],
                    "condensedMetrics": [{"metric": name, "value": float(value)}
                                         for name, value in condensed]})
    return out


def run(ctx: RunContext, writer: Writer) -> list[dict[str, Any]]:
    return run_queries(ctx, writer, range(len(ctx.entries)))


def run_queries(ctx: RunContext, writer: Writer, positions: Sequence[int]
                ) -> list[dict[str, Any]]:
    """The results entries of the queries at ``positions`` (every configuration of each, in
    order), their evaluation results and variants written; ids come from the query's position
    in the whole query set, so a run cut into parts writes what the whole run writes."""
    pairs = [(ctx.entries[query], config) for query in positions for config in ctx.configs]
    results: list[dict[str, Any]] = [{} for _ in pairs]
    run_id = ctx.run_id or ""
    for batch in stream_searches(ctx, pairs):
        scored = iter(metrics_docs([(found[0], ctx.ratings(pairs[position][0]))
                                    for position, found in batch
                                    if not isinstance(found, RemoteFailure) and found[0]],
                                   ctx.size))
        for position, found in batch:
            entry, (config_id, config) = pairs[position]
            if isinstance(found, RemoteFailure):  # nothing written; recorded by the runner
                results[position] = failed_entry(entry, config_id, found)
                continue
            doc_ids, took = found
            query_number = str(positions[position // len(ctx.configs)])
            variant_id = stable_id(ctx.experiment_id, run_id, "variant", config_id,
                                   query_number)
            variant: dict[str, Any] = {
                "id": variant_id, "timestamp": now_iso(), "type": TYPE, "status": "COMPLETED",
                "experimentId": ctx.experiment_id,
                "parameters": {"searchConfigId": config_id,
                               "searchPipeline": config.get("searchPipeline") or ""},
            }
            if not doc_ids:
                variant["results"] = {"evaluationResultId": None,
                                      "details": "no search hits found"}
                if took is not None:  # a remote search has no engine's took
                    variant["results"]["took"] = took
                writer.add(VARIANT_INDEX, variant)
                results[position] = {"queryText": entry.query_text}
                continue
            evaluation_id = stable_id(ctx.experiment_id, run_id, "evaluation", config_id,
                                      query_number)
            writer.add(EVALUATION_INDEX, ctx.evaluation_doc(
                evaluation_id, config_id, entry, doc_ids, next(scored), variant_id, None, took))
            variant["results"] = {"evaluationResultId": evaluation_id}
            writer.add(VARIANT_INDEX, variant)
            results[position] = {"evaluationId": evaluation_id, "searchConfigurationId": config_id,
                                 "queryText": entry.query_text}
        writer.send()  # written while the next batch is searched
    return results
