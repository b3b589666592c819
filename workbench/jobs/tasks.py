"""Registered jobs. Each is thin: it takes an entity id and calls a plain function."""

from __future__ import annotations

from typing import Any

from workbench.jobs.base import WorkbenchTask, extra_metadata
from workbench.jobs.celery_app import celery_app, worker_client, worker_services
from workbench.store.indices import EXPERIMENT_INDEX, HISTORY_INDEX, JUDGMENT_INDEX


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


@celery_app.task(name="workbench.experiments.run", base=ExperimentTask)
def run_experiment(experiment_id: str) -> None:
    from workbench.experiments import runner

    runner.run(worker_services(), experiment_id)


class ScheduledRunTask(WorkbenchTask):
    abstract = True
    status_index = HISTORY_INDEX

    def error_fields(self, reason: str, exc: BaseException) -> dict[str, Any]:
        from workbench.experiments.context import RunTimedOut

        status = "TIMEOUT" if isinstance(exc, RunTimedOut) else "ERROR"
        return {"status": status, "results": {"error": reason}}


@celery_app.task(name="workbench.experiments.scheduled_run", base=ScheduledRunTask)
def scheduled_run(history_id: str) -> None:
    from workbench.experiments import scheduling

    scheduling.run_history(worker_services(), history_id)
