"""The catch-all pass-through: every path the workbench does not serve goes to the cluster as is.

Raw path and query string, method, body bytes (streamed both ways), status code and end-to-end
headers are kept; only hop-by-hop headers are dropped and ``Host`` is the cluster's.

Plain pass-through requests are served by ``FastPassThrough``, a WSGI layer in front of Flask that
skips Flask's per-request machinery; everything else (workbench routes, bodies Flask must check or
decode, errors) takes the ordinary Flask route to ``pass_through``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import IO, Any
from urllib.parse import quote

from flask import Blueprint, Flask, Request, Response, current_app, request
from urllib3 import BaseHTTPResponse
from werkzeug.datastructures import EnvironHeaders
from werkzeug.exceptions import HTTPException
from werkzeug.routing import BaseConverter
from werkzeug.wsgi import get_input_stream

from workbench.api import SRW_PREFIX, check_output_flags, services
from workbench.errors import MethodNotAllowedError, WorkbenchError
from workbench.store.upstream import CHUNK, hop_by_hop, stream_body

METHODS = ["GET", "HEAD", "POST", "PUT", "DELETE", "PATCH", "OPTIONS"]

bp = Blueprint("proxy", __name__)


class EverythingConverter(BaseConverter):
    """Matches any remainder of the path, including empty segments and a leading slash."""

    regex = ".*"
    weight = 1000
    part_isolating = False


def install(app: Flask) -> None:
    """Register the pass-through; call after every other blueprint so it matches last."""
    app.url_map.converters["everything"] = EverythingConverter
    app.register_blueprint(bp)
    app.wsgi_app = FastPassThrough(app)  # type: ignore[method-assign]


@bp.route("/", defaults={"path": ""}, methods=METHODS, provide_automatic_options=False)
@bp.route("/<everything:path>", methods=METHODS, provide_automatic_options=False)
def pass_through(path: str) -> Response:
    if request.path == SRW_PREFIX or request.path.startswith(SRW_PREFIX + "/"):
        check_output_flags()
        raise srw_route_error(request)
    return forward(request)


def raw_target(req: Request) -> str:
    """The request target exactly as the client sent it (no decode/re-encode round trip)."""
    return _raw_target(req.environ)


def _raw_target(environ: dict[str, Any]) -> str:
    raw = environ.get("RAW_URI") or environ.get("REQUEST_URI")
    if raw:
        if raw.startswith(("http://", "https://")):  # absolute-form: keep path and query
            slash = raw.find("/", raw.find("//") + 2)
            raw = raw[slash:] if slash >= 0 else "/"
        return str(raw)
    target = quote(environ.get("PATH_INFO", "/"), safe="/:@!$&'()*+,;=-._~")
    query = environ.get("QUERY_STRING")
    return f"{target}?{query}" if query else target


def forward(req: Request, body_bytes: bytes | None = None) -> Response:
    """Send the request to the cluster and stream its answer back. ``body_bytes`` replaces a
    body the caller has already read."""
    content_length = req.content_length
    chunked = "chunked" in req.headers.get("Transfer-Encoding", "").lower()
    body: IO[bytes] | Iterator[bytes] | bytes | None = None
    if body_bytes is not None:
        body, content_length = body_bytes, len(body_bytes)
    elif content_length is not None:
        body = req.stream if content_length > 0 else b""
    elif chunked:
        body = _chunks(req)
    upstream = services().upstream.request(
        req.method, raw_target(req), list(req.headers.items()), body, content_length
    )
    return _answer(req.method, upstream)


def _answer(method: str, upstream: BaseHTTPResponse) -> Response:
    """The client's response to the cluster's answer: status, end-to-end headers, streamed body."""
    drop = hop_by_hop(upstream.headers.items())
    headers = [(k, v) for k, v in upstream.headers.items() if k.lower() not in drop]
    has_type = any(k.lower() == "content-type" for k, _ in headers)
    if method == "HEAD" or upstream.status in (204, 304) or 100 <= upstream.status < 200:
        # No body may follow: finish the exchange now so the connection returns to the pool.
        upstream.drain_conn()
        upstream.release_conn()
        # An empty list, not b"": werkzeug would reset Content-Length to 0 for bytes.
        response = Response([], status=_status_line(upstream), headers=headers)
    else:
        response = Response(
            stream_body(upstream), status=_status_line(upstream), headers=headers,
            direct_passthrough=True,
        )
    if not has_type:
        del response.headers["Content-Type"]
    return response


def _status_line(upstream: BaseHTTPResponse) -> str:
    """The cluster's status code and reason phrase, as it sent them."""
    return f"{upstream.status} {upstream.reason or ''}".strip()


def _chunks(req: Request) -> Iterator[bytes]:
    stream = req.stream
    while chunk := stream.read(CHUNK):
        yield chunk


