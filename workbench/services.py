"""Per-process handles to the outside world, shared by the threads of an API process or a worker:
config, opensearch-py client, raw upstream pool, Redis, plugin settings and event counters."""

from __future__ import annotations

import logging
import threading
from contextlib import nullcontext
from functools import cached_property

import redis
from opensearchpy import OpenSearch

from workbench import redis_client
from workbench.config import Config
from workbench.llm.registry import Registry, load_registry
from workbench.llm.runtime import StoredModels
from workbench.llm.secrets import SecretBox
from workbench.store import generation
from workbench.store.bootstrap import ensure_indices
from workbench.store.client import make_client
from workbench.store.identity import NOBODY, as_service
from workbench.store.models import ModelStore
from workbench.store.plugin_settings import PluginSettings, Stored
from workbench.store.upstream import Upstream
from workbench.telemetry.event_stats import EventStats

log = logging.getLogger(__name__)


class Services:
    """Created once per process (after gunicorn or Celery forks); connections open lazily."""

    def __init__(self, config: Config, for_callers: bool = False) -> None:
        """``for_callers``: the API process, whose cluster calls act as the caller; a call made
        outside a request's identity then carries no credentials at all (fail closed)."""
        self.config = config
        self.for_callers = for_callers
        self._indices_ready = False
        self._lock = threading.Lock()

    @cached_property
    def client(self) -> OpenSearch:
        return make_client(self.config, NOBODY if self.for_callers else None)

    @cached_property
    def upstream(self) -> Upstream:
        return Upstream(self.config, maxsize=max(8, self.config.web_threads * 2))

    @cached_property
    def cache_redis(self) -> redis.Redis:
        """Redis for the caches' generation number only: a short timeout (store/generation.py)."""
        return generation.client(self.config)

    @cached_property
    def redis(self) -> redis.Redis:
        return redis_client.connect(self.config, socket_timeout=10)

    @cached_property
    def settings(self) -> PluginSettings:
        return PluginSettings(self.client)

    @cached_property
    def secret_box(self) -> SecretBox:
        """Encrypts and decrypts the API keys of run-time models (WORKBENCH_SECRET_KEY)."""
        return SecretBox(self.config.secret_key)

    @cached_property
    def models(self) -> Registry:
        """LLM models registered with the workbench (the environment's validated when first
        needed), with the run-time ones behind them: read as the caller while answering a
        request, as the service identity in a job."""
        runtime = StoredModels(
            lambda: ModelStore(self.client), self.config, self.secret_box,
            identity=(nullcontext if self.for_callers else lambda: as_service(self.client)))
        return load_registry(self.config, runtime)

    @cached_property
    def stats(self) -> EventStats:
        return EventStats(self.redis)

    def record_event(self, *names: str, settings: Stored | None = None) -> None:
        """Count SRW events, unless stats are switched off (in ``settings`` when the caller
        has just read them, else read now). Best effort: the event (a queued job) has
        happened, so Redis down loses the count, not the answer."""
        if (settings or self.settings.load()).value("stats_enabled"):
            try:
                self.stats.record(*names)
            except redis.exceptions.RedisError as exc:
                log.warning("could not count %s: Redis: %s", ", ".join(names),
                            type(exc).__name__)

    @property
    def indices_ready(self) -> bool:
        """Whether ``ensure_indices`` has run in this process."""
        return self._indices_ready

    def ensure_indices(self) -> None:
        """Create missing system indices once per process; later calls cost nothing."""
        if self._indices_ready:
            return
        with self._lock:
            if not self._indices_ready:
                with as_service(self.client):
                    created = ensure_indices(self.client, self.config.index_mappings_dir)
                if created:
                    log.info("created system indices: %s", ", ".join(created))
                self._indices_ready = True
