"""The experiment job: load the PROCESSING experiment by id, run its type, write the results.

Document ids are derived from the experiment (and scheduled run), so a redelivered or repeated
job rewrites the same evaluation results and variants instead of adding new ones.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from opensearchpy.exceptions import ConflictError, NotFoundError

from workbench.experiments import hybrid, pairwise, pointwise, split
from workbench.experiments.context import RunContext, Writer, load
from workbench.experiments.searching import remote_outcome
from workbench.experiments.signature import signature
from workbench.experiments.waiting import PHASE, JudgmentsPending, check_judgments
from workbench.jobs.control import Cancelled, JobControl
from workbench.services import Services
from workbench.store.indices import EVALUATION_INDEX, EXPERIMENT_INDEX, VARIANT_INDEX
from workbench.store.repository import Repository, now_iso
from workbench.telemetry import instruments

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


def execute(ctx: RunContext, while_writing: Callable[[], None] | None = None
            ) -> list[dict[str, Any]]:
    """Run the experiment's type and write its evaluation results and variants; a large
    pointwise or hybrid run is spread over every free worker (``split``). ``while_writing``
    runs once the searches are done, while the last writes are on their way."""
    writer = Writer(ctx.svc)
    try:
        if split.worth_splitting(ctx):
            results = split.run(ctx)
        else:
            results = RUNNERS[ctx.experiment["type"]](ctx, writer)
    except Cancelled:
        discard(ctx, writer)
        raise
    if while_writing is not None:
        while_writing()
    writer.flush(refresh=True)
    return results


def discard(ctx: RunContext, writer: Writer) -> None:
    """A cancelled run leaves no partial evaluation results or variants: the writes in flight
    are awaited, then everything the experiment wrote is deleted (a scheduled run, which has no
    cancel, would delete only its own)."""
    try:
        writer.flush(refresh=True)  # searchable, so that the delete below finds them
    except Exception:
        log.exception("experiment %s: writes in flight failed while cancelling", ctx.experiment_id)
    query: dict[str, Any] = {"term": {"experimentId": ctx.experiment_id}}
    if ctx.run_id:
        query = {"bool": {"filter": [query, {"term": {"scheduledRunId": ctx.run_id}}]}}
    for index in (EVALUATION_INDEX, VARIANT_INDEX):
        Repository(ctx.svc.client, index).delete_by_query(query)


def run(svc: Services, experiment_id: str) -> None:
    repo = Repository(svc.client, EXPERIMENT_INDEX)
    hit = repo.get_hit(experiment_id)
    if hit is None or hit["_source"].get("status") != "PROCESSING":
        log.info("experiment %s is not PROCESSING (deleted or done); nothing to do",
                 experiment_id)
        return
    experiment = hit["_source"]
    instruments.note_job_type(experiment.get("type"))
    control = JobControl(svc, EXPERIMENT_INDEX, hit, "pairs", in_metadata=False)
    control.check()  # cancelled while queued (or while waiting for its judgments)
    # The inputs are read whole at once, judgments included, and the judgments' states checked
    # on what was read: reading their status first would read each judgment twice.
    ctx = load(svc, experiment)
    try:
        check_judgments(zip(experiment.get("judgmentList") or [], ctx.judgments, strict=True),
                        experiment.get("timestamp"), svc.config.judgment_wait)
    except JudgmentsPending:
        control.start(0, PHASE)
        raise
    ctx.control = control
    # The first progress write goes while the first searches are sent (the job settles it
    # before its last write, whose condition is the version that write leaves).
    control.start(len(ctx.entries) * len(ctx.configs), "searching", wait=False)
    fingerprints: dict[str, Any] = {}

    def fingerprint() -> None:  # while the last results are written (the cluster's time)
        fingerprints.update(signature(ctx.query_set, ctx.judgments,
                                      [config for _, config in ctx.configs]))

    try:
        results = execute(ctx, fingerprint)  # a cancel arriving now is too late: it completes
    finally:
        control.settle()
    results, remote_fields = remote_outcome(ctx, results)  # failed remote searches
    kept = {k: v for k, v in experiment.items() if k != "progress"}  # e.g. from waiting
    done = {**kept, "status": "COMPLETED", "timestamp": now_iso(), "results": results,
            "inputSignature": fingerprints, **remote_fields}
    try:
        repo.put(done, seq_no=hit["_seq_no"], primary_term=hit["_primary_term"])
    except (ConflictError, NotFoundError):
        # A write sent again after its node died may find its own first attempt applied.
        if not repo.holds(experiment_id, done):
            log.warning("experiment %s changed or was deleted while it ran; result dropped",
                        experiment_id)
