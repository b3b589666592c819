"""The evaluation job: a large ``_evaluate/_batch`` judged on the workers."""

from __future__ import annotations

from typing import Any

from workbench.evaluation import batch_job
from workbench.jobs.base import WorkbenchTask, extra_metadata
from workbench.jobs.celery_app import celery_app, worker_services
from workbench.store.indices import EVALUATE_BATCH_INDEX


class EvaluateBatchTask(WorkbenchTask):
    abstract = True
    status_index = EVALUATE_BATCH_INDEX

    def error_fields(self, reason: str, exc: BaseException) -> dict[str, Any]:
        """ERROR, the reason, and what the entries judged before the failure cost."""
        usage = extra_metadata(exc).get("usage")
        return {"status": "ERROR", "error": reason, **({"usage": usage} if usage else {})}


@celery_app.task(name="workbench.evaluation.batch", base=EvaluateBatchTask)
def evaluate_batch(batch_id: str) -> None:
    batch_job.run(worker_services(), batch_id)
