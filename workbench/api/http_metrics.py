"""Counts every API request by route template and status, and times it to the end of its body.

A WSGI layer outside everything else (``FastPassThrough`` included), not a Flask hook: a request
hook would turn the fast pass-through off, and the pass-through's answers stream, so the time
that matters ends when the last byte is sent. The route is the Flask rule that matched
(``/_plugins/_search_relevance/judgments/<judgment_id>``), ``passthrough`` for what goes to the
cluster, ``unmatched`` for a request no rule took: a bounded label set, never a path.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from typing import Any

from werkzeug.wsgi import ClosingIterator

from workbench.api.proxy import METHODS
from workbench.telemetry import instruments

PASSTHROUGH = "passthrough"
_PASSTHROUGH_RULES = {"/", "/<everything:path>"}


class MeteredApp:
    def __init__(self, inner: Callable[..., Iterable[bytes]]) -> None:
        #: the app it counts for (``FastPassThrough``, which the HAProxy front reads routes from)
        self.inner = inner

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]
                 ) -> Iterable[bytes]:
        started = time.monotonic()
        seen: list[str] = []

        def start(status: str, headers: list[tuple[str, str]], *rest: Any) -> Any:
            # Flask's request is still in the environ here; it is gone once the app returns.
            seen[:] = [status.split(" ", 1)[0], route_of(environ)]
            return start_response(status, headers, *rest)

        def done() -> None:
            method = environ.get("REQUEST_METHOD", "")
            method = method if method in METHODS else "other"
            status, route = seen if seen else ("500", "unmatched")
            instruments.HTTP_REQUESTS.labels(method, route, status).inc()
            instruments.HTTP_DURATION.labels(method, route).observe(time.monotonic() - started)

        try:
            body = self.inner(environ, start)
        except BaseException:
            done()
            raise
        return ClosingIterator(body, [done])


def route_of(environ: dict[str, Any]) -> str:
    """The rule of the Flask request this environ carries, else the fast pass-through's."""
    request = environ.get("werkzeug.request")
    if request is None:
        return PASSTHROUGH  # FastPassThrough answered without a Flask request
    rule = getattr(request, "url_rule", None)
    if rule is None:
        return "unmatched"
    return PASSTHROUGH if rule.rule in _PASSTHROUGH_RULES else str(rule.rule)
