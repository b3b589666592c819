"""POINTWISE_EVALUATION (srw-api.md §8.5): IR metrics of each configuration against judgments.

Writes one evaluation result and one variant per (query, configuration), where Dashboards reads
them, and returns the experiment's ``results`` index into them.
"""

from __future__ import annotations

from typing import Any

from workbench.experiments.context import RunContext, Writer, stable_id
from workbench.experiments.searching import run_searches
from workbench.metrics import evaluate, round_metric
from workbench.store.indices import EVALUATION_INDEX, VARIANT_INDEX
from workbench.store.repository import now_iso

TYPE = "POINTWISE_EVALUATION"


def metrics_doc(doc_ids: list[str], ratings: dict[str, float], k: int) -> list[dict[str, Any]]:
    """The §8.7 metric set, rounded only here, where it is written."""
    return [{"metric": name, "value": round_metric(value)}
            for name, value in evaluate(doc_ids, ratings, k)]


def run(ctx: RunContext, writer: Writer) -> list[dict[str, Any]]:
    pairs = [(entry, config) for entry in ctx.entries for config in ctx.configs]
    answers = run_searches(ctx, pairs)
    results: list[dict[str, Any]] = []
    run_id = ctx.run_id or ""
    for number, ((entry, (config_id, config)), (doc_ids, took)) in enumerate(
            zip(pairs, answers, strict=True)):
        position = str(number // len(ctx.configs))
        variant_id = stable_id(ctx.experiment_id, run_id, "variant", config_id, position)
        variant: dict[str, Any] = {
            "id": variant_id, "timestamp": now_iso(), "type": TYPE, "status": "COMPLETED",
            "experimentId": ctx.experiment_id,
            "parameters": {"searchConfigId": config_id,
                           "searchPipeline": config.get("searchPipeline") or ""},
        }
        if not doc_ids:
            variant["results"] = {"evaluationResultId": None, "details": "no search hits found",
                                  "took": took}
            writer.add(VARIANT_INDEX, variant)
            results.append({"queryText": entry.query_text})
            continue
        evaluation_id = stable_id(ctx.experiment_id, run_id, "evaluation", config_id, position)
        metrics = metrics_doc(doc_ids, ctx.ratings(entry), ctx.size)
        writer.add(EVALUATION_INDEX, ctx.evaluation_doc(
            evaluation_id, config_id, entry, doc_ids, metrics, variant_id, None, took))
        variant["results"] = {"evaluationResultId": evaluation_id}
        writer.add(VARIANT_INDEX, variant)
        results.append({"evaluationId": evaluation_id, "searchConfigurationId": config_id,
                        "queryText": entry.query_text})
    return results
