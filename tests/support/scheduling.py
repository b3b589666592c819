"""A scheduled experiment and a scheduler of the test's own, which fires it at the times the
test names (``Scheduler.tick(now=...)``) instead of waiting for the clock."""

from __future__ import annotations

from datetime import UTC, datetime

from opensearchpy import OpenSearch

from tests.support.api import Api
from workbench.config import Config
from workbench.experiments.scheduling import Scheduler
from workbench.services import Services

JOBS = ".search-relevance-scheduled-experiment-jobs"


def scheduled(api: Api, direct: OpenSearch, env: dict[str, str], experiment_id: str,
              cron: str) -> tuple[Scheduler, datetime]:
    """Schedule the experiment with ``cron``; a scheduler over ``env`` and the time the
    schedule was enabled (the cron's fire times count from it)."""
    api.srw("POST", "/experiments/schedule", {"experimentId": experiment_id,
                                              "cronExpression": cron})
    job = direct.get(index=JOBS, id=experiment_id)["_source"]
    enabled = datetime.fromtimestamp(job["enabledTime"] / 1000, UTC)
    return Scheduler(Services(Config.from_env(env))), enabled
