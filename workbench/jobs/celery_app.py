"""The Celery application, configured from ``Config`` (broker: Redis).

The API process only sends jobs (by id); ``workbench worker`` consumes them. Both call
``configure`` with the same Config, so queue names and broker agree.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from celery import Celery
from opensearchpy import OpenSearch

from workbench.config import Config, is_sentinel_url
from workbench.redis_client import sentinel_options

if TYPE_CHECKING:
    from workbench.services import Services

celery_app = Celery("workbench")

_config: Config | None = None
_services: Services | None = None


def configure(config: Config, tasks: tuple[str, ...] = ()) -> Celery:
    """Point the app at the broker and set the delivery policy every job relies on. ``tasks``:
    the modules that register tasks, for a worker (which runs them); the API only sends jobs
    by name and needs none."""
    global _config, _services
    _config = config
    _services = None
    celery_app.conf.update(
        broker_url=config.celery_broker_url,
        result_backend=None,
        task_ignore_result=True,
        task_default_queue=config.task_queue,
        task_acks_late=True,
        task_reject_on_worker_lost=True,
        task_acks_on_failure_or_timeout=True,
        worker_prefetch_multiplier=1,
        # A job stops by itself JOB_STOP_MARGIN s before its timeout (``jobs.base``); the soft
        # limit interrupts one that did not, the hard limit kills its process.
        task_time_limit=config.job_timeout,
        task_soft_time_limit=config.job_interrupt_after,
        # A lost broker connection leaves running jobs running (they wait out Redis themselves,
        # docs/reliability.md "Workers survive their broker"); said explicitly, as Celery asks.
        worker_cancel_long_running_tasks_on_connection_loss=False,
        task_serializer="json",
        accept_content=["json"],
        broker_connection_retry_on_startup=True,
        # A worker waits for its broker however long it is away, instead of exiting after
        # Celery's default of 100 attempts (docs/reliability.md).
        broker_connection_max_retries=None,
        broker_transport_options=transport_options(config),
        worker_hijack_root_logger=False,
        include=list(tasks),
    )
    return celery_app


def transport_options(config: Config) -> dict[str, Any]:
    """kombu's options for the broker connection (also for a Celery app made elsewhere to
    reach the same broker, such as one that only pings workers)."""
    options: dict[str, Any] = {
        # An unacknowledged job is redelivered after this long (worker killed mid-job).
        "visibility_timeout": config.job_timeout + 60,
        # A Redis that stops answering (frozen, or cut off the network without a reset)
        # fails a send after 10 s instead of hanging it; kombu also drops and renews a
        # consumer connection whose reply is overdue (its health check).
        "socket_timeout": 10,
        "socket_connect_timeout": 5,
        "socket_keepalive": True,
    }
    if is_sentinel_url(config.celery_broker_url):
        # kombu's Sentinel transport: each connection asks the sentinels of the URL where the
        # primary of this name is, so a consumer that lost the primary reconnects to the
        # replica they promoted.
        options["master_name"] = config.redis_master_name
        options["sentinel_kwargs"] = sentinel_options(
            config.redis_sentinel_password, options["socket_timeout"],
            options["socket_connect_timeout"])
    return options


def current_config() -> Config:
    """The config this process was configured with (workers: from the environment)."""
    global _config
    if _config is None:
        configure(Config.from_env())
    assert _config is not None
    return _config


def _forget_services_after_fork() -> None:
    """A forked pool process must not share its parent's connections."""
    global _services
    _services = None


os.register_at_fork(after_in_child=_forget_services_after_fork)


def worker_services() -> Services:
    """The Services of this worker process (created on first use, after the fork)."""
    global _services
    if _services is None:
        from workbench.services import Services

        _services = Services(current_config())
    return _services


def worker_client() -> OpenSearch:
    """One opensearch-py client per worker process."""
    return worker_services().client
