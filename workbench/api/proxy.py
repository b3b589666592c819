"""The catch-all pass-through: every path the workbench does not serve goes to the cluster as is.

Raw path and query string, method, body bytes (streamed both ways), status code and end-to-end
headers are kept; only hop-by-hop headers are dropped and ``Host`` is the cluster's.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import IO
from urllib.parse import quote

from flask import Blueprint, Flask, Request, Response, current_app, request
from urllib3 import BaseHTTPResponse
from werkzeug.exceptions import HTTPException
from werkzeug.routing import BaseConverter

from workbench.api import SRW_PREFIX, services
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


@bp.route("/", defaults={"path": ""}, methods=METHODS, provide_automatic_options=False)
@bp.route("/<everything:path>", methods=METHODS, provide_automatic_options=False)
def pass_through(path: str) -> Response:
    if request.path == SRW_PREFIX or request.path.startswith(SRW_PREFIX + "/"):
        raise srw_route_error(request)
    return forward(request)


def raw_target(req: Request) -> str:
    """The request target exactly as the client sent it (no decode/re-encode round trip)."""
    raw = req.environ.get("RAW_URI") or req.environ.get("REQUEST_URI")
    if raw:
        if raw.startswith(("http://", "https://")):  # absolute-form: keep path and query
            slash = raw.find("/", raw.find("//") + 2)
            raw = raw[slash:] if slash >= 0 else "/"
        return raw
    target = quote(req.environ.get("PATH_INFO", "/"), safe="/:@!$&'()*+,;=-._~")
    query = req.environ.get("QUERY_STRING")
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
    drop = hop_by_hop(upstream.headers.items())
    headers = [(k, v) for k, v in upstream.headers.items() if k.lower() not in drop]
    has_type = any(k.lower() == "content-type" for k, _ in headers)
    if req.method == "HEAD" or upstream.status in (204, 304) or 100 <= upstream.status < 200:
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
