"""``python -m workbench.livesearch SOCKET CLUSTER_SOCKET API_PORT``: the live search server, as
``workbench.serving.front`` starts it (settings from the environment, as every command)."""

from __future__ import annotations

import argparse
import sys

from workbench.config import Config
from workbench.telemetry import exporter
from workbench.telemetry.logs import setup_logging


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m workbench.livesearch")
    parser.add_argument("socket", help="the Unix socket to answer on (the front connects)")
    parser.add_argument("cluster_socket", help="the front's Unix socket to the cluster")
    parser.add_argument("api_port", type=int, help="gunicorn's loopback port")
    args = parser.parse_args(argv)
    config = Config.from_env()
    setup_logging(config.log_level, config.log_format)
    exporter.enable(config, "live")
    import uvloop  # after the exporter: metrics go where the front's listener reads them

    from workbench.livesearch.server import serve

    uvloop.run(serve(config, args.socket, args.cluster_socket, args.api_port))
    return 0


if __name__ == "__main__":
    sys.exit(main())
