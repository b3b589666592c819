"""Per-process handles to the outside world: config, opensearch-py client, raw upstream pool."""

from __future__ import annotations

import logging
import threading
from functools import cached_property

from opensearchpy import OpenSearch

from workbench.config import Config
from workbench.store.bootstrap import ensure_indices
from workbench.store.client import make_client
from workbench.store.upstream import Upstream

log = logging.getLogger(__name__)


class Services:
    """Created once per process (after gunicorn forks), shared by its threads."""

    def __init__(self, config: Config) -> None:
        self.config = config
        self._indices_ready = False
        self._lock = threading.Lock()

    @cached_property
    def client(self) -> OpenSearch:
        return make_client(self.config)

    @cached_property
    def upstream(self) -> Upstream:
        return Upstream(self.config, maxsize=max(8, self.config.web_threads * 2))

    def ensure_indices(self) -> None:
        """Create missing system indices once per process; later calls cost nothing."""
        if self._indices_ready:
            return
        with self._lock:
            if not self._indices_ready:
                created = ensure_indices(self.client, self.config.index_mappings_dir)
                if created:
                    log.info("created system indices: %s", ", ".join(created))
                self._indices_ready = True
