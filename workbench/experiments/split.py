"""POINTWISE_EVALUATION and HYBRID_OPTIMIZER over every free worker (``jobs.fanout``): a run
worth splitting (``fanout.worth_splitting``: from its estimated work and the free workers, or
``WORKBENCH_SPLIT_QUERIES``) is cut into units of consecutive query positions. Each
process working on it loads the experiment's inputs once, writes the evaluation results and
variants of its units (the ids come from the query positions, as in a whole run) and returns
the units' ``results`` entries; the parent joins them in query order, so the experiment is the
one a single worker would have written.

PAIRWISE_COMPARISON writes nothing per query and is never split.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import threading
import time
from typing import Any

from workbench.experiments import hybrid, pointwise
from workbench.experiments.context import RunContext, RunTimedOut, Writer, load
from workbench.experiments.signature import signature
from workbench.jobs import fanout
from workbench.jobs.control import Cancelled, JobControl
from workbench.services import Services
from workbench.store.indices import EXPERIMENT_INDEX

KIND = "experiment"
#: most queries in one unit: a hybrid query costs 82 evaluations a configuration, a pointwise
#: query one
UNIT_QUERIES = {pointwise.TYPE: 100, hybrid.TYPE: 5}
#: fewest queries in one unit: a pointwise query is one search, and smaller units cost more in
#: round trips and loading than a second worker gains
FLOOR_QUERIES = {pointwise.TYPE: 50, hybrid.TYPE: 1}
#: estimated seconds of one (query, configuration) pair on one worker process: a pointwise
#: pair is one search in an ``_msearch`` batch, its metrics and two documents written (1,500
#: ESCI queries x 2 configurations: 1.75 s, issue 22); a hybrid pair is 82 evaluations
PAIR_SECONDS = {pointwise.TYPE: 0.0005, hybrid.TYPE: 0.02}
#: a run is cut into at least this many units (when it has the queries), so that a run just
#: past the threshold still has shares for several workers
MIN_UNITS = 8
#: the experiment fields a unit needs to load the same inputs as the parent
HEAD_FIELDS = ("id", "type", "querySetId", "searchConfigurationList", "judgmentList", "size",
               "remoteSearchConfigurationIds")


def worth_splitting(ctx: RunContext) -> bool:
    kind = ctx.experiment.get("type")
    if kind not in UNIT_QUERIES or not ctx.configs:
        return False
    pairs = len(ctx.entries) * len(ctx.configs)
    return fanout.worth_splitting(ctx.svc, len(ctx.entries), pairs * PAIR_SECONDS[str(kind)])


def unit_ranges(queries: int, per_unit: int, floor: int = 1) -> list[list[int]]:
    """[start, stop) query positions of each unit, in order."""
    size = max(floor, min(per_unit, math.ceil(queries / MIN_UNITS)))
    return [[start, min(start + size, queries)] for start in range(0, queries, size)]


def run(ctx: RunContext) -> list[dict[str, Any]]:
    """The experiment's ``results`` as the type's ``run`` gives them, the units done here and
    on any free worker. A cancel stops every worker (units in flight finish first, so the
    caller's discard finds all they wrote); a scheduled run past its deadline ends TIMEOUT."""
    kind = ctx.experiment["type"]
    head: dict[str, Any] = {"experimentId": ctx.experiment_id, "runId": ctx.run_id,
                            "experiment": {k: ctx.experiment.get(k) for k in HEAD_FIELDS},
                            "inputs": inputs_of(ctx)}
    if kind == hybrid.TYPE:
        hybrid.check_configurations(ctx)
        head["neural"] = hybrid.has_neural(ctx)
    ranges = unit_ranges(len(ctx.entries), UNIT_QUERIES[kind], FLOOR_QUERIES[kind])
    weights = [(stop - start) * len(ctx.configs) for start, stop in ranges]
    control = ctx.control if ctx.deadline is None else Deadline(ctx)
    # The parent's own units use the inputs already loaded, without its control and deadline.
    own_ctx = dataclasses.replace(ctx, control=None, deadline=None, _ratings={}, _rows=[])
    own = ExperimentUnits(ctx.svc, own_ctx, head)
    try:
        parts = fanout.spread(ctx.svc, KIND, ctx.experiment_id, head, ranges, weights, control,
                              own=own)
    except Cancelled:
        if isinstance(control, Deadline) and control.expired:
            raise RunTimedOut("the scheduled run exceeded scheduled_experiments_timeout") \
                from None
        raise
    return [entry for part in parts for entry in part]


class Deadline(JobControl):
    """Stands in for the control of a run with a deadline (a scheduled run, which has no cancel
    and no progress): the deadline stops the run's units as a cancel does."""

    def __init__(self, ctx: RunContext) -> None:
        super().__init__(ctx.svc, EXPERIMENT_INDEX, {"_id": ctx.run_id or ctx.experiment_id},
                         "pairs", in_metadata=False)
        self.deadline = ctx.deadline if ctx.deadline is not None else math.inf
        self.expired = False

    def cancelled(self) -> bool:
        if time.monotonic() > self.deadline:
            self.expired = True
        return self.expired

    def due(self) -> bool:
        return False

    def write(self, force: bool = False) -> None:
        """No progress is recorded for a scheduled run."""


class ExperimentUnits:
    """One process's share of a split experiment: its inputs loaded once, and two units at a
    time, each thread with a writer of its own, so that one unit's writes overlap the other's
    searches (a unit waits for its writes before it is done)."""

    threads = 2

    def __init__(self, svc: Services, ctx: RunContext, head: dict[str, Any]) -> None:
        self.svc = svc
        self.ctx = ctx  # no control and no deadline: the parent stops the run, units never check
        self.neural = bool(head.get("neural"))
        self.local = threading.local()
        self.writers: list[Writer] = []
        self.lock = threading.Lock()

    def _writer(self) -> Writer:
        writer: Writer | None = getattr(self.local, "writer", None)
        if writer is None:
            writer = self.local.writer = Writer(self.svc)
            with self.lock:
                self.writers.append(writer)
        return writer

    def unit(self, payload: list[int]) -> list[dict[str, Any]]:
        positions = range(payload[0], payload[1])
        writer = self._writer()
        try:
            if self.ctx.experiment["type"] == hybrid.TYPE:
                results = hybrid.run_queries(self.ctx, writer, positions, self.neural)
            else:
                results = pointwise.run_queries(self.ctx, writer, positions)
            writer.flush()  # written before the unit counts as done
        except BaseException:
            _drop(writer)
            raise
        return results

    def close(self) -> None:
        with self.lock:
            writers, self.writers = self.writers, []
        for writer in writers:
            writer.flush()
            writer.pool.shutdown(wait=True)


def _drop(writer: Writer) -> None:
    """After a failed unit: its buffered writes are dropped (the unit is done again or the run
    fails) and those in flight awaited, so none lands later or fails the thread's next unit."""
    writer.actions = []
    with contextlib.suppress(Exception):
        writer.flush()


def inputs_of(ctx: RunContext) -> dict[str, str]:
    """Fingerprints of the query set, judgments and configurations a run works from."""
    return signature(ctx.query_set, ctx.judgments, [config for _, config in ctx.configs])


def helper_units(svc: Services, experiment_id: str, head: dict[str, Any]) -> ExperimentUnits:
    """A helper's share: the experiment's inputs loaded in this process. If they are not the
    ones the parent loaded (a judgment regenerated meanwhile), this worker does not help: the
    run's documents all come from one version of its inputs."""
    ctx = load(svc, head["experiment"], head.get("runId"))
    if inputs_of(ctx) != head["inputs"]:
        raise fanout.Decline("its query set, judgments or configurations changed since the "
                             "run started")
    return ExperimentUnits(svc, ctx, head)


fanout.KINDS[KIND] = helper_units
