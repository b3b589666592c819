"""Test probes that sit on the wire: a TCP relay (a cluster that goes away and comes back) and a
recording HTTP endpoint (to see exactly which bytes and headers leave the proxy)."""

from __future__ import annotations

import socket
import threading
import urllib.error
import urllib.parse
import urllib.request
from contextlib import suppress
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class _Link:
    """One relayed connection: whether the cluster's bytes to the client are held back."""

    def __init__(self, client: socket.socket) -> None:
        self.client = client
        self.held = False
        self.cut = False  # both directions held (``TcpRelay.cut``)
        self.pending_up: list[bytes] = []
        self.stop_after = False  # stop the relay once this request's answer is relayed
        self.pending: list[bytes] = []
        self.upstream: socket.socket | None = None
        self.lock = threading.Lock()


class TcpRelay:
    """Forwards every connection on ``port`` to ``target``; start and stop it at will.

    Two faults on the wire, each set off by the first request whose bytes contain ``trigger``
    (a request line sits in the first segment a client sends):

    * ``hold``: the request still reaches the cluster, but its answer (and everything after it
      on that connection) is kept from the client until ``release`` — a cluster that did the
      work and then froze.
    * ``stop_after``: once that request's answer has reached the client, the relay stops, so
      the next request needs a new connection and is refused.

    And one for any protocol: ``cut`` holds every byte in both directions, on every connection,
    and new connections wait unconnected, until ``mend`` delivers what was held — a network
    cut that TCP rides out (nothing is reset; what was sent arrives once the link is back).
    """

    def __init__(self, port: int, target: tuple[str, int]) -> None:
        self.port, self.target = port, target
        self._server: socket.socket | None = None
        self._conns: list[socket.socket] = []
        self._links: list[_Link] = []
        self._hold_trigger: bytes | None = None
        self._stop_trigger: bytes | None = None
        self.mended = threading.Event()  # clear while the relay is cut
        self.mended.set()
        self.held = threading.Event()  # set when a request set off ``hold``
        self.stopped = threading.Event()  # set when ``stop_after`` stopped the relay

    def start(self) -> None:
        srv = socket.socket()
        srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        srv.bind(("127.0.0.1", self.port))
        srv.listen(64)
        self._server = srv
        self.stopped.clear()
        threading.Thread(target=self._accept, args=(srv,), daemon=True).start()

    def stop(self) -> None:
        if self._server:
            with suppress(OSError):  # wakes the thread blocked in accept() (Linux)
                self._server.shutdown(socket.SHUT_RDWR)
            self._server.close()
            self._server = None
        for conn in self._conns:
            with suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)
                conn.close()
        self._conns.clear()
        self._links.clear()

    def hold(self, trigger: bytes) -> None:
        """Hold back the answer to the next request containing ``trigger``."""
        self.held.clear()
        self._hold_trigger = trigger

    def release(self) -> None:
        """Stop holding: answers held so far go to clients still connected."""
        self._hold_trigger = None
        for link in list(self._links):
            with link.lock:
                link.held = False
                with suppress(OSError):
                    for data in link.pending:
                        link.client.sendall(data)
                link.pending.clear()

    def cut(self) -> None:
        """Hold every byte both ways, and new connections, until ``mend``."""
        self.mended.clear()
        for link in list(self._links):
            with link.lock:
                link.cut = True

    def mend(self) -> None:
        """Deliver what the cut held, both ways, and forward as before."""
        for link in list(self._links):
            with link.lock:
                link.cut = False
                with suppress(OSError):
                    if link.upstream is not None:
                        for data in link.pending_up:
                            link.upstream.sendall(data)
                    if not link.held:
                        for data in link.pending:
                            link.client.sendall(data)
                        link.pending.clear()
                link.pending_up.clear()
        self.mended.set()

    def stop_after(self, trigger: bytes) -> None:
        """Stop the relay once the answer to the next request containing ``trigger`` is
        relayed."""
        self._stop_trigger = trigger

    def _accept(self, srv: socket.socket) -> None:
        while True:
            try:
                client, _ = srv.accept()
            except OSError:
                return
            self.mended.wait()
            upstream = socket.create_connection(self.target)
            link = _Link(client)
            link.upstream = upstream
            self._conns += [client, upstream]
            self._links.append(link)
            threading.Thread(target=self._requests, args=(link, upstream), daemon=True).start()
            threading.Thread(target=self._answers, args=(link, upstream), daemon=True).start()

    def _requests(self, link: _Link, upstream: socket.socket) -> None:
        """Client to cluster; a triggering request marks its link before it is forwarded, so
        its answer cannot slip through."""
        with suppress(OSError):
            while data := link.client.recv(65536):
                hold, stop = self._hold_trigger, self._stop_trigger
                if hold is not None and hold in data:
                    self._hold_trigger = None
                    with link.lock:
                        link.held = True
                    self.held.set()
                if stop is not None and stop in data:
                    self._stop_trigger = None
                    link.stop_after = True
                with link.lock:
                    if link.cut:
                        link.pending_up.append(data)
                        continue
                upstream.sendall(data)
        with suppress(OSError):
            upstream.shutdown(socket.SHUT_WR)

    def _answers(self, link: _Link, upstream: socket.socket) -> None:
        """Cluster to client, held back while the link is held."""
        answer = _Answer()
        with suppress(OSError):
            while data := upstream.recv(65536):
                with link.lock:
                    if link.held or link.cut:
                        link.pending.append(data)
                        continue
                    link.client.sendall(data)
                if link.stop_after and answer.complete(data):
                    self.stop()
                    self.stopped.set()
                    return
        with suppress(OSError):
            link.client.shutdown(socket.SHUT_WR)


