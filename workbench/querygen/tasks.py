"""The generation job of a query set, run by the workers (``querygen.job``); delivery and
failure policy are the base task's (``jobs.base``): a failure the job names ends the set
``ERROR`` with ``metadata.error``."""

from __future__ import annotations

from workbench.jobs.base import WorkbenchTask
from workbench.jobs.celery_app import celery_app, worker_services
from workbench.querygen import job
from workbench.store.indices import QUERY_SET_INDEX


class QuerySetTask(WorkbenchTask):
    abstract = True
    status_index = QUERY_SET_INDEX


@celery_app.task(name=job.TASK, base=QuerySetTask)
def generate_query_set(query_set_id: str) -> None:
    job.generate(worker_services(), query_set_id)
