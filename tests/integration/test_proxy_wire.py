"""What exactly leaves the proxy: an HTTP endpoint that records each request stands where the
cluster would, so headers the real cluster ignores (authorization, securitytenant, hop-by-hop)
can be checked byte for byte."""

from __future__ import annotations

import base64
import re
import socket
from collections.abc import Iterator
from urllib.parse import urlsplit

import pytest
import urllib3

from tests.support.processes import FRONTS, Server
from tests.support.relay import RecordingEndpoint

http = urllib3.PoolManager(retries=False, timeout=30)


@pytest.fixture
def recorder() -> Iterator[RecordingEndpoint]:
    endpoint = RecordingEndpoint(
        reply_status=201,
        reply_headers=[
            ("Content-Type", "application/json; charset=UTF-8"),
            ("Warning", '299 OpenSearch-3.6.0 "this request accesses system indices"'),
            ("Set-Cookie", "a=1"),
            ("Set-Cookie", "b=2"),
            ("Connection", "keep-alive, X-Upstream-Private"),
            ("X-Upstream-Private", "hop"),
            ("Keep-Alive", "timeout=5"),
            ("X-Opaque-Id", "abc"),
        ],
    )
    endpoint.url = endpoint.start()  # type: ignore[attr-defined]
    yield endpoint
    endpoint.stop()


def start_server(front: str, env: dict[str, str], recorder: RecordingEndpoint,
                 **extra: str) -> Server:
    url = recorder.url.replace("http://", "http://kibanaserver:pw@")  # type: ignore[attr-defined]
    srv = Server(dict(env, OPENSEARCH_URL=url, **extra), workers=1, wait_cluster=False,
                 front=front)
    recorder.requests.clear()  # forget the readiness probe
    return srv


@pytest.fixture(params=FRONTS, ids=[f"front={f}" for f in FRONTS])
def server_for(request: pytest.FixtureRequest, env: dict[str, str],
               recorder: RecordingEndpoint) -> Iterator[Server]:
    srv = start_server(request.param, env, recorder)
    yield srv
    srv.stop()


@pytest.fixture(params=FRONTS, ids=[f"front={f}" for f in FRONTS])
def lending_server(request: pytest.FixtureRequest, env: dict[str, str],
                   recorder: RecordingEndpoint) -> Iterator[Server]:
    """A workbench whose operator lets anonymous callers borrow its credentials."""
    srv = start_server(request.param, env, recorder, WORKBENCH_ANONYMOUS_AS_SERVICE="true")
    yield srv
    srv.stop()


def names(headers: list[tuple[str, str]]) -> dict[str, str]:
    return {k.lower(): v for k, v in headers}


def test_request_headers_and_target_are_forwarded(server_for: Server,
                                                  recorder: RecordingEndpoint) -> None:
    target = "/.kibana/_doc/config%3A3.8.0?refresh=wait_for&x=%2A,a//b&_source=a%2Cb"
    response = http.request(
        "PUT", server_for.url + target, body=b'{"a":1}',
        headers={
            "Authorization": "Basic dXNlcjpwYXNz",
            "securitytenant": "global",
            "X-Opaque-Id": "abc",
            "x-opensearch-product-origin": "opensearch-dashboards",
            "Accept": "application/json",
            "Content-Type": "application/json",
            "User-Agent": "opensearch-js/3.0",
            "Connection": "keep-alive, X-Client-Private",
            "X-Client-Private": "hop",
            "Keep-Alive": "timeout=5",
            "TE": "trailers",
            "Proxy-Authorization": "Basic secret",
            "Upgrade": "h2c",
        },
    )
    assert response.status == 201
    (seen,) = recorder.requests
    assert seen.method == "PUT"
    assert seen.target == target  # byte for byte: %3A, %2A, %2C and the empty segment kept
    assert seen.body == b'{"a":1}'
    got = names(seen.headers)
    for name, value in (
        ("authorization", "Basic dXNlcjpwYXNz"),  # the client's own credentials win
        ("securitytenant", "global"),
        ("x-opaque-id", "abc"),
        ("x-opensearch-product-origin", "opensearch-dashboards"),
        ("accept", "application/json"),
        ("content-type", "application/json"),
        ("user-agent", "opensearch-js/3.0"),
        ("content-length", "7"),
    ):
        assert got.get(name) == value, name
    for hop in ("keep-alive", "te", "proxy-authorization", "upgrade"):
        assert hop not in got, hop
    # A custom name listed in Connection is dropped by the Python proxy; HAProxy keeps it (the one
    # documented difference of the front, workbench/serving/front.py).
    assert ("x-client-private" in got) == (server_for.front == "haproxy")
    assert got["host"] == recorder.url.removeprefix("http://")  # type: ignore[attr-defined]


def test_no_credentials_are_lent_to_anonymous_callers_by_default(
    server_for: Server, recorder: RecordingEndpoint
) -> None:
    """A caller without credentials reaches the cluster without credentials (a secured cluster
    answers its own 401); an empty header stays empty."""
    assert http.request("GET", server_for.url + "/_cluster/health").status == 201
    assert http.request("GET", server_for.url + "/_cluster/health",
                        headers={"Authorization": ""}).status == 201
    anonymous, empty = recorder.requests
    assert "authorization" not in names(anonymous.headers)
    assert names(empty.headers).get("authorization", "") == ""