class _Answer:
    """Enough of HTTP/1.1 to tell when one answer with a ``Content-Length`` has been relayed."""

    def __init__(self) -> None:
        self.data = b""

    def complete(self, chunk: bytes) -> bool:
        self.data += chunk
        head, sep, body = self.data.partition(b"\r\n\r\n")
        if not sep:
            return False
        for line in head.split(b"\r\n")[1:]:
            name, _, value = line.partition(b":")
            if name.strip().lower() == b"content-length":
                return len(body) >= int(value.strip())
        return True  # no body (HEAD, 204) or unknown length: the head is all there is


@dataclass
class Recorded:
    method: str
    target: str
    headers: list[tuple[str, str]]
    body: bytes


class _Handler(BaseHTTPRequestHandler):
    """What the two recording endpoints' handlers share: HTTP/1.1, no log lines, the body."""

    protocol_version = "HTTP/1.1"

    def read_body(self) -> bytes:
        length = self.headers.get("Content-Length")
        if length is not None:
            return self.rfile.read(int(length))
        body = b""
        if "chunked" in self.headers.get("Transfer-Encoding", ""):
            while size := int(self.rfile.readline().strip(), 16):
                body += self.rfile.read(size)
                self.rfile.readline()
            self.rfile.readline()
        return body

    def record(self, into: list[Recorded]) -> bytes:
        body = self.read_body()
        into.append(Recorded(self.command, self.path, list(self.headers.items()), body))
        return body

    def log_message(self, *args: object) -> None:
        pass


def _serve(handler: type[BaseHTTPRequestHandler]) -> ThreadingHTTPServer:
    """``handler`` served on a free loopback port, in a daemon thread."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def _close(server: ThreadingHTTPServer | None) -> None:
    if server is not None:
        server.shutdown()
        server.server_close()


@dataclass
class RecordingEndpoint:
    """An HTTP endpoint that records each request and answers with ``reply_headers``."""

    reply_status: int = 200
    reply_headers: list[tuple[str, str]] = field(default_factory=list)
    reply_body: bytes = b'{"ok":true}'
    requests: list[Recorded] = field(default_factory=list)

    def start(self) -> str:
        endpoint = self

        class Handler(_Handler):
            def _handle(self) -> None:
                self.record(endpoint.requests)
                self.send_response(endpoint.reply_status)
                for name, value in endpoint.reply_headers:
                    self.send_header(name, value)
                self.send_header("Content-Length", str(len(endpoint.reply_body)))
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(endpoint.reply_body)

            do_GET = do_POST = do_PUT = do_DELETE = do_HEAD = do_PATCH = _handle

        self._server = _serve(Handler)
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def stop(self) -> None:
        _close(self._server)


class SilentEndpoint:
    """A TCP endpoint that accepts connections and never answers: a frozen node."""

    def __init__(self) -> None:
        self._server = socket.socket()
        self._server.bind(("127.0.0.1", 0))
        self._server.listen(256)
        self.port = int(self._server.getsockname()[1])
        self._conns: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self._server.accept()
            except OSError:
                return
            self._conns.append(conn)  # held open, never read from or written to

    def stop(self) -> None:
        with suppress(OSError):
            self._server.shutdown(socket.SHUT_RDWR)
        self._server.close()
        for conn in self._conns:
            with suppress(OSError):
                conn.close()


class RecordingForwarder:
    """An HTTP endpoint in front of a real server (``target``, a base URL): every request is
    recorded, then sent on unchanged and answered with the server's status and body. A test
    sees exactly what the workbench sent (the prompts a model server received) while the
    answers stay the real server's."""

    def __init__(self, target: str) -> None:
        self.target = target.rstrip("/")
        self.requests: list[Recorded] = []
        self._server: ThreadingHTTPServer | None = None

    def start(self) -> str:
        """Start listening on a free loopback port; the base URL standing for ``target``."""
        forwarder = self
        target = urllib.parse.urlsplit(self.target)

        class Handler(_Handler):
            def _handle(self) -> None:
                body = self.record(forwarder.requests)
                headers = {k: v for k, v in self.headers.items()
                           if k.lower() not in ("host", "content-length", "connection")}
                request = urllib.request.Request(
                    f"{target.scheme}://{target.netloc}{self.path}", data=body or None,
                    headers=headers, method=self.command)
                try:
                    with urllib.request.urlopen(request, timeout=300) as reply:
                        status, answer = reply.status, reply.read()
                        kind = reply.headers.get("Content-Type", "application/json")
                except urllib.error.HTTPError as error:
                    status, answer = error.code, error.read()
                    kind = error.headers.get("Content-Type", "application/json")
                self.send_response(status)
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

            do_GET = do_POST = _handle

        self._server = _serve(Handler)
        return f"http://127.0.0.1:{self._server.server_port}{target.path}"

    def stop(self) -> None:
        _close(self._server)
