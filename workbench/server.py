"""Run the API under gunicorn (threaded workers), configured from ``Config``."""

from __future__ import annotations

from typing import Any

from gunicorn.app.base import BaseApplication

from workbench.config import Config


class WorkbenchServer(BaseApplication):
    """Gunicorn application whose workers each build their own app (no state crosses a fork)."""

    def __init__(self, config: Config) -> None:
        self.workbench_config = config
        super().__init__()

    def load_config(self) -> None:
        config = self.workbench_config
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

        return create_app(self.workbench_config)


def run_server(config: Config) -> None:
    WorkbenchServer(config).run()
