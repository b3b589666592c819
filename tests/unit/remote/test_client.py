"""One attempt of a remote search (workbench/remote/client.send_once) against a small HTTP
server of the test's own on loopback: the operator's policy, what the remote receives (method,
body, basic auth), and the exact reason of each failure, the password never in one."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from workbench.config import Config
from workbench.remote.client import RemoteError, send_once
from workbench.remote.configs import RemoteConfig
from workbench.remote.mapping import PRESETS
from workbench.remote.templates import RenderedRequest, render

PASSWORD = "Remote-pw-2Zk9"
LOOPBACK = json.dumps([r"^http://127\.0\.0\.1:[0-9]+(/.*)?$"])


class Handler(BaseHTTPRequestHandler):
    """Answers what the path asks for; records every request."""

    seen: list[dict[str, Any]] = []

    def _answer(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        type(self).seen.append({"method": self.command, "path": self.path, "body": body,
                                "authorization": self.headers.get("Authorization")})
        status, data, extra = 200, b'{"hits": {"hits": []}}', {}
        if self.path.startswith("/err"):
            status, data = 503, f"down for maintenance; user pw {PASSWORD}".encode()
        elif self.path.startswith("/moved"):
            status, data, extra = 301, b"", {"Location": "http://example.com/"}
        elif self.path.startswith("/text"):
            data = b"<html>not json</html>"
        self.send_response(status)
        for name, value in extra.items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    do_GET = do_POST = _answer

    def log_message(self, *_: Any) -> None:
        pass


@pytest.fixture(scope="module")
def base() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def settings(**env: str) -> Config:
    return Config.from_env({"WORKBENCH_REMOTE_ENDPOINTS": LOOPBACK,
                            "WORKBENCH_REMOTE_PRIVATE_ENDPOINTS": "true",
                            "WORKBENCH_REMOTE_TIMEOUT": "5", **env})


def remote(url: str, **extra: Any) -> RemoteConfig:
    return RemoteConfig(id="r1", name="r", connection_url=url,
                        query_template='{"query": {"match": {"t": "%SearchText%"}}}',
                        mapping=PRESETS["opensearch"], **extra)


def reason(config: Config, target: RemoteConfig, request: RenderedRequest) -> str:
    with pytest.raises(RemoteError) as caught:
        send_once(config, target, request)
    assert PASSWORD not in caught.value.reason
    return caught.value.reason


def test_a_search_is_sent_with_its_body_and_basic_auth(base: str) -> None:
    target = remote(base + "/p/_search", username="reader", password=PASSWORD)
    request = render(target.query_template, target.connection_url, "red", 3, None, "opensearch")
    Handler.seen.clear()
    assert send_once(settings(), target, request) == {"hits": {"hits": []}}
    assert Handler.seen == [{"method": "POST", "path": "/p/_search",
                             "body": b'{"query":{"match":{"t":"red"}},"size":3}',
                             "authorization": "Basic cmVhZGVyOlJlbW90ZS1wdy0yWms5"}]
    get = RenderedRequest("GET", base + "/select?q=red", None)
    Handler.seen.clear()
    send_once(settings(), remote(base + "/select"), get)
    assert Handler.seen == [{"method": "GET", "path": "/select?q=red", "body": b"",
                             "authorization": None}]


def test_failures_and_their_reasons(base: str) -> None:
    target = remote(base + "/p", password=PASSWORD)
    err = RenderedRequest("POST", base + "/err", b"{}")
    with pytest.raises(RemoteError) as caught:
        send_once(settings(), target, err)
    assert caught.value.retryable is True
    assert caught.value.reason == (f"remote search configuration [r1]: HTTP 503 from POST "
                                   f"{base}/err: down for maintenance; user pw ****")
    assert reason(settings(), target, RenderedRequest("GET", base + "/moved", None)) == (
        f"remote search configuration [r1]: HTTP 301 from GET {base}/moved: a redirect, which "
        "is not followed")
    assert reason(settings(), target, RenderedRequest("GET", base + "/text", None)) == (
        f"remote search configuration [r1]: the answer from GET {base}/text is not JSON: "
        "<html>not json</html>")
    closed = "http://127.0.0.1:9/x"  # the discard port: nothing listens there
    with pytest.raises(RemoteError) as caught:
        send_once(settings(), target, RenderedRequest("GET", closed, None))
    assert caught.value.retryable is True
    assert caught.value.reason == (f"remote search configuration [r1]: could not reach GET "
                                   f"{closed}: the connection was refused or not made")


def test_the_policy_holds_on_every_connection(base: str) -> None:
    target = remote(base + "/p")
    request = RenderedRequest("GET", base + "/p", None)
    assert reason(settings(WORKBENCH_REMOTE_PRIVATE_ENDPOINTS="false"), target, request) == (
        "remote search configuration [r1]: connectionUrl is on 127.0.0.1, a loopback address; "
        "endpoints on non-public addresses are refused unless the operator allows them "
        "(WORKBENCH_REMOTE_PRIVATE_ENDPOINTS=true)")
    assert reason(settings(WORKBENCH_REMOTE_ENDPOINTS='["^https://elsewhere/.*$"]'), target,
                  request) == (
        "remote search configuration [r1]: connectionUrl is not a trusted endpoint: it matches "
        "none of the patterns of WORKBENCH_REMOTE_ENDPOINTS")
