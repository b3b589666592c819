"""The run job of a monitor, run by the workers (``monitors.run``); delivery and failure policy
are the base task's (``jobs.base``): a failure the job names ends the run ``ERROR`` with
``error`` and what it spent (``usage``)."""

from __future__ import annotations

from typing import Any

from workbench.jobs.base import WorkbenchTask, extra_metadata
from workbench.jobs.celery_app import celery_app, worker_services
from workbench.monitors import run
from workbench.store.indices import MONITOR_RUN_INDEX


class MonitorRunTask(WorkbenchTask):
    abstract = True
    status_index = MONITOR_RUN_INDEX

    def error_fields(self, reason: str, exc: BaseException) -> dict[str, Any]:
        kept = extra_metadata(exc)
        return {"status": "ERROR", "error": reason,
                **({"usage": kept["usage"]} if "usage" in kept else {})}


@celery_app.task(name=run.TASK, base=MonitorRunTask)
def run_monitor(run_id: str) -> None:
    run.execute(worker_services(), run_id)
