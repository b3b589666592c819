"""``create_app``: config -> logging -> services -> celery -> blueprints -> error handlers."""

from __future__ import annotations

import logging

import redis.exceptions
from flask import Flask, Response, request
from opensearchpy.exceptions import ConnectionError as OpenSearchConnectionError
from opensearchpy.exceptions import ConnectionTimeout as OpenSearchConnectionTimeout
from opensearchpy.exceptions import TransportError
from werkzeug.exceptions import HTTPException, RequestEntityTooLarge

from workbench.api import cluster as cluster_api
from workbench.api import json_response
from workbench.api import ml as ml_api
from workbench.api import openapi as openapi_api
from workbench.api import proxy as proxy_api
from workbench.api import srw as srw_api
from workbench.api.creates import unwritten
from workbench.api.http_metrics import MeteredApp
from workbench.config import Config, redact_url
from workbench.errors import (
    ClusterTimeout,
    ClusterUnavailable,
    MethodNotAllowedError,
    PayloadTooLarge,
    RedisUnavailable,
    TextError,
    WorkbenchError,
    envelope,
    snake_case,
    timeout_reason,
    unreachable_reason,
)
from workbench.jobs.celery_app import configure as configure_celery
from workbench.services import Services
from workbench.store.client import InFlightLost
from workbench.telemetry.logs import setup_logging

log = logging.getLogger(__name__)


def create_app(config: Config | None = None) -> Flask:
    """Build the WSGI app. Services connect lazily, so this never blocks on the cluster."""
    config = config or Config.from_env()
    setup_logging(config.log_level, config.log_format)
    app = Flask("workbench", static_folder=None)  # no /static route: that path is the cluster's
    app.config["MAX_CONTENT_LENGTH"] = config.max_request_bytes
    app.url_map.strict_slashes = False
    app.url_map.merge_slashes = False
    app.extensions["workbench"] = Services(config, for_callers=True)
    configure_celery(config)
    srw_api.install(app)
    app.register_blueprint(cluster_api.bp)
    app.register_blueprint(ml_api.bp)
    app.register_blueprint(openapi_api.bp)  # ungated: see workbench/api/openapi.py
    proxy_api.install(app)  # last: the catch-all
    app.wsgi_app = MeteredApp(app.wsgi_app)  # type: ignore[method-assign]
    _register_error_handlers(app, config)

    @app.after_request
    def echo_opaque_id(response: Response) -> Response:
        opaque = request.headers.get("X-Opaque-Id")
        if opaque and "X-Opaque-Id" not in response.headers:
            response.headers["X-Opaque-Id"] = opaque
        return response

    return app


def _register_error_handlers(app: Flask, config: Config) -> None:
    @app.errorhandler(WorkbenchError)
    def workbench_error(exc: WorkbenchError) -> Response:
        exc = unwritten(exc)
        response = json_response(exc.body(), exc.status)
        if isinstance(exc, MethodNotAllowedError):
            response.headers["Allow"] = ", ".join(exc.allowed)
        return response

    @app.errorhandler(TransportError)
    def cluster_error(exc: TransportError) -> Response:
        """An error the cluster answered while the workbench worked for the client: the
        cluster's own status and body; unreachable is a 503 naming the cluster, no answer within
        OPENSEARCH_TIMEOUT a 504 (``ConnectionTimeout`` subclasses ``ConnectionError``: first)."""
        error: WorkbenchError | None = None
        if isinstance(exc, InFlightLost):  # a node went away mid-request
            error = ClusterUnavailable(unreachable_reason(config.opensearch_url_safe))
        elif isinstance(exc, OpenSearchConnectionTimeout):
            error = ClusterTimeout(timeout_reason(config.opensearch_url_safe,
                                                  config.opensearch_timeout))
        elif isinstance(exc, OpenSearchConnectionError):
            error = ClusterUnavailable(unreachable_reason(config.opensearch_url_safe))
        if error is not None:
            error = unwritten(error)  # a create's, before its write: names the entity
            return json_response(error.body(), error.status)
        status = exc.status_code if isinstance(exc.status_code, int) else 500
        info = exc.info if isinstance(exc.info, dict) else envelope(
            status, str(exc.error), str(exc.info))
        return json_response(info, status)

    @app.errorhandler(redis.exceptions.ConnectionError)
    @app.errorhandler(redis.exceptions.TimeoutError)
    def redis_error(exc: redis.exceptions.RedisError) -> Response:
        """Redis (stats counters, schedule bookkeeping) down: a 503 naming it, not a 500."""
        log.error("Redis unavailable on %s %s: %s", request.method, request.path,
                  type(exc).__name__)
        unavailable = RedisUnavailable(
            f"Redis at {redact_url(config.redis_url)} (REDIS_URL) cannot be reached: "
            f"{type(exc).__name__}")
        return json_response(unavailable.body(), unavailable.status)

    @app.errorhandler(TextError)
    def text_error(exc: TextError) -> Response:
        return Response(exc.text, status=exc.status, content_type="text/plain; charset=UTF-8")

    @app.errorhandler(RequestEntityTooLarge)
    def too_large(_: RequestEntityTooLarge) -> Response:
        _discard_body(config.max_request_bytes)
        exc = PayloadTooLarge(
            f"Request body is larger than the limit of {config.max_request_bytes} bytes "
            "(WORKBENCH_MAX_REQUEST_BYTES)"
        )
        return json_response(exc.body(), exc.status)

    @app.errorhandler(HTTPException)
    def http_error(exc: HTTPException) -> Response:
        status = exc.code or 500
        return json_response(
            envelope(status, snake_case(type(exc).__name__) + "_exception", exc.description or ""),
            status,
        )

    @app.errorhandler(Exception)
    def unexpected(exc: Exception) -> Response:
        log.exception("unexpected error on %s %s", request.method, request.path)
        return json_response(
            envelope(500, snake_case(type(exc).__name__), str(exc) or type(exc).__name__), 500
        )


def _discard_body(limit: int) -> None:
    """Read and drop the rest of a rejected body (bounded), so that clients that send the
    whole body before reading the answer see the 413 instead of a reset connection."""
    stream = request.environ.get("wsgi.input")
    if stream is None:
        return
    remaining = max(limit, 64 * 1024 * 1024)
    try:
        while remaining > 0:
            chunk = stream.read(min(1024 * 1024, remaining))
            if not chunk:
                return
            remaining -= len(chunk)
    except Exception:  # noqa: BLE001 - the client went away; nothing left to protect
        return
