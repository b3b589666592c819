"""Run the API under gunicorn (threaded workers), configured from ``Config``."""

from __future__ import annotations

import ctypes
import gc
import time
from collections.abc import Callable
from typing import Any

from gunicorn.app.base import BaseApplication
from gunicorn.config import AccessLogFormat
from gunicorn.glogging import Logger
from gunicorn.http.message import Request
from gunicorn.http.parser import RequestParser

from workbench.config import Config
from workbench.serving.request_target import fix_request_line
from workbench.telemetry.logs import formatter


class AccessLogger(Logger):
    """Gunicorn's logger, writing the same access lines for less CPU.

    For every line gunicorn builds all atoms a format could use (each request and response
    header, the whole WSGI environ) and formats the time anew: about a tenth of the CPU of a
    proxied request (py-spy, ``workbench/bench/passthrough.py``). With the default format only its
    nine atoms are built and the time string is reused within a second.
    """

    _FORMAT = AccessLogFormat.default
    _stamp: tuple[int, str] = (-1, "")
    #: WORKBENCH_LOG_FORMAT, set before gunicorn builds its logger
    log_format = "text"

    def setup(self, cfg: Any) -> None:
        """Gunicorn's handlers; with the JSON format, its lines are JSON objects too, so a log
        shipper reads one format from the whole process."""
        super().setup(cfg)
        if self.log_format == "json":
            for handler in [*self.error_log.handlers, *self.access_log.handlers]:
                handler.setFormatter(formatter("json"))

    def atoms(self, resp: Any, req: Any, environ: dict[str, Any], request_time: Any
              ) -> dict[str, Any]:
        if self.cfg.access_log_format != self._FORMAT:
            return super().atoms(resp, req, environ, request_time)
        status = resp.status
        if isinstance(status, str):
            status = status.split(None, 1)[0]
        sent = getattr(resp, "sent", None)
        return {
            "h": environ.get("REMOTE_ADDR", "-"),
            "l": "-",
            "u": self._get_user(environ) or "-",
            "t": self.now(),
            "r": f"{environ['REQUEST_METHOD']} {environ['RAW_URI']} {environ['SERVER_PROTOCOL']}",
            "s": status,
            "b": "-" if sent is None else str(sent),
            "f": environ.get("HTTP_REFERER", "-"),
            "a": environ.get("HTTP_USER_AGENT", "-"),
        }

    def now(self) -> str:
        second = int(time.time())
        stamp = self._stamp
        if stamp[0] != second:
            stamp = (second, time.strftime("[%d/%b/%Y:%H:%M:%S %z]", time.localtime(second)))
            self._stamp = stamp
        return stamp[1]


class LenientRequest(Request):
    """Gunicorn's request, reading a target without its leading slash as OpenSearch does
    (``workbench.serving.request_target``) instead of refusing the request line."""

    def parse_request_line(self, line_bytes: bytes) -> None:
        super().parse_request_line(fix_request_line(line_bytes))


#: A body read whole that is larger than this, in a worker that is not retiring, is followed by
#: a full collection and ``malloc_trim`` (``Recycler``).
TRIM_BYTES = 1024 * 1024


def _malloc_trim() -> Callable[[int], int] | None:
    """glibc's ``malloc_trim``, or None where the C library has none (musl, macOS)."""
    try:
        trim: Callable[[int], int] = ctypes.CDLL(None).malloc_trim
    except (OSError, AttributeError):
        return None
    return trim


