"""The experiment job: load the PROCESSING experiment by id, run its type, write the results.

Document ids are derived from the experiment (and scheduled run), so a redelivered or repeated
job rewrites the same evaluation results and variants instead of adding new ones.
"""

from __future__ import annotations

import logging
from typing import Any

from opensearchpy.exceptions import ConflictError, NotFoundError

from workbench.experiments import hybrid, pairwise, pointwise
from workbench.experiments.context import RunContext, Writer, load
from workbench.experiments.signature import signature
from workbench.services import Services
from workbench.store.indices import EXPERIMENT_INDEX
from workbench.store.repository import Repository, now_iso

log = logging.getLogger(__name__)

RUNNERS = {
    "PAIRWISE_COMPARISON": pairwise.run,
    "POINTWISE_EVALUATION": pointwise.run,
    "HYBRID_OPTIMIZER": hybrid.run,
}
EVENTS = {
    "PAIRWISE_COMPARISON": "experiment_pairwise_comparison_executions",
    "POINTWISE_EVALUATION": "experiment_pointwise_evaluation_executions",
    "HYBRID_OPTIMIZER": "experiment_hybrid_optimizer_executions",
}


def execute(ctx: RunContext) -> list[dict[str, Any]]:
    """Run the experiment's type and write its evaluation results and variants."""
    writer = Writer(ctx.svc)
    results = RUNNERS[ctx.experiment["type"]](ctx, writer)
    writer.flush(refresh=True)
    return results


def run(svc: Services, experiment_id: str) -> None:
    repo = Repository(svc.client, EXPERIMENT_INDEX)
    hit = repo.get_hit(experiment_id)
    if hit is None or hit["_source"].get("status") != "PROCESSING":
        log.info("experiment %s is not PROCESSING (deleted or done); nothing to do",
                 experiment_id)
        return
    experiment = hit["_source"]
    ctx = load(svc, experiment)
    results = execute(ctx)
    done = {**experiment, "status": "COMPLETED", "timestamp": now_iso(), "results": results,
            "inputSignature": signature(ctx.query_set, ctx.judgments,
                                        [config for _, config in ctx.configs])}
    try:
        repo.put(done, seq_no=hit["_seq_no"], primary_term=hit["_primary_term"])
    except (ConflictError, NotFoundError):
        log.warning("experiment %s changed or was deleted while it ran; result dropped",
                    experiment_id)
