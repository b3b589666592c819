"""The nginx front: nginx listens on the workbench's port and sends plain pass-through requests
straight to the cluster; SRW routes, intercepted paths and every request the fast path cannot take
go to gunicorn, which listens on an internal loopback port.

Why: a proxied ``_search`` costs about 1 ms of Python CPU in gunicorn, which on a small machine
shared with the cluster caps pass-through at about a third of direct throughput
(``scripts/bench/passthrough.py``). nginx forwards the same request for a few microseconds. The
split is derived from the app itself (``FastPassThrough.prefixes``), so a route added to the app is
routed to gunicorn without touching this file.

Parity with the Python pass-through: the raw target is forwarded byte for byte, the configured
credentials are added when the client sends none, hop-by-hop headers are dropped, bodies stream in
both directions, and the workbench's own error envelopes are answered for an oversized body (413),
an unreachable cluster (503) and a timeout (504). One difference: custom header names listed in a
``Connection`` header are not dropped by nginx (the fixed hop-by-hop set is).
"""

from __future__ import annotations

import ipaddress
import json
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
from workbench.errors import envelope
from workbench.serving import door

log = logging.getLogger(__name__)

_SBIN = ("/usr/sbin/nginx", "/usr/local/sbin/nginx", "/usr/local/nginx/sbin/nginx")
# Methods the Python fast path forwards; anything else goes to gunicorn (workbench.api.proxy).
_FAST_METHODS = "GET|HEAD|POST|PUT|DELETE|PATCH|OPTIONS"
SOCKET = "front.sock"  # nginx's Unix socket, in the front's run directory


def find_nginx() -> str | None:
    """The nginx binary (Debian installs it in /usr/sbin, often not on a user's PATH)."""
    found = shutil.which("nginx")
    return found or next((p for p in _SBIN if os.access(p, os.X_OK)), None)


def verifies_ip_certificate(config: Config) -> bool:
    """Whether the cluster is reached over verified TLS at an IP address: nginx checks an
    upstream certificate against host names only, never IP addresses, so it would refuse every
    such cluster ("upstream SSL certificate does not match")."""
    cluster = urlsplit(config.opensearch_base_url)
    if cluster.scheme != "https" or not config.opensearch_verify_certs:
        return False
    try:
        ipaddress.ip_address(cluster.hostname or "")
    except ValueError:
        return False
    return True


def chosen_nginx(config: Config) -> str | None:
    """The nginx to run in front, or None for gunicorn alone (``WORKBENCH_FRONT``). ``auto``
    falls back to gunicorn alone where nginx could not verify the cluster's certificate."""
    if config.front == "none":
        return None
    if verifies_ip_certificate(config):
        if config.front == "nginx":
            raise ConfigError("WORKBENCH_FRONT=nginx cannot verify the TLS certificate of a "
                              "cluster addressed by IP; use its host name in OPENSEARCH_URL")
        log.warning("serving with gunicorn alone: nginx cannot verify the TLS certificate of "
                    "a cluster addressed by IP (use its host name in OPENSEARCH_URL)")
        return None
    found = find_nginx()
    if found is None and config.front == "nginx":
        raise ConfigError("WORKBENCH_FRONT=nginx but no nginx binary was found "
                          "(on Debian: apt-get install nginx-light)")
    return found


def workbench_prefixes(config: Config) -> tuple[str, ...]:
    """Path prefixes gunicorn must answer, from the app's own routes."""
    from workbench.api.proxy import FastPassThrough
    from workbench.app import create_app

    wsgi = create_app(config).wsgi_app
    if not isinstance(wsgi, FastPassThrough):
        return ("/",)
    return tuple(p or "/" for p in wsgi.prefixes())


def _quote(text: str) -> str:
    """An nginx string literal. ``$`` starts a variable in nginx strings and has no escape, so it
    is written as the ``$dollar`` variable the config defines."""
    escaped = text.replace("\\", "\\\\").replace("'", "\\'").replace("$", "${dollar}")
    return f"'{escaped}'"


def _host_port(host: str, port: int) -> str:
    """``host:port`` as nginx reads it (an IPv6 address in brackets)."""
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def _error_json(status: int, error_type: str, reason: str) -> str:
    return _quote(json.dumps(envelope(status, error_type, reason), separators=(",", ":")))


