"""The opensearch-py client the workbench's own code uses (the proxy uses ``upstream``).

It is given every node of ``OPENSEARCH_URL``: opensearch-py spreads requests over them, and a
node whose connection fails is marked dead for a while (``DEAD_SECONDS``, longer each time it
fails again) while the request goes to the next. That retry is opensearch-py's only when the
request cannot have changed anything (``FailoverConnection``), so no write is sent twice.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from opensearchpy import OpenSearch, Urllib3HttpConnection
from opensearchpy.exceptions import ConnectionError as OpenSearchConnectionError
from opensearchpy.exceptions import ConnectionTimeout, TransportError
from urllib3.exceptions import ConnectTimeoutError, NewConnectionError

from workbench.config import Config
from workbench.store.identity import ClusterAuth, Identity
from workbench.store.nodes import connection_reason, only_reads
from workbench.telemetry import instruments

log = logging.getLogger(__name__)

#: how long a node whose connection failed is left out before it is tried again (opensearch-py
#: doubles it for each failure in a row); a restarted node is back within this
DEAD_SECONDS = 10.0


class InFlightLost(ConnectionTimeout):
    """The connection to a node failed after a request that changes something may have reached
    it (a reset, an answer cut short). Not sent to another node: it may have been applied.

    A ``ConnectionTimeout`` so that opensearch-py does not retry it (it retries every other
    ``ConnectionError`` on the next node) while every caller that waits out an unreachable
    cluster still does (``jobs.base.TRANSIENT``); the API answers it as unreachable (503)."""


def _not_sent(cause: Any) -> bool:
    """The connection failed before the request left: refused, unknown host, connect timeout."""
    return isinstance(cause, (NewConnectionError, ConnectTimeoutError))


class FailoverConnection(Urllib3HttpConnection):
    """A node's connection whose failures opensearch-py may retry on another node only when
    the request was not sent, or only reads. A node that fails is named in one log line (no
    traceback: with several nodes it is an event the workbench rides out, not a crash)."""

    def log_request_fail(self, method: str, full_url: str, path: str, body: Any,
                         duration: float, status_code: int | None = None,
                         response: str | None = None,
                         exception: Exception | None = None) -> None:
        if exception is None:  # the node answered with an error status: opensearch-py's line
            super().log_request_fail(method, full_url, path, body, duration, status_code,
                                     response, exception)
            return
        log.warning("OpenSearch node %s failed %s %s after %.3fs: %s", self.host, method, path,
                    duration, connection_reason(exception))

    def perform_request(self, method: str, url: str, *args: Any, **kwargs: Any) -> Any:
        started = time.monotonic()
        outcome = "ok"
        try:
            return super().perform_request(method, url, *args, **kwargs)
        except ConnectionTimeout:
            outcome = "timeout"
            raise  # no answer in time: not retried, as before
        except OpenSearchConnectionError as exc:
            outcome = "unreachable"
            if _not_sent(exc.info) or only_reads(method, url):
                raise
            raise InFlightLost("N/A", str(exc), exc.info) from exc
        except TransportError as exc:
            status = exc.status_code if isinstance(exc.status_code, int) else None
            outcome = instruments.opensearch_outcome(status)
            raise
        finally:
            instruments.count_opensearch("client", outcome, time.monotonic() - started)


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
    nodes = list(config.opensearch_nodes)
    kwargs: dict[str, Any] = {
        "hosts": nodes,
        "connection_class": FailoverConnection,
        "pool_maxsize": pool_size(config),
        "timeout": config.opensearch_timeout,
        # each other node once, for a request that failed before it was sent
        "max_retries": len(nodes) - 1,
        "retry_on_timeout": False,
        "dead_timeout": DEAD_SECONDS,
        "verify_certs": config.opensearch_verify_certs,
        "ssl_show_warn": False,
        "http_compress": False,
    }
    if config.opensearch_ca_certs:
        kwargs["ca_certs"] = config.opensearch_ca_certs
    kwargs["http_auth"] = ClusterAuth(config, default)
    return OpenSearch(**kwargs)
