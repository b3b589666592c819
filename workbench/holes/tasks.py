"""The fill job of an experiment's holes, run by the workers (``holes.job``). Its status index
is the judgment index: a failure ends the ``FILLED_JUDGMENT`` ERROR as the judgment jobs do
(``judgments.tasks.JudgmentTask``), its usage kept."""

from __future__ import annotations

from workbench.holes import job
from workbench.jobs.celery_app import celery_app, worker_services
from workbench.judgments.tasks import JudgmentTask


@celery_app.task(name=job.TASK, base=JudgmentTask)
def fill_holes(judgment_id: str) -> None:
    job.fill(worker_services(), judgment_id)