def nginx_conf(config: Config, api_port: int, prefixes: tuple[str, ...], run_dir: Path) -> str:
    """The nginx configuration for one front (rendered, never edited by hand)."""
    cluster = urlsplit(config.opensearch_base_url)
    https = cluster.scheme == "https"
    host = cluster.hostname or "127.0.0.1"
    port = cluster.port or (443 if https else 80)
    netloc = _host_port(host, port)
    path_prefix = cluster.path.rstrip("/")
    # The cluster gets OPENSEARCH_TIMEOUT between two reads or writes, as in the Python proxy;
    # gunicorn gets 30 s more, so that it answers its own 504 for an SRW route first.
    cluster_timeout = f"{max(1, round(config.opensearch_timeout * 1000))}ms"
    timeout = int(config.opensearch_timeout) + 30
    limit = config.max_request_bytes
    base = config.opensearch_base_url
    # The client's Authorization header always reaches the cluster as sent. Where anonymous
    # callers may borrow the workbench's credentials, requests without one go to the app: nginx
    # cannot tell an absent header from an empty one, and an empty one is never "none".
    fast_key, fast_match = "$request_method:$http_transfer_encoding", f"~^({_FAST_METHODS}):$"
    if config.anonymous_as_service and config.opensearch_authorization:
        fast_key += ":$http_authorization"
        fast_match = f"~^({_FAST_METHODS})::."
    scheme = "https" if https else "http"
    # With the door (workbench/serving/door.py) on the public port, nginx listens on a Unix socket
    # and learns each client's address from the PROXY protocol line the door sends first.
    listen = f"unix:{run_dir / SOCKET} proxy_protocol" if config.door else \
        f"{_host_port(config.host, config.port)} reuseport"
    client = "$proxy_protocol_addr" if config.door else "$remote_addr"

    lines = [
        "# Written by workbench serve (workbench/serving/front.py); regenerated at every start.",
        "worker_processes auto;",
        f"pid {run_dir}/nginx.pid;",
        "error_log stderr warn;",
        "events { worker_connections 4096; }",
        "http {",
        "  geo $dollar { default '$'; }",
        f"  log_format workbench '{client} - $remote_user [$time_local] \"$request\" '",
        "                       '$status $body_bytes_sent \"$http_referer\" \"$http_user_agent\"';",
        f"  client_body_temp_path {run_dir}/client-body;",
        f"  proxy_temp_path {run_dir}/proxy;",
        f"  fastcgi_temp_path {run_dir}/fastcgi;",
        f"  uwsgi_temp_path {run_dir}/uwsgi;",
        f"  scgi_temp_path {run_dir}/scgi;",
        "  server_tokens off;",
        # Headers pass as the client wrote them (OpenSearch clients use names like these).
        "  underscores_in_headers on;",
        "  ignore_invalid_headers off;",
        # Scroll ids and long index lists travel in the URL (gunicorn here has no line limit).
        "  large_client_header_buffers 8 1m;",
        "  keepalive_timeout 75s;",
        "  keepalive_requests 1000000;",
        f"  upstream workbench_cluster {{ server {netloc}; keepalive 64; keepalive_timeout 50s; }}",
        f"  upstream workbench_api {{ server 127.0.0.1:{api_port}; keepalive 64; }}",
        # Plain requests (a fast-path method, no chunked body) go to the cluster; others to the
        # app, which handles them exactly as without a front.
        f"  map \"{fast_key}\" $workbench_target {{",
        "    default http://workbench_api;",
        f"    \"{fast_match}\" {scheme}://workbench_cluster{path_prefix};",
        "  }",
        "  map $workbench_target $workbench_direct {",
        "    http://workbench_api 0;",
        "    default 1;",
        "  }",
    ]
    proxy_common = [
        "    proxy_http_version 1.1;",
        "    proxy_set_header Connection '';",
        f"    proxy_set_header Host {_quote(netloc)};",  # as the Python proxy sends it
        "    proxy_set_header Proxy-Authorization '';",
        "    proxy_set_header Proxy-Connection '';",
        "    proxy_set_header Trailer '';",
        "    proxy_request_buffering off;",
        "    proxy_buffering off;",
        "    proxy_redirect off;",
        "    proxy_hide_header Proxy-Authenticate;",
        "    proxy_hide_header Trailer;",
        "    proxy_connect_timeout 10s;",
        f"    proxy_send_timeout {cluster_timeout};",
        f"    proxy_read_timeout {cluster_timeout};",
        f"    client_body_timeout {timeout}s;",
        f"    send_timeout {timeout}s;",
    ]
    if https:
        proxy_common += [
            "    proxy_ssl_server_name on;",
            f"    proxy_ssl_name {host};",
            f"    proxy_ssl_verify {'on' if config.opensearch_verify_certs else 'off'};",
        ]
        if config.opensearch_ca_certs:
            proxy_common.append(f"    proxy_ssl_trusted_certificate {config.opensearch_ca_certs};")
    too_large = _error_json(
        413, "content_too_long_exception",
        f"Request body is larger than the limit of {limit} bytes (WORKBENCH_MAX_REQUEST_BYTES)")
    unreachable = _error_json(
        503, "cluster_unavailable_exception",
        f"OpenSearch cluster at {base} is unreachable: connection failed")
    timed_out = _error_json(
        504, "timeout_exception",
        f"OpenSearch cluster at {base} did not answer within {config.opensearch_timeout:g}s")
    api_down = _error_json(503, "workbench_unavailable_exception",
                           "the workbench API is not answering")
    lines += [
        "  server {",
        f"    listen {listen};",
        *proxy_common,
        "    location / {",
        f"      client_max_body_size {limit};",
        "      access_log /dev/stdout workbench buffer=32k flush=1s if=$workbench_direct;",
        "      error_page 413 = @too_large;",
        "      error_page 502 = @unreachable;",
        "      error_page 504 = @timed_out;",
        "      proxy_pass $workbench_target$request_uri;",
        "    }",
    ]
    for prefix in prefixes:
        lines += [
            f"    location ^~ {prefix} {{",
            "      client_max_body_size 0;",  # the app applies the limit itself
            "      access_log off;",  # gunicorn logs these
            "      error_page 502 504 = @api_down;",
            f"      proxy_send_timeout {timeout}s;",
            f"      proxy_read_timeout {timeout}s;",
            "      proxy_pass http://workbench_api;",
            "    }",
        ]
    for name, status, body in (("too_large", 413, too_large), ("unreachable", 503, unreachable),
                                ("timed_out", 504, timed_out), ("api_down", 503, api_down)):
        lines += [
            f"    location @{name} {{",
            "      default_type 'application/json; charset=UTF-8';",
            f"      return {status} {body};",
            "    }",
        ]
    lines += ["  }", "}", ""]
    return "\n".join(lines)


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