def test_configured_credentials_are_lent_only_when_the_operator_opts_in(
    lending_server: Server, recorder: RecordingEndpoint
) -> None:
    assert http.request("GET", lending_server.url + "/_cluster/health").status == 201
    assert http.request("GET", lending_server.url + "/_cluster/health",
                        headers={"Authorization": ""}).status == 201
    assert http.request("GET", lending_server.url + "/_cluster/health",
                        headers={"Authorization": "Basic b3duOnB3"}).status == 201
    anonymous, empty, own = recorder.requests
    expected = "Basic " + base64.b64encode(b"kibanaserver:pw").decode()
    assert names(anonymous.headers)["authorization"] == expected
    assert anonymous.body == b""
    assert names(empty.headers).get("authorization", "") == ""  # never treated as "none"
    assert names(own.headers)["authorization"] == "Basic b3duOnB3"


def test_response_headers_pass_without_hop_by_hop(server_for: Server,
                                                  recorder: RecordingEndpoint) -> None:
    response = http.request("GET", server_for.url + "/", headers={"X-Opaque-Id": "abc"})
    assert response.status == 201
    assert response.data == b'{"ok":true}'
    headers = response.headers
    assert headers["Warning"] == '299 OpenSearch-3.6.0 "this request accesses system indices"'
    assert headers.getlist("Set-Cookie") == ["a=1", "b=2"]
    assert headers["Content-Type"] == "application/json; charset=UTF-8"
    assert headers.getlist("X-Opaque-Id") == ["abc"]  # the cluster's echo, not doubled
    assert ("X-Upstream-Private" in headers) == (server_for.front == "haproxy")
    assert "timeout=5" not in headers.get("Keep-Alive", "")


def test_get_and_delete_bodies_and_head(server_for: Server, recorder: RecordingEndpoint) -> None:
    http.request("GET", server_for.url + "/i/_search", body=b'{"size":1}',
                 headers={"Content-Type": "application/json"})
    http.request("DELETE", server_for.url + "/_search/scroll", body=b'{"scroll_id":"x"}',
                 headers={"Content-Type": "application/json"})
    head = http.request("HEAD", server_for.url + "/i")
    assert [(r.method, r.body) for r in recorder.requests] == [
        ("GET", b'{"size":1}'), ("DELETE", b'{"scroll_id":"x"}'), ("HEAD", b""),
    ]
    assert head.status == 201 and head.data == b""
    assert head.headers["Content-Length"] == str(len(recorder.reply_body))


SMUGGLED = b"GET /smuggled HTTP/1.1\r\nHost: x\r\n\r\n"
SHAPES = {
    # Both framings: the chunked coding wins, and never both reach the cluster.
    "cl-te": b"POST /i/_doc HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
             b"Content-Length: %d\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n%s"
             % (5 + len(SMUGGLED), SMUGGLED),
    # A Transfer-Encoding a lax server reads, written so that a strict one does not.
    "te-space": b"POST /i/_doc HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                b"Content-Length: %d\r\nTransfer-Encoding : chunked\r\n\r\n0\r\n\r\n%s"
                % (5 + len(SMUGGLED), SMUGGLED),
    "two-lengths": b"POST /i/_doc HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n"
                   b"Content-Length: %d\r\n\r\n{}%s" % (2 + len(SMUGGLED), SMUGGLED),
    "bare-cr": b"GET /i/_search HTTP/1.1\r\nHost: x\r\nX-A: a\rContent-Length: 0\r\n\r\n",
    "obs-fold": b"GET /i/_search HTTP/1.1\r\nHost: x\r\nX-A: a\r\n b\r\n\r\n",
}


def raw_exchange(url: str, data: bytes, quiet: float = 2.0) -> int:
    """Sends ``data`` on one connection and reads until the front closes it or stays quiet;
    returns how many responses came back."""
    parts = urlsplit(url)
    received = b""
    with socket.create_connection((parts.hostname, parts.port), timeout=quiet) as sock:
        sock.sendall(data)
        try:
            while chunk := sock.recv(65536):
                received += chunk
        except (TimeoutError, ConnectionResetError):
            pass
    return len(re.findall(rb"(?:^|\r\n)HTTP/1\.[01] \d{3} ", received))


@pytest.mark.parametrize("shape", list(SHAPES))
def test_request_smuggling_shapes(server_for: Server, recorder: RecordingEndpoint,
                                  shape: str) -> None:
    """Each request the cluster gets is one the client got an answer for, framed one way only,
    with clean header lines (the recording endpoint is a lax parser: it prefers Content-Length
    and keeps folded lines, as a server open to smuggling would)."""
    answered = raw_exchange(server_for.url, SHAPES[shape])
    seen = recorder.requests
    assert len(seen) <= answered, [(r.method, r.target) for r in seen]
    for got in seen:
        lowered = [name.lower() for name, _ in got.headers]
        assert not {"content-length", "transfer-encoding"} <= set(lowered), got.headers
        assert all(name == name.strip() for name in lowered), got.headers
        assert not any("\r" in v or "\n" in v for _, v in got.headers), got.headers
        if got.target == "/smuggled":  # read by the front as a second request of the client
            assert shape == "cl-te" and answered == 2