class Recycler:
    """Gunicorn's ``post_request`` hook: the memory of a large request goes back to the system.

    Parsing a body makes Python objects several times its size: a 19 MB ``IMPORT_JUDGMENT`` of
    500,000 ratings is 100 MB of dicts and strings, and the worker's resident memory peaks about
    200 MB above where it was. Freed, most of it stays in the process: CPython returns an arena
    only once every object in it is gone, and glibc's malloc keeps freed pages of its heaps for
    later. A worker would hold the memory of its largest request for as long as it lives (issue
    30: one worker still held 431 MB after a run). So after a request whose body the workbench
    read whole (``BODY_BYTES``, set by ``json_body``; a streamed pass-through body is not):

    - larger than ``WORKBENCH_WEB_RECYCLE_BYTES``, the worker retires: ``worker.alive = False``.
      The threaded worker stops accepting, answers the requests it has in flight (a request that
      arrives meanwhile on one of its kept-alive connections is answered with ``Connection:
      close``), exits, and the arbiter starts a fresh worker. Its grace is raised to the request
      timeout so that no request in flight is cut short. Only a new process gives back all of
      it, fragmentation included.
    - larger than ``TRIM_BYTES``, in a worker that stays (recycling off, or a body between the
      two): a full garbage collection, for what cycles still hold, then ``malloc_trim(0)``,
      which returns the free pages of every malloc arena (one per thread that allocated) to the
      system. Measured after a 500,000-rating import (workbench/bench/memory.py), a worker that
      stays kept 4-43 MiB of it with this and 26-66 MiB without (docs/performance.md); a
      replaced worker keeps nothing.

    ``WORKBENCH_WEB_MAX_REQUESTS`` (gunicorn's ``max_requests``, with jitter) replaces a worker
    after that many requests whatever their size: the backstop for slow growth.
    """

    def __init__(self, recycle_bytes: int) -> None:
        self.recycle_bytes = recycle_bytes
        self.trim = _malloc_trim()

    def __call__(self, worker: Any, req: Any, environ: dict[str, Any], resp: Any) -> None:
        from workbench.api import BODY_BYTES  # imported by the worker's app already

        size = environ.get(BODY_BYTES) or 0
        if self.recycle_bytes and size > self.recycle_bytes:
            if worker.alive:
                worker.log.info(
                    "worker %s retires: it read a %d-byte request body (more than "
                    "WORKBENCH_WEB_RECYCLE_BYTES, %d); a fresh worker replaces it once its "
                    "requests in flight are answered", worker.pid, size, self.recycle_bytes)
                worker.cfg.set("graceful_timeout",
                               max(worker.cfg.graceful_timeout, worker.cfg.timeout))
                worker.alive = False
            return
        if size > TRIM_BYTES and worker.alive:
            gc.collect()
            if self.trim is not None:
                self.trim(0)


class WorkbenchServer(BaseApplication):
    """Gunicorn application whose workers each build their own app (no state crosses a fork)."""

    def __init__(self, config: Config) -> None:
        self.workbench_config = config
        super().__init__()

    def load_config(self) -> None:
        config = self.workbench_config
        AccessLogger.log_format = config.log_format
        options: dict[str, Any] = {
            "bind": f"{config.host}:{config.port}",
            "workers": config.web_workers,
            "worker_class": "gthread",
            "threads": config.web_threads,
            # A proxied request may legitimately run as long as the cluster allows.
            "timeout": int(config.opensearch_timeout) + 30,
            "graceful_timeout": 30,
            "keepalive": 75,
            # Scroll ids and long index lists travel in the URL; headers carry large tokens.
            "limit_request_line": 0,
            "limit_request_field_size": 0,
            "accesslog": "-",
            "logger_class": AccessLogger,
            "errorlog": "-",
            "loglevel": config.log_level.lower(),
            "proc_name": "workbench-api",
            # Memory that comes back (Recycler): a worker is replaced after a large body, and
            # after max_requests (with jitter) whatever their size.
            "max_requests": config.web_max_requests,
            "max_requests_jitter": config.web_max_requests_jitter,
            "post_request": Recycler(config.web_recycle_bytes),
        }
        if "control_socket_disable" in self.cfg.settings:
            # Several servers may run on one host (tests, benchmarks): no shared control socket.
            options["control_socket_disable"] = True
        for key, value in options.items():
            self.cfg.set(key, value)

    def load(self) -> Any:
        from workbench.app import create_app

        RequestParser.mesg_class = LenientRequest  # every worker's parser makes these

        return create_app(self.workbench_config)


def run_server(config: Config) -> None:
    WorkbenchServer(config).run()
