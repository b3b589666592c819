"""The experiment jobs: a run, and a scheduled run, executed by the workers.

Thin tasks over ``experiments.runner`` and ``experiments.scheduling``; a run whose judgment lists
are still being generated is queued again shortly rather than holding a worker. Importing this
module also registers the split units of pointwise and hybrid runs with the fan-out
(``jobs.fanout``).
"""

from __future__ import annotations

from typing import Any

from celery.exceptions import Retry

from workbench.experiments import runner, scheduling
from workbench.experiments import split as experiment_split
from workbench.experiments.context import RunTimedOut
from workbench.experiments.searching import REMOTE_FIELDS
from workbench.experiments.waiting import JudgmentsPending, poll_delay
from workbench.jobs.base import WorkbenchTask, extra_metadata
from workbench.jobs.celery_app import celery_app, worker_services
from workbench.store.indices import EXPERIMENT_INDEX, HISTORY_INDEX

#: re-queues allowed while waiting for judgments; the wait is bounded in time by the job
WAIT_RETRIES_CAP = 1_000_000
#: the module whose fan-out units these jobs spread (imported for its registration)
SPLIT_UNITS = (experiment_split,)


class ExperimentTask(WorkbenchTask):
    abstract = True
    status_index = EXPERIMENT_INDEX

    def error_fields(self, reason: str, exc: BaseException) -> dict[str, Any]:
        """ERROR (docs/contract.md, "Experiment lifecycle"), and the reason as the only result;
        a run whose every search with a remote configuration failed records its failures too
        (experiments/searching.py, ``remote_outcome``)."""
        extra = extra_metadata(exc)
        return {"status": "ERROR", "results": [{"error": reason}],
                **{k: extra[k] for k in REMOTE_FIELDS if k in extra}}


def requeue_while_judgments_run(task: WorkbenchTask, exc: Exception) -> Retry:
    """Queue the job again shortly instead of holding a worker while judgments are generated
    (bounded by ``WORKBENCH_JUDGMENT_WAIT``, checked by the job itself)."""
    return task.retry(exc=exc, countdown=poll_delay(task.request.retries),
                      max_retries=WAIT_RETRIES_CAP)


@celery_app.task(name="workbench.experiments.run", base=ExperimentTask, bind=True)
def run_experiment(self: ExperimentTask, experiment_id: str) -> None:
    try:
        runner.run(worker_services(), experiment_id)
    except JudgmentsPending as exc:
        raise requeue_while_judgments_run(self, exc) from None


class ScheduledRunTask(WorkbenchTask):
    abstract = True
    status_index = HISTORY_INDEX

    def error_fields(self, reason: str, exc: BaseException) -> dict[str, Any]:
        status = "TIMEOUT" if isinstance(exc, RunTimedOut) else "ERROR"
        return {"status": status, "results": {"error": reason}}


@celery_app.task(name="workbench.experiments.scheduled_run", base=ScheduledRunTask, bind=True)
def scheduled_run(self: ScheduledRunTask, history_id: str) -> None:
    try:
        scheduling.run_history(worker_services(), history_id)
    except JudgmentsPending as exc:
        raise requeue_while_judgments_run(self, exc) from None
