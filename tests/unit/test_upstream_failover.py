"""The Python pass-through (``store.upstream``) over several nodes: a read whose node closes or
resets the connection without answering (a node dying) is sent to the next node; a write is
answered 503, never sent twice (docs/deployment.md, "A cluster of several nodes")."""

from __future__ import annotations

import io
import socket
import struct
import threading
from collections.abc import Iterator

import pytest

from workbench.config import Config
from workbench.errors import ClusterUnavailable
from workbench.store.nodes import only_reads
from workbench.store.upstream import Upstream, stream_body


class Node:
    """A stand-in node on a free port: ``answer`` says 200 to every request; otherwise each
    connection is closed once a request arrived, unread (``reset``: a RST) or read (a FIN)."""

    def __init__(self, answer: bool, reset: bool = False) -> None:
        self.answer, self.reset = answer, reset
        self.requests: list[bytes] = []
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        with conn:
            data = b""
            while b"\r\n\r\n" not in data:
                chunk = conn.recv(65536) if not self.reset else conn.recv(65536, socket.MSG_PEEK)
                if not chunk:
                    return
                data = chunk if self.reset else data + chunk
            head, _, rest = data.partition(b"\r\n\r\n")
            length = next((int(line.split(b":")[1]) for line in head.split(b"\r\n")
                           if line.lower().startswith(b"content-length:")), 0)
            if not self.reset:
                while len(rest) < length:
                    rest += conn.recv(65536)
            self.requests.append(head + b"\r\n\r\n" + rest)
            if self.reset:
                conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                return
            if self.answer:
                conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok")

    def close(self) -> None:
        self.sock.close()


@pytest.fixture(params=["closed", "reset"])
def nodes(request: pytest.FixtureRequest) -> Iterator[tuple[Node, Node]]:
    dying, alive = Node(answer=False, reset=request.param == "reset"), Node(answer=True)
    yield dying, alive
    dying.close()
    alive.close()


def upstream(*nodes: Node) -> Upstream:
    proxy = Upstream(Config.from_env({"OPENSEARCH_URL": ",".join(n.url for n in nodes)}))
    proxy.nodes.order = lambda: [n.url for n in nodes]  # type: ignore[method-assign]
    return proxy


@pytest.mark.parametrize(("method", "target", "body"), [
    ("POST", "/products/_search?size=5", b'{"query": {"match_all": {}}}'),
    ("GET", "/products/_doc/1", None),
    ("POST", "/_msearch", b'{}\n{"query": {"match_all": {}}}\n'),
])
def test_a_read_whose_node_dies_before_answering_goes_to_the_next(
        nodes: tuple[Node, Node], method: str, target: str, body: bytes | None) -> None:
    dying, alive = nodes
    stream = io.BytesIO(body) if body is not None else None
    answer = upstream(dying, alive).request(method, target, [("Content-Type", "application/json")],
                                            stream, len(body) if body is not None else None)
    assert answer.status == 200 and b"".join(stream_body(answer)) == b"ok"
    assert len(dying.requests) == 1 and len(alive.requests) == 1
    sent = alive.requests[0]
    assert sent.startswith(f"{method} {target} HTTP/1.1\r\n".encode())
    assert sent.endswith(b"\r\n\r\n" + (body or b""))


def test_a_write_whose_node_dies_is_answered_not_sent_again(nodes: tuple[Node, Node]) -> None:
    dying, alive = nodes
    body = b'{"title": "x"}'
    with pytest.raises(ClusterUnavailable, match="is unreachable: connection lost"):
        upstream(dying, alive).request("POST", "/products/_doc", [], io.BytesIO(body), len(body))
    assert len(dying.requests) == 1 and alive.requests == []


def test_a_read_no_node_answers_is_a_503() -> None:
    first, second = Node(answer=False), Node(answer=False)
    try:
        with pytest.raises(ClusterUnavailable, match="is unreachable: connection lost"):
            upstream(first, second).request("GET", "/_cluster/health", [], None, None)
        assert len(first.requests) == 1 and len(second.requests) == 1
    finally:
        first.close()
        second.close()


@pytest.mark.parametrize(("method", "target", "reads"), [
    ("GET", "/anything", True), ("HEAD", "/products", True),
    ("POST", "/products/_search", True), ("POST", "/products/_search?size=1", True),
    ("POST", "/_msearch", True), ("POST", "/products/_count", True),
    ("POST", "/products/_doc", False), ("PUT", "/products/_doc/1", False),
    ("POST", "/_bulk", False), ("DELETE", "/products", False),
    ("POST", "/products/_search_shards_not", False),
])
def test_only_reads(method: str, target: str, reads: bool) -> None:
    assert only_reads(method, target) is reads
