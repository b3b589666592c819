"""The judgment jobs: generation and ``_retry`` of failed documents, run by the workers.

Each task is thin: it takes the judgment's id and calls ``judgments.runner``; delivery and
failure policy are the base task's (``jobs.base``). Importing this module also registers the
split units of LLM and reference judgments with the fan-out (``jobs.fanout``).
"""

from __future__ import annotations

from typing import Any

from workbench.jobs.base import WorkbenchTask, extra_metadata
from workbench.jobs.celery_app import celery_app, worker_client, worker_services
from workbench.judgments import reference_job, runner
from workbench.judgments.llm import split as llm_split
from workbench.store.indices import JUDGMENT_INDEX
from workbench.store.repository import Repository

#: the modules whose fan-out units these jobs spread (imported for their registration)
SPLIT_UNITS = (llm_split, reference_job)


class JudgmentTask(WorkbenchTask):
    abstract = True
    status_index = JUDGMENT_INDEX

    def error_fields(self, reason: str, exc: BaseException) -> dict[str, Any]:
        """ERROR (docs/contract.md, "Judgment lifecycle"), the reason as the whole metadata, no
        ratings."""
        return {"status": "ERROR", "metadata": {"error": reason, **extra_metadata(exc)},
                "judgmentRatings": []}


class JudgmentRetryTask(JudgmentTask):
    abstract = True

    def write_failure(self, entity_id: str, fields: dict[str, Any]) -> None:
        """A failed retry keeps the ratings it had; the status and the error change, and the
        usage becomes the earlier runs' and this one's together, when it made calls."""
        usage = fields["metadata"].get("usage")
        Repository(worker_client(), self.status_index).update_script(
            entity_id,
            "ctx._source.status = 'ERROR'; "
            "if (ctx._source.metadata == null) { ctx._source.metadata = [:]; } "
            "ctx._source.metadata.error = params.error; "
            "if (params.usage != null) { ctx._source.metadata.usage = params.usage; }",
            {"error": fields["metadata"]["error"], "usage": usage})


@celery_app.task(name="workbench.judgments.generate", base=JudgmentTask)
def generate_judgment(judgment_id: str) -> None:
    runner.generate(worker_services(), judgment_id)


@celery_app.task(name="workbench.judgments.retry", base=JudgmentRetryTask)
def retry_judgment(judgment_id: str) -> None:
    runner.retry(worker_services(), judgment_id)
