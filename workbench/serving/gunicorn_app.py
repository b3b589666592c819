"""Run the API under gunicorn (threaded workers), configured from ``Config``."""

from __future__ import annotations

import time
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
    proxied request (py-spy, ``scripts/bench/passthrough.py``). With the default format only its
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
