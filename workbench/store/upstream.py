"""Raw HTTP access to the cluster for the pass-through proxy: bytes in, bytes out, streamed.

opensearch-py parses and re-serialises bodies, which the pass-through must never do, so the proxy
uses one urllib3 connection pool per process instead.
"""

from __future__ import annotations

import ssl
import time
from collections.abc import Iterable, Iterator
from typing import IO
from urllib.parse import urlsplit

import urllib3
from urllib3.exceptions import (
    ConnectTimeoutError,
    MaxRetryError,
    ProtocolError,
    ReadTimeoutError,
)

from workbench.config import Config
from workbench.errors import ClusterTimeout, ClusterUnavailable
from workbench.store.nodes import Nodes, connection_reason, only_reads
from workbench.telemetry import instruments

CHUNK = 64 * 1024

# RFC 9110 section 7.6.1 hop-by-hop headers, plus those the proxy itself sets or must not forward.
HOP_BY_HOP = frozenset(
    {
        "connection",
        "keep-alive",
        "proxy-authenticate",
        "proxy-authorization",
        "proxy-connection",
        "te",
        "trailer",
        "trailers",
        "transfer-encoding",
        "upgrade",
    }
)
NOT_FORWARDED_REQUEST = HOP_BY_HOP | {"host", "content-length", "expect"}


def hop_by_hop(headers: Iterable[tuple[str, str]]) -> set[str]:
    """Names to drop: the fixed set plus any listed in ``Connection``."""
    names = set(HOP_BY_HOP)
    for name, value in headers:
        if name.lower() == "connection":
            names.update(token.strip().lower() for token in value.split(",") if token.strip())
    return names


def tls_options(config: Config) -> dict[str, object]:
    """urllib3 pool options for the cluster's TLS (none for plain HTTP)."""
    if config.opensearch_scheme != "https":
        return {}
    if not config.opensearch_verify_certs:
        return {"cert_reqs": ssl.CERT_NONE, "assert_hostname": False}
    options: dict[str, object] = {"cert_reqs": ssl.CERT_REQUIRED}
    if config.opensearch_ca_certs:
        options["ca_certs"] = config.opensearch_ca_certs
    return options


class Upstream:
    """Keep-alive connection pools to the cluster's nodes, shared by the threads of one process.

    A request goes to the next node in turn (``store.nodes``); when a node refuses the
    connection (nothing was sent) the request goes to the next one, and the node is left out for
    a while. A read (``store.nodes.only_reads``) whose node closed or reset the connection
    without answering (a node dying) goes to the next one too; any other failure after the
    request may have reached a node is answered, never resent."""

    def __init__(self, config: Config, maxsize: int = 32) -> None:
        self.config = config
        self.base_url = config.opensearch_url_safe
        self.nodes = Nodes(config.opensearch_nodes)
        self.path_prefix = urlsplit(config.opensearch_nodes[0]).path.rstrip("/")
        kwargs: dict[str, object] = {
            "maxsize": maxsize,
            "block": False,
            "retries": False,
            "timeout": urllib3.Timeout(connect=10.0, read=config.opensearch_timeout),
            # Request bodies go out in CHUNK-sized sends (urllib3 reads 16 KiB at a time by
            # default): a typical _bulk body is then one send, not two or more.
            "blocksize": CHUNK,
        }
        kwargs.update(tls_options(config))
        self.pools = {url: urllib3.connection_from_url(url, **kwargs)
                      for url in config.opensearch_nodes}
        # Lent to requests that bring no Authorization header only when the operator opts in.
        self.default_authorization = (
            config.opensearch_authorization if config.anonymous_as_service else None)

    def request(
        self,
        method: str,
        target: str,
        headers: list[tuple[str, str]],
        body: IO[bytes] | Iterator[bytes] | bytes | None,
        content_length: int | None,
    ) -> urllib3.BaseHTTPResponse:
        """Send one request; ``target`` is the raw path and query exactly as the client sent it.

        The response body is not read: the caller streams it with ``stream_body``.
        """
        drop = hop_by_hop(headers) | NOT_FORWARDED_REQUEST
        out = urllib3.HTTPHeaderDict()
        for name, value in headers:
            if name.lower() not in drop:
                out.add(name, value)
        if self.default_authorization and "authorization" not in out:
            out["Authorization"] = self.default_authorization
        chunked = False
        if content_length is not None:
            out["Content-Length"] = str(content_length)
        elif body is not None:
            chunked = True
        resend = only_reads(method, target)
        if resend and content_length and content_length <= CHUNK and hasattr(body, "read"):
            # read at once (urllib3 would send it in one piece) so that it can be sent again
            body = body.read(content_length)  # type: ignore[union-attr]
        elif resend and body is not None and not isinstance(body, bytes):
            resend = False  # streamed: cannot be sent twice
        started = time.monotonic()
        outcome = "unreachable"
        try:
            response = self._send(method, target, body, out, chunked, resend)
            outcome = instruments.opensearch_outcome(response.status)
            return response
        except ClusterTimeout:
            outcome = "timeout"
            raise
        finally:
            instruments.count_opensearch("passthrough", outcome, time.monotonic() - started)

    def _send(self, method: str, target: str, body: IO[bytes] | Iterator[bytes] | bytes | None,
              out: urllib3.HTTPHeaderDict, chunked: bool,
              resend: bool = False) -> urllib3.BaseHTTPResponse:
        """The request to the first node that takes it; with ``resend`` (a read whose body is
        in memory) also to the next one after a connection lost without an answer."""
        refused: Exception | None = None
        for url in self.nodes.order():
            try:
                response = self.pools[url].urlopen(
                    method,
                    self.path_prefix + target,
                    body=body,
                    headers=out,
                    chunked=chunked,
                    preload_content=False,
                    decode_content=False,
                    redirect=False,
                    retries=False,
                    assert_same_host=False,
                )
            except ReadTimeoutError as exc:
                raise ClusterTimeout(
                    f"OpenSearch cluster at {self.base_url} did not answer within "
                    f"{self.config.opensearch_timeout:g}s"
                ) from exc
            except ConnectTimeoutError as exc:
                # NewConnectionError (refused, unknown host) is a ConnectTimeoutError in urllib3:
                # nothing was sent, so the next node may have it.
                self.nodes.down(url)
                refused = exc
                continue
            except (MaxRetryError, ProtocolError, ConnectionError) as exc:
                if resend:
                    refused = exc
                    continue
                raise ClusterUnavailable(f"OpenSearch cluster at {self.base_url} is unreachable: "
                                         f"{connection_reason(exc)}") from exc
            self.nodes.up(url)
            return response
        assert refused is not None
        raise ClusterUnavailable(
            f"OpenSearch cluster at {self.base_url} is unreachable: {connection_reason(refused)}"
        ) from refused


def stream_body(response: urllib3.BaseHTTPResponse) -> Iterator[bytes]:
    """Yield the raw (still encoded) body; return the connection to the pool when done."""
    complete = False
    try:
        yield from response.stream(CHUNK, decode_content=False)
        complete = True
    finally:
        if not complete:
            response.close()
        response.release_conn()

