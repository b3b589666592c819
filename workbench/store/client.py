"""The opensearch-py client the workbench's own code uses (the proxy uses ``upstream``)."""

from __future__ import annotations

from typing import Any

from opensearchpy import OpenSearch

from workbench.config import Config
from workbench.store.identity import ClusterAuth, Identity


def pool_size(config: Config) -> int:
    """Connections kept open to the cluster by one client.

    One client serves every thread of a process: the API's request threads, and inside a job the
    concurrent LLM ``_predict`` calls, the prefetched search batch and parallel aggregations. With
    urllib3's default of one kept connection, each concurrent request beyond the first opened and
    then discarded a TCP connection ("Connection pool is full").
    """
    return max(config.web_threads, config.llm_concurrency) + 4


def make_client(config: Config, default: Identity | None = None) -> OpenSearch:
    """A client for the configured cluster. Each call carries the identity of its context
    (``store.identity``); ``default`` is who calls outside any (the service when None)."""
    kwargs: dict[str, Any] = {
        "hosts": [config.opensearch_base_url],
        "pool_maxsize": pool_size(config),
        "timeout": config.opensearch_timeout,
        "max_retries": 0,
        "retry_on_timeout": False,
        "verify_certs": config.opensearch_verify_certs,
        "ssl_show_warn": False,
        "http_compress": False,
    }
    if config.opensearch_ca_certs:
        kwargs["ca_certs"] = config.opensearch_ca_certs
    kwargs["http_auth"] = ClusterAuth(config, default)
    return OpenSearch(**kwargs)
