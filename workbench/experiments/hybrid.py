"""HYBRID_OPTIMIZER (docs/contract.md, "Hybrid constraints"; docs/algorithms.md, "Hybrid
optimizer"): the 82 normalisation/combination variants of a two-clause ``hybrid`` query, each
evaluated like a pointwise run.

With the neural-search plugin the cluster combines the scores (a temporary search pipeline per
variant, as the plugin does). Without it the workbench runs each sub-query as an ordinary search
and normalises and combines the scores itself (``hybrid_scoring``), so the optimiser works on any
cluster. A failed search fails only the variants that needed it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from workbench.errors import WorkbenchError
from workbench.experiments.context import RunContext, Writer, stable_id
from workbench.experiments.hybrid_scoring import (
    hybrid_scores,
    pipeline_body,
    variant_grid,
    variant_parameters_string,
)
from workbench.experiments.pointwise import metrics_docs
from workbench.experiments.searching import doc_ids
from workbench.jobs.base import JobFailed
from workbench.querysets.entries import QueryEntry
from workbench.schemas.body import load
from workbench.schemas.experiments import HybridSearchSchema
from workbench.store import plugins
from workbench.store.indices import EVALUATION_INDEX, VARIANT_INDEX
from workbench.store.repository import now_iso
from workbench.store.search import SearchFailure, msearch
from workbench.store.search_render import RenderedSearch, render

TYPE = "HYBRID_OPTIMIZER"
_HYBRID_SEARCH = HybridSearchSchema()  # holds no state: one for every query of every run


def hybrid_clauses(body: dict[str, Any]) -> list[dict[str, Any]]:
    """The two sub-queries of a rendered body, or a 400 with the contract's message
    (schemas/experiments.HybridSearchSchema)."""
    clauses: list[dict[str, Any]] = load(_HYBRID_SEARCH, body)["query"]
    return clauses


def check_configurations(ctx: RunContext) -> None:
    """Before any search: a configuration that is not a two-clause ``hybrid`` query ends the
    run ERROR with the reason (the create accepts it, as the plugin does)."""
    for config_id, config in ctx.configs:
        try:
            hybrid_clauses(render(config, "sample query", ctx.size).body)
        except WorkbenchError as exc:
            raise JobFailed(f"{exc.reason} (search configuration [{config_id}])") from exc


def _searches(ctx: RunContext, entry: QueryEntry, config: dict[str, Any], neural: bool,
              grid: list[dict[str, Any]]) -> list[RenderedSearch]:
    rendered = render(config, entry.query_text, ctx.size, entry.custom_fields)
    clauses = hybrid_clauses(rendered.body)
    if neural:  # one search per variant, the cluster combines with a temporary pipeline
        return [RenderedSearch(rendered.index, {**rendered.body,
                                                "search_pipeline": pipeline_body(params)}, None)
                for params in grid]
    rest = {k: v for k, v in rendered.body.items() if k not in ("query", "size")}
    return [RenderedSearch(rendered.index, {**rest, "query": clause, "size": ctx.size}, None)
            for clause in clauses]


def run(ctx: RunContext, writer: Writer) -> list[dict[str, Any]]:
    check_configurations(ctx)
    return run_queries(ctx, writer, range(len(ctx.entries)), has_neural(ctx))


def has_neural(ctx: RunContext) -> bool:
    """Whether the cluster combines the scores (else the workbench does)."""
    return plugins.has(ctx.svc.client, "opensearch-neural-search")


def run_queries(ctx: RunContext, writer: Writer, positions: Sequence[int],
                neural: bool) -> list[dict[str, Any]]:
    """The results entries of the queries at ``positions`` (one per configuration of each, in
    order), their evaluation results and variants written; ids come from the query's position
    in the whole query set, so a run cut into parts writes what the whole run writes."""
    grid = variant_grid()
    results: list[dict[str, Any]] = []
    for position in positions:
        entry = ctx.entries[position]
        ratings = ctx.ratings(entry)
        for config_id, config in ctx.configs:
            try:
                searches = _searches(ctx, entry, config, neural, grid)
                answers, failure = msearch(ctx.svc.client, searches, ids_only=True), None
            except WorkbenchError as exc:
                answers, failure = [], exc.reason
            outcomes = [_variant_result(answers, failure, neural, number, params, ctx.size)
                        for number, params in enumerate(grid)]
            scored = iter(metrics_docs([(ranked, ratings) for ranked, _, error in outcomes
                                        if error is None and ranked], ctx.size))
            evaluations = []
            for number, (params, (ranked, took, error)) in enumerate(
                    zip(grid, outcomes, strict=True)):
                key = (ctx.experiment_id, ctx.run_id or "", config_id, str(position), str(number))
                variant: dict[str, Any] = {
                    "id": stable_id(*key, "variant"), "timestamp": now_iso(), "type": TYPE,
                    "experimentId": ctx.experiment_id, "parameters": params,
                    "status": "COMPLETED" if error is None else "ERROR",
                }
                if error is not None:
                    variant["results"] = {"error": error}
                elif not ranked:
                    variant["results"] = {"evaluationResultId": None,
                                          "details": "no search hits found", "took": took}
                else:
                    evaluation_id = stable_id(*key, "evaluation")
                    writer.add(EVALUATION_INDEX, ctx.evaluation_doc(
                        evaluation_id, config_id, entry, ranked, next(scored), variant["id"],
                        variant_parameters_string(params), took))
                    variant["results"] = {"evaluationResultId": evaluation_id}
                    evaluations.append({"evaluationId": evaluation_id,
                                        "experimentVariantId": variant["id"]})
                writer.add(VARIANT_INDEX, variant)
            results.append({"searchConfigurationId": config_id,
                            "evaluationResults": evaluations, "query_text": entry.query_text})
            ctx.advance(1)
            ctx.check_time()
    return results


def _variant_result(answers: list[Any], failure: str | None, neural: bool, number: int,
                    params: dict[str, Any], size: int) -> tuple[list[str], int, str | None]:
    """(ranked doc ids, took, error) of one variant."""
    if failure is not None:
        return [], 0, failure
    if neural:
        answer = answers[number]
        if isinstance(answer, SearchFailure):
            return [], 0, answer.reason
        return doc_ids(answer), int(answer.get("took", 0)), None
    broken = [a for a in answers if isinstance(a, SearchFailure)]
    if broken:
        return [], 0, broken[0].reason
    hits = [[(h["_id"], float(h["_score"] or 0.0)) for h in (a.get("hits") or {}).get("hits") or []]
            for a in answers]
    took = sum(int(a.get("took", 0)) for a in answers)
    return [doc for doc, _ in hybrid_scores(hits, params, size)], took, None
