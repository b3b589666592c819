"""HAProxy's configuration for the front, rendered from ``haproxy.cfg.j2`` beside this module.

The template holds the rules (routing, header hygiene, request-line repair, timeouts); this module
only computes the values a configuration needs and writes the error answers HAProxy sends as raw
HTTP responses (``errorfile``), which keeps every reason string out of HAProxy's quoting rules.
"""

from __future__ import annotations

import ipaddress
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from jinja2 import Environment, FileSystemLoader, StrictUndefined

from workbench.config import Config
from workbench.errors import envelope

TEMPLATE = "haproxy.cfg.j2"
# A request head must fit in one buffer (less tune.maxrewrite, 1 KB by default). The cluster
# itself refuses a request line over 4 KB and headers over 16 KB (OpenSearch's
# http.max_initial_line_length and http.max_header_size), so 32 KB passes every head the
# cluster accepts; HAProxy allocates two buffers per active connection.
BUFSIZE = 32 * 1024
MAXCONN = 4096


def threads(cpus: int | None = None) -> int:
    """HAProxy's threads: half the cores, at least one. The front shares its machine with
    gunicorn and, usually, the cluster; one HAProxy thread proxies tens of thousands of requests
    a second (about 25 us of CPU each, measured on a 2-core machine), and on 2 cores a second
    thread only contends with the cluster it forwards to: a 5-document `match` `_search` through
    one thread ran 5-8 % faster than through two (wrk, 16 connections, 2026-11-26)."""
    return max(1, (cpus if cpus is not None else os.cpu_count() or 1) // 2)
_REASONS = {413: "Payload Too Large", 503: "Service Unavailable", 504: "Gateway Timeout"}


def _is_ip(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True


def address(host: str, port: int) -> str:
    """``host:port`` as HAProxy reads it (an IPv6 address with its ``ipv6@`` prefix)."""
    return f"ipv6@{host}:{port}" if ":" in host else f"{host}:{port}"


def _netloc(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def _log_format_literal(text: str) -> str:
    """``text`` inside a log-format string (``set-path``'s argument): ``%`` is doubled."""
    return text.replace("%", "%%")


def error_response(status: int, error_type: str, reason: str) -> bytes:
    """A complete HTTP response carrying the workbench's error envelope (an ``errorfile``)."""
    body = json.dumps(envelope(status, error_type, reason), separators=(",", ":")).encode()
    head = (f"HTTP/1.1 {status} {_REASONS[status]}\r\n"
            "Content-Type: application/json; charset=UTF-8\r\n"
            f"Content-Length: {len(body)}\r\n"
            "Cache-Control: no-cache\r\n"
            "\r\n")
    return head.encode() + body


def error_files(config: Config) -> dict[str, bytes]:
    """The errorfiles the template names, by file name: the same envelopes the Python
    pass-through answers (workbench/api/proxy.py) for the same faults."""
    base = config.opensearch_url_safe
    return {
        "too_large.http": error_response(
            413, "content_too_long_exception",
            f"Request body is larger than the limit of {config.max_request_bytes} bytes "
            "(WORKBENCH_MAX_REQUEST_BYTES)"),
        # HAProxy does not tell a refused connection from a reset one, so neither does this.
        "unreachable.http": error_response(
            503, "cluster_unavailable_exception",
            f"OpenSearch cluster at {base} is unreachable: connection failed"),
        "timed_out.http": error_response(
            504, "timeout_exception",
            f"OpenSearch cluster at {base} did not answer within {config.opensearch_timeout:g}s"),
        "api_down.http": error_response(
            503, "workbench_unavailable_exception", "the workbench API is not answering"),
    }


def _server(url: str, config: Config) -> dict[str, Any]:
    """One node as a ``server`` line: its address and TLS."""
    node = urlsplit(url)
    https = node.scheme == "https"
    host = node.hostname or "127.0.0.1"
    port = node.port or (443 if https else 80)
    tls = None
    if https:
        # No SNI for an address (RFC 6066); verifyhost then names what the certificate must.
        tls = {"host": host, "sni": None if _is_ip(host) else host,
               "verify": config.opensearch_verify_certs,
               "ca_file": config.opensearch_ca_certs or "@system-ca"}
    return {"address": address(host, port), "netloc": _netloc(host, port), "tls": tls}


@dataclass(frozen=True)
class LiveSockets:
    """The live A/B search server's Unix sockets (``workbench.livesearch``): where the front
    sends it the interleaved searches, and where it sends the cluster its ``_msearch``."""

    search: Path
    cluster: Path


def context(config: Config, api_port: int, prefixes: tuple[str, ...],
            errors: Path, live: LiveSockets | None = None) -> dict[str, Any]:
    """The template's values for one front; ``live``: the live A/B search's sockets."""
    servers = [_server(url, config) for url in config.opensearch_nodes]
    return {
        "bind": address(config.host, config.port),
        "maxconn": MAXCONN,
        "threads": threads(),
        "bufsize": BUFSIZE,
        "netloc": servers[0]["netloc"],  # the Host header, as the Python proxy sends it
        "servers": servers,
        "path_prefix": _log_format_literal(
            urlsplit(config.opensearch_nodes[0]).path.rstrip("/")),
        "prefixes": prefixes,
        # The client's Authorization header always reaches the cluster as sent. Where
        # anonymous callers may borrow the workbench's credentials, requests without one go to
        # the app; an empty header is sent on as it came, by either path.
        "lend": bool(config.anonymous_as_service and config.opensearch_authorization),
        "max_body": config.max_request_bytes,
        "cluster_timeout_ms": max(1, round(config.opensearch_timeout * 1000)),
        # above every deadline of the app, so the app's own 504 always comes first
        "api_timeout": int(max(config.opensearch_timeout, config.sync_deadline)) + 30,
        "api_port": api_port,
        "errors": errors,
        "live": live,
    }


def render(config: Config, api_port: int, prefixes: tuple[str, ...], errors: Path,
           live: LiveSockets | None = None) -> str:
    """The configuration text for one front; its errorfiles are expected in ``errors``."""
    env = Environment(loader=FileSystemLoader(Path(__file__).parent), undefined=StrictUndefined,
                      lstrip_blocks=True, keep_trailing_newline=True,
                      autoescape=False)  # a configuration file, not HTML
    return env.get_template(TEMPLATE).render(context(config, api_port, prefixes, errors, live))


def write(config: Config, api_port: int, prefixes: tuple[str, ...], run_dir: Path,
          live: LiveSockets | None = None) -> Path:
    """Writes the configuration and its errorfiles into ``run_dir``; returns the config's path."""
    errors = run_dir / "errors"
    errors.mkdir(exist_ok=True)
    for name, data in error_files(config).items():
        (errors / name).write_bytes(data)
    conf = run_dir / "haproxy.cfg"
    conf.write_text(render(config, api_port, prefixes, errors, live))
    conf.chmod(0o600)
    return conf