class FastPassThrough:
    """The app's WSGI entry: a plain pass-through request skips Flask's request machinery.

    Flask's contexts, routing, signals and hooks cost about 100 of the 140 us of Python the app
    spent on a small proxied ``_search`` and a fifth of the worker's CPU under load (py-spy and
    ``workbench/bench/passthrough.py``). A request goes the fast way only when Flask would have
    done exactly the same: its path cannot match any workbench route (nor the SRW prefix),
    its body has a valid Content-Length within ``MAX_CONTENT_LENGTH`` (not chunked) and the app
    has no request hooks beyond the X-Opaque-Id echo of ``create_app``, which is repeated here.
    Errors of the cluster connection are answered by the app's own error handlers.
    """

    def __init__(self, app: Flask) -> None:
        self.app = app
        self.flask_wsgi_app = app.wsgi_app
        self._flask_prefixes: tuple[str, ...] | None = None

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]
                 ) -> Iterable[bytes]:
        content_length = self._fast_length(environ)
        if content_length is None:
            return self.flask_wsgi_app(environ, start_response)
        method = environ["REQUEST_METHOD"]
        # The stream Flask's ``request.stream`` would give (the length is checked above).
        body = get_input_stream(environ, max_content_length=self._limit()) \
            if content_length else b""
        try:
            upstream = self.app.extensions["workbench"].upstream.request(
                method, _raw_target(environ), list(EnvironHeaders(environ).items()), body,
                content_length)
            response = _answer(method, upstream)
        except Exception as exc:  # noqa: BLE001 - answered by the app's handlers, as in Flask
            return self._error(environ, start_response, exc)
        opaque = environ.get("HTTP_X_OPAQUE_ID")
        if opaque and "X-Opaque-Id" not in response.headers:
            response.headers["X-Opaque-Id"] = opaque
        return response(environ, start_response)

    def _fast_length(self, environ: dict[str, Any]) -> int | None:
        """The body length when the request may go the fast way, else None."""
        if environ.get("REQUEST_METHOD") not in METHODS or "HTTP_TRANSFER_ENCODING" in environ:
            return None
        # Routing ignores leading slashes ("//_cluster/settings" is the settings route).
        if ("/" + environ.get("PATH_INFO", "").lstrip("/")).startswith(self.prefixes()):
            return None
        raw = environ.get("CONTENT_LENGTH") or "0"
        if not raw.isdigit():
            return None
        length, limit = int(raw), self._limit()
        return None if limit is not None and length > limit else length

    def _limit(self) -> int | None:
        limit: int | None = self.app.config.get("MAX_CONTENT_LENGTH")
        return limit

    def prefixes(self) -> tuple[str, ...]:
        """Path prefixes Flask must see: every non-proxy route up to its first variable part and
        the SRW prefix. ``("",)`` (everything) when the app has hooks this class does not know."""
        if self._flask_prefixes is None:
            app = self.app
            scopes = (None, bp.name)  # hooks of other blueprints never see pass-through requests

            def hooks(table: dict[str | None, list[Callable[..., Any]]]) -> list[str]:
                return [f.__name__ for scope in scopes for f in table.get(scope, [])]

            plain = (hooks(app.after_request_funcs) == ["echo_opaque_id"]
                     and not hooks(app.before_request_funcs)
                     and not hooks(app.teardown_request_funcs)
                     and not hooks(app.url_value_preprocessors))
            routes = {rule.rule.split("<", 1)[0] for rule in app.url_map.iter_rules()
                      if rule.endpoint != "proxy.pass_through"} | {SRW_PREFIX}
            shortest = {p for p in routes if not any(p.startswith(q) for q in routes - {p})}
            self._flask_prefixes = tuple(sorted(shortest)) if plain else ("",)
        return self._flask_prefixes

    def _error(self, environ: dict[str, Any], start_response: Callable[..., Any],
               exc: Exception) -> Iterable[bytes]:
        """What Flask answers when the view raises ``exc`` (handlers, after-request hooks)."""
        app = self.app
        with app.request_context(environ):
            response = app.finalize_request(app.handle_user_exception(exc))
        return response(environ, start_response)


def srw_route_error(req: Request) -> WorkbenchError:
    """404 for an unknown SRW path, 405 for a known one with the wrong method (never proxied)."""
    adapter = current_app.url_map.bind_to_environ(req.environ)
    allowed = []
    for method in METHODS:
        try:
            endpoint, _ = adapter.match(req.path, method=method)
        except HTTPException:
            continue
        if endpoint != "proxy.pass_through":
            allowed.append(method)
    uri = req.full_path.rstrip("?")
    if allowed:
        return MethodNotAllowedError(
            f"Incorrect HTTP method for uri [{uri}] and method [{req.method}], "
            f"allowed: [{', '.join(allowed)}]",
            allowed,
        )
    return WorkbenchError(
        f"no handler found for uri [{uri}] and method [{req.method}]",
        status=404,
        error_type="resource_not_found_exception",
    )