def _listening(port: int) -> bool:
    with socket.socket() as sock:
        return sock.connect_ex(("127.0.0.1", port)) == 0


def run(config: Config, nginx: str) -> int:
    """Run gunicorn on an internal port, nginx on a Unix socket and the door processes on the
    public port until any of them stops or a TERM/INT arrives; then stop them all. Returns the
    exit status."""
    # A taken port fails here, first.
    public = door.listening_socket(config.host, config.port) if config.door else None
    api_port = _free_port()
    run_dir = Path(tempfile.mkdtemp(prefix="workbench-front-"))
    run_dir.chmod(0o711)  # nginx workers (nobody, when started as root) create temp dirs here
    env = dict(os.environ, WORKBENCH_FRONT="none", WORKBENCH_HOST="127.0.0.1",
               WORKBENCH_PORT=str(api_port))
    children: dict[subprocess.Popen[bytes], str] = {}
    stopping = False

    def stop(signum: int, _: FrameType | None) -> None:
        nonlocal stopping
        stopping = True

    previous = {s: signal.signal(s, stop) for s in (signal.SIGTERM, signal.SIGINT)}
    try:
        api = subprocess.Popen([sys.executable, "-m", "workbench.cli", "serve"], env=env)
        children[api] = "the API server"
        _wait_for(api, "the API server", lambda: _listening(api_port))
        conf = run_dir / "nginx.conf"
        conf.write_text(nginx_conf(config, api_port, workbench_prefixes(config), run_dir))
        conf.chmod(0o600)  # it may hold the cluster's credentials
        front = subprocess.Popen([nginx, "-e", "stderr", "-p", str(run_dir), "-c", str(conf),
                                  "-g", "daemon off;"])
        children[front] = "nginx"
        if public is not None:
            sock_path = run_dir / SOCKET
            _wait_for(front, "nginx", sock_path.exists)
            for _ in range(os.cpu_count() or 1):
                child = subprocess.Popen(
                    [sys.executable, "-m", "workbench.serving.door", "--fd", str(public.fileno()),
                     "--upstream", str(sock_path)], pass_fds=[public.fileno()])
                children[child] = "a door process"
            public.close()
        log.info("front on %s:%s (%s); workbench API on 127.0.0.1:%s", config.host, config.port,
                 "door, nginx" if public is not None else "nginx", api_port)
        while not stopping:
            for child, name in children.items():
                if child.poll() is not None:
                    log.error("%s exited with status %s; stopping", name, child.returncode)
                    return child.returncode or 1
            time.sleep(0.2)
        return 0
    finally:
        if public is not None:
            public.close()
        for child in children:  # nginx stops gracefully on QUIT, the others on TERM
            if child.poll() is None:
                child.send_signal(signal.SIGQUIT if child is front else signal.SIGTERM)
        for child in children:
            try:
                child.wait(40)
            except subprocess.TimeoutExpired:
                child.kill()
                child.wait()
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        shutil.rmtree(run_dir, ignore_errors=True)
