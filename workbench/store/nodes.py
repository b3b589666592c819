"""The order in which the raw-HTTP paths (the pass-through's ``upstream``, ML Commons calls) try
the cluster's nodes.

opensearch-py keeps its own list of live and dead nodes, but only for its own connections,
which parse every body; urllib3 has no failover between hosts; HAProxy does this for the front.
The raw paths need only this: round robin over the nodes not marked down, then the ones marked
down, so a request still finds a node that came back. A node is marked down when a connection
to it could not be opened, for ``DOWN_SECONDS``.
"""

from __future__ import annotations

import itertools
import re
import threading
import time
from collections.abc import Sequence

from urllib3.exceptions import ConnectTimeoutError

DOWN_SECONDS = 10.0
#: requests that only read, whatever their method (the front's ``reads`` acl names the same):
#: safe to send to another node after any connection failure
READ_PATHS = re.compile(r"/(_search|_msearch|_count|_mget|_field_caps|_validate/query|_explain"
                        r"|_mapping|_settings|_cluster/health)(/|$|\?)")


def only_reads(method: str, target: str) -> bool:
    """Whether a request to ``target`` (path and query) only reads: sent again to another node
    when its connection fails, whether or not it reached the first."""
    return method in ("GET", "HEAD") or READ_PATHS.search(target) is not None


def connection_reason(exc: BaseException) -> str:
    """A short reason for a failed connection to a node, without its URL (which may carry
    credentials): the innermost cause's kind. Both clients (``store.client``'s log lines and
    ``store.upstream``'s 503s) word it the same way."""
    inner: BaseException = exc
    while isinstance(getattr(inner, "reason", None), BaseException):
        inner = inner.reason  # type: ignore[attr-defined]
    while inner.__cause__ is not None:
        inner = inner.__cause__
    text = str(inner).lower()
    if "refused" in text:
        return "connection refused"
    if "name or service not known" in text or "nodename nor servname" in text:
        return "host name not found"
    if isinstance(inner, ConnectTimeoutError) or "timed out" in text:
        return "connection timed out"
    if "reset" in text or "closed" in text or "aborted" in text:
        return "connection lost"
    return type(inner).__name__


class Nodes:
    """Node URLs shared by the threads of one process."""

    def __init__(self, urls: Sequence[str], down_for: float = DOWN_SECONDS) -> None:
        self.urls = tuple(urls)
        self.down_for = down_for
        self._down_until: dict[str, float] = {}
        self._turn = itertools.count()
        self._lock = threading.Lock()

    def order(self) -> list[str]:
        """Every node, the next in turn first among those up, then those down (soonest back
        first)."""
        if len(self.urls) == 1:
            return list(self.urls)
        now = time.monotonic()
        with self._lock:
            start = next(self._turn) % len(self.urls)
            turn = self.urls[start:] + self.urls[:start]
            up = [u for u in turn if self._down_until.get(u, 0.0) <= now]
            down = sorted((u for u in turn if u not in up), key=lambda u: self._down_until[u])
        return up + down

    def down(self, url: str) -> None:
        with self._lock:
            self._down_until[url] = time.monotonic() + self.down_for

    def up(self, url: str) -> None:
        if url in self._down_until:
            with self._lock:
                self._down_until.pop(url, None)
