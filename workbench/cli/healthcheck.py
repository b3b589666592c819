"""``workbench healthcheck``: the container image's HEALTHCHECK (Dockerfile).

Healthy by what the container runs, found in ``/proc`` (the image's main process is a
``workbench`` command): ``serve`` when ``HEAD /_plugins/_search_relevance/_openapi`` answers on
its port (through the front and gunicorn, with no call to the cluster, so a cluster outage does
not make the API unhealthy); ``worker`` while its job consumer runs (a consumer that keeps dying
is restarted with a back-off and shows as unhealthy meanwhile); any other command while it runs.
Kept to the standard library: it starts every 30 s in each container.
"""

from __future__ import annotations

import os
import sys
import urllib.request
from pathlib import Path

OPENAPI = "/_plugins/_search_relevance/_openapi"


def _argv(pid: int) -> list[str]:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace").split("\0")
    except OSError:
        return []


def _port(argv: list[str]) -> str:
    port = os.environ.get("WORKBENCH_PORT", "9400")
    for i, arg in enumerate(argv):
        if arg == "--port" and i + 1 < len(argv):
            port = argv[i + 1]
        elif arg.startswith("--port="):
            port = arg.split("=", 1)[1]
    return port


def run() -> int:
    """0 when healthy, 1 when not (the exit codes a HEALTHCHECK reads)."""
    me = os.getpid()
    pids = sorted(int(p) for p in os.listdir("/proc") if p.isdigit() and int(p) != me)
    commands = [a for a in map(_argv, pids)
                if any(x.endswith("/workbench") for x in a[:2]) and "healthcheck" not in a]
    main = commands[0] if commands else []
    if "serve" in main:
        url = f"http://127.0.0.1:{_port(main)}{OPENAPI}"
        try:
            urllib.request.urlopen(urllib.request.Request(url, method="HEAD"), timeout=8)
        except OSError as exc:
            print(f"workbench healthcheck: {url}: {exc}", file=sys.stderr)
            return 1
        return 0
    if "worker" in main:
        if any("--no-supervise" in _argv(p) for p in pids):
            return 0
        print("workbench healthcheck: no job consumer is running", file=sys.stderr)
        return 1
    return 0 if main else 1
