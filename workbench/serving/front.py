"""The HAProxy front: HAProxy listens on the workbench's port and sends plain pass-through
requests straight to the cluster; SRW routes, intercepted paths and every request the fast path
cannot take go to gunicorn, which listens on an internal loopback port.

Why: a proxied ``_search`` costs about 1 ms of Python CPU in gunicorn, which on a small machine
shared with the cluster caps pass-through at about a third of direct throughput
(``workbench/bench/passthrough.py``). HAProxy forwards the same request for a few microseconds. The
split is derived from the app itself (``FastPassThrough.prefixes``), so a route added to the app is
routed to gunicorn without touching the configuration, which is rendered from the template
``haproxy.cfg.j2`` (``workbench.serving.haproxy``).

Parity with the Python pass-through: request lines without a leading slash are read as OpenSearch
reads them (``workbench.serving.request_target`` states the rule), the raw target is forwarded byte
for byte, the configured credentials are lent only through the app, hop-by-hop headers are
dropped, bodies stream in both directions, and the workbench's own error envelopes are answered
for an oversized body (413), an unreachable cluster (503) and a timeout (504). One difference:
custom header names listed in a ``Connection`` header are not dropped by HAProxy (the fixed
hop-by-hop set is).
"""

from __future__ import annotations

import ipaddress
import logging
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from types import FrameType
from urllib.parse import urlsplit

from workbench.config import Config, ConfigError
from workbench.serving import haproxy
from workbench.telemetry import exporter

log = logging.getLogger(__name__)

_SBIN = ("/usr/sbin/haproxy", "/usr/local/sbin/haproxy")


def find_haproxy() -> str | None:
    """The haproxy binary (Debian installs it in /usr/sbin, often not on a user's PATH)."""
    found = shutil.which("haproxy")
    return found or next((p for p in _SBIN if os.access(p, os.X_OK)), None)


def verifies_ip_certificate(config: Config) -> bool:
    """Whether a node is reached over verified TLS at an IP address: HAProxy 2.6 checks a
    server certificate's names (SNI or ``verifyhost``) against its DNS names and common name only,
    never its IP addresses, so it would refuse every such node."""
    if config.opensearch_scheme != "https" or not config.opensearch_verify_certs:
        return False
    for node in config.opensearch_nodes:
        try:
            ipaddress.ip_address(urlsplit(node).hostname or "")
        except ValueError:
            continue
        return True
    return False


def chosen_front(config: Config) -> str | None:
    """The haproxy binary to run in front, or None for gunicorn alone (``WORKBENCH_FRONT``).
    ``auto`` falls back to gunicorn alone where HAProxy is missing or could not verify the
    cluster's certificate; ``haproxy`` (or its old name ``nginx``) refuses to start then."""
    if config.front == "none":
        return None
    required = config.front != "auto"
    if config.front == "nginx":
        log.warning("WORKBENCH_FRONT=nginx is deprecated: the front is HAProxy now "
                    "(WORKBENCH_FRONT=haproxy)")
    if verifies_ip_certificate(config):
        if required:
            raise ConfigError(f"WORKBENCH_FRONT={config.front}: HAProxy cannot verify the TLS "
                              "certificate of a cluster addressed by IP; use its host name in "
                              "OPENSEARCH_URL")
        log.warning("serving with gunicorn alone: HAProxy cannot verify the TLS certificate of "
                    "a cluster addressed by IP (use its host name in OPENSEARCH_URL)")
        return None
    found = find_haproxy()
    if found is None and required:
        raise ConfigError(f"WORKBENCH_FRONT={config.front} but no haproxy binary was found "
                          "(on Debian: apt-get install haproxy)")
    return found


def workbench_prefixes(config: Config) -> tuple[str, ...]:
    """Path prefixes gunicorn must answer, from the app's own routes."""
    from workbench.api.proxy import FastPassThrough
    from workbench.app import create_app

    wsgi = create_app(config).wsgi_app
    wsgi = getattr(wsgi, "inner", wsgi)  # under the request counter (api.http_metrics)
    if not isinstance(wsgi, FastPassThrough):
        return ("/",)
    return tuple(p or "/" for p in wsgi.prefixes())


def _port_is_free(host: str, port: int) -> None:
    """Raises OSError when the public port is taken, before anything is started."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _wait_for(proc: subprocess.Popen[bytes], name: str, ready: Callable[[], bool],
              timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{name} exited with status {proc.returncode}")
        if ready():
            return
        time.sleep(0.1)
    raise RuntimeError(f"{name} was not ready in {timeout:g}s")


def listening(port: int) -> bool:
    """Whether something accepts connections on ``port`` of the loopback address."""
    with socket.socket() as sock:
        return sock.connect_ex(("127.0.0.1", port)) == 0


def run(config: Config, binary: str) -> int:
    """Run gunicorn on an internal port, the live A/B search server (``workbench.livesearch``)
    on a Unix socket and HAProxy on the public port until one stops or a TERM/INT arrives; then
    stop them all. Returns the exit status."""
    _port_is_free(config.host, config.port)  # a taken port fails here, first
    api_port = _free_port()
    run_dir = Path(tempfile.mkdtemp(prefix="workbench-front-"))
    env = dict(os.environ, WORKBENCH_FRONT="none", WORKBENCH_HOST="127.0.0.1",
               WORKBENCH_PORT=str(api_port))
    if config.metrics_port is not None:
        # This process listens (telemetry.exporter); gunicorn writes its samples where it reads.
        del env["WORKBENCH_METRICS_PORT"]
        env["WORKBENCH_METRICS_DIR"] = str(exporter.base_dir(config))
    children: dict[subprocess.Popen[bytes], str] = {}
    front: subprocess.Popen[bytes] | None = None
    stopping = False

    def stop(signum: int, _: FrameType | None) -> None:
        nonlocal stopping
        stopping = True

    previous = {s: signal.signal(s, stop) for s in (signal.SIGTERM, signal.SIGINT)}
    try:
        api = subprocess.Popen([sys.executable, "-m", "workbench.cli", "serve"], env=env)
        children[api] = "the API server"
        _wait_for(api, "the API server", lambda: listening(api_port))
        sockets = haproxy.LiveSockets(run_dir / "live.sock", run_dir / "cluster.sock")
        live = subprocess.Popen([sys.executable, "-m", "workbench.livesearch",
                                 str(sockets.search), str(sockets.cluster), str(api_port)],
                                env=env)
        children[live] = "the live A/B search server"
        _wait_for(live, "the live A/B search server", sockets.search.exists)
        conf = haproxy.write(config, api_port, workbench_prefixes(config), run_dir, sockets)
        front = subprocess.Popen([binary, "-db", "-f", str(conf)])
        children[front] = "haproxy"
        log.info("front on %s:%s (haproxy); workbench API on 127.0.0.1:%s", config.host,
                 config.port, api_port)
        while not stopping:
            for child, name in children.items():
                if child.poll() is not None:
                    log.error("%s exited with status %s; stopping", name, child.returncode)
                    return child.returncode or 1
            time.sleep(0.2)
        return 0
    finally:
        for child in children:  # HAProxy stops gracefully on USR1, gunicorn on TERM
            if child.poll() is None:
                child.send_signal(signal.SIGUSR1 if child is front else signal.SIGTERM)
        for child in children:
            try:
                child.wait(40)
            except subprocess.TimeoutExpired:
                child.kill()
                child.wait()
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        shutil.rmtree(run_dir, ignore_errors=True)
