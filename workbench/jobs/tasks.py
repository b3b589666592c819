"""Registered jobs. Each is thin: it takes an entity id and calls a plain function."""

from __future__ import annotations

from typing import Any

from celery.exceptions import Retry

from workbench.jobs import fanout
from workbench.jobs.base import WorkbenchTask, extra_metadata
from workbench.jobs.celery_app import celery_app, worker_client, worker_services
from workbench.store.identity import Identity, service_identity
from workbench.store.indices import (
    EVALUATE_BATCH_INDEX,
    EXPERIMENT_INDEX,
    HISTORY_INDEX,
    JUDGMENT_INDEX,
)

#: re-queues allowed while waiting for judgments; the wait is bounded in time by the job
WAIT_RETRIES_CAP = 1_000_000


class JudgmentTask(WorkbenchTask):
    abstract = True
    status_index = JUDGMENT_INDEX

    def error_fields(self, reason: str, exc: BaseException) -> dict[str, Any]:
        """§7.1: ERROR, the reason as the whole metadata, no ratings."""
        return {"status": "ERROR", "metadata": {"error": reason, **extra_metadata(exc)},
                "judgmentRatings": []}


class JudgmentRetryTask(JudgmentTask):
    abstract = True

    def write_failure(self, entity_id: str, fields: dict[str, Any]) -> None:
        """A failed retry keeps the ratings it had; only the status and the error change."""
        worker_client().update(
            index=self.status_index, id=entity_id, refresh=True, retry_on_conflict=3,
            body={"script": {
                "source": "ctx._source.status = 'ERROR'; "
                          "if (ctx._source.metadata == null) { ctx._source.metadata = [:]; } "
                          "ctx._source.metadata.error = params.error",
                "params": {"error": fields["metadata"]["error"]}}},
        )


@celery_app.task(name="workbench.judgments.generate", base=JudgmentTask)
def generate_judgment(judgment_id: str) -> None:
    from workbench.judgments import runner

    runner.generate(worker_services(), judgment_id)


@celery_app.task(name="workbench.judgments.retry", base=JudgmentRetryTask)
def retry_judgment(judgment_id: str) -> None:
    from workbench.judgments import runner

    runner.retry(worker_services(), judgment_id)




class ExperimentTask(WorkbenchTask):
    abstract = True
    status_index = EXPERIMENT_INDEX

    def error_fields(self, reason: str, exc: BaseException) -> dict[str, Any]:
        """§8.3: ERROR, and the reason as the only result."""
        return {"status": "ERROR", "results": [{"error": reason}]}


def requeue_while_judgments_run(task: WorkbenchTask, exc: Exception) -> Retry:
    """Queue the job again shortly instead of holding a worker while judgments are generated
    (bounded by ``WORKBENCH_JUDGMENT_WAIT``, checked by the job itself)."""
    from workbench.experiments.waiting import poll_delay

    return task.retry(exc=exc, countdown=poll_delay(task.request.retries),
                      max_retries=WAIT_RETRIES_CAP)


@celery_app.task(name="workbench.experiments.run", base=ExperimentTask, bind=True)
def run_experiment(self: ExperimentTask, experiment_id: str) -> None:
    from workbench.experiments import runner
    from workbench.experiments.waiting import JudgmentsPending

    try:
        runner.run(worker_services(), experiment_id)
    except JudgmentsPending as exc:
        raise requeue_while_judgments_run(self, exc) from None


class ScheduledRunTask(WorkbenchTask):
    abstract = True
    status_index = HISTORY_INDEX

    def error_fields(self, reason: str, exc: BaseException) -> dict[str, Any]:
        from workbench.experiments.context import RunTimedOut

        status = "TIMEOUT" if isinstance(exc, RunTimedOut) else "ERROR"
        return {"status": status, "results": {"error": reason}}


@celery_app.task(name="workbench.experiments.scheduled_run", base=ScheduledRunTask, bind=True)
def scheduled_run(self: ScheduledRunTask, history_id: str) -> None:
    from workbench.experiments import scheduling
    from workbench.experiments.waiting import JudgmentsPending

    try:
        scheduling.run_history(worker_services(), history_id)
    except JudgmentsPending as exc:
        raise requeue_while_judgments_run(self, exc) from None


class EvaluateBatchTask(WorkbenchTask):
    abstract = True
    status_index = EVALUATE_BATCH_INDEX

    def error_fields(self, reason: str, exc: BaseException) -> dict[str, Any]:
        return {"status": "ERROR", "error": reason}


@celery_app.task(name="workbench.evaluation.batch", base=EvaluateBatchTask)
def evaluate_batch(batch_id: str) -> None:
    from workbench.evaluation import batch_job

    batch_job.run(worker_services(), batch_id)


class HelperTask(WorkbenchTask):
    """A helper of a split job (``jobs.fanout``): no lease of its own (the parent holds the
    entity's; the units have theirs), no entity to mark ERROR (a unit that fails for good fails
    the parent), and the identity the parent runs as, named in the message."""

    abstract = True

    def job_identity(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Identity:
        service = service_identity(worker_services().config)
        user = args[3] if len(args) > 3 else None
        return Identity(service.authorization, impersonate=user) if user else service


@celery_app.task(name=fanout.HELPER_TASK, base=HelperTask)
def help_split_job(kind_name: str, entity_id: str, run: str, user: str | None = None) -> int:
    return fanout.help_run(worker_services(), kind_name, entity_id, run)
