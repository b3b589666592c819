"""The job infrastructure's own task: the helper of a split job (``jobs.fanout``).

The domain's jobs are registered by their own packages (``judgments.tasks``,
``experiments.tasks``, ``evaluation.tasks``), which a worker imports at start
(``workbench/cli/main.py``); the API only sends jobs by name. Importing it (only workers do)
also wires a stopping worker's hand-over of its jobs to Celery's signals (``jobs.handover``).
"""

from __future__ import annotations

from typing import Any

from workbench.jobs import fanout, handover
from workbench.jobs.base import WorkbenchTask
from workbench.jobs.celery_app import celery_app, worker_services
from workbench.store.identity import Identity, service_identity


class HelperTask(WorkbenchTask):
    """A helper of a split job (``jobs.fanout``): no lease of its own (the parent holds the
    entity's; the units have theirs), no entity to mark ERROR (a unit that fails for good fails
    the parent), and the identity the parent runs as, named in the message."""

    abstract = True

    def log_entity(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        return args[1] if len(args) > 1 else kwargs.get("entity_id")

    def job_identity(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Identity:
        service = service_identity(worker_services().config)
        user = args[3] if len(args) > 3 else None
        return Identity(service.authorization, impersonate=user) if user else service


@celery_app.task(name=fanout.HELPER_TASK, base=HelperTask)
def help_split_job(kind_name: str, entity_id: str, run: str, user: str | None = None) -> int:
    return fanout.help_run(worker_services(), kind_name, entity_id, run)


handover.connect()
