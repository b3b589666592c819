"""The Celery application, configured from ``Config`` (broker: Redis).

The API process only sends jobs (by id); ``workbench worker`` consumes them. Both call
``configure`` with the same Config, so queue names and broker agree.
"""

from __future__ import annotations

from functools import lru_cache

from celery import Celery
from opensearchpy import OpenSearch

from workbench.config import Config

celery_app = Celery("workbench")

_config: Config | None = None


def configure(config: Config) -> Celery:
    """Point the app at the broker and set the delivery policy every job relies on."""
    global _config
    _config = config
    _client.cache_clear()
    celery_app.conf.update(
        broker_url=config.celery_broker_url,
        result_backend=None,
        task_ignore_result=True,
        task_default_queue=config.task_queue,
        task_acks_late=True,
        task_reject_on_worker_lost=True,
        task_acks_on_failure_or_timeout=True,
        worker_prefetch_multiplier=1,
        task_time_limit=config.job_timeout,
        task_soft_time_limit=max(1, config.job_timeout - 30),
        task_serializer="json",
        accept_content=["json"],
        broker_connection_retry_on_startup=True,
        # An unacknowledged job is redelivered after this long (worker killed mid-job).
        broker_transport_options={"visibility_timeout": config.job_timeout + 60},
        worker_hijack_root_logger=False,
    )
    return celery_app


def current_config() -> Config:
    """The config this process was configured with (workers: from the environment)."""
    global _config
    if _config is None:
        configure(Config.from_env())
    assert _config is not None
    return _config


@lru_cache(maxsize=1)
def _client() -> OpenSearch:
    from workbench.store.client import make_client

    return make_client(current_config())


def worker_client() -> OpenSearch:
    """One opensearch-py client per worker process."""
    return _client()
