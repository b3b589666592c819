"""Test probes that sit on the wire: a TCP relay (a cluster that goes away and comes back) and a
recording HTTP endpoint (to see exactly which bytes and headers leave the proxy)."""

from __future__ import annotations

import socket
import threading
from contextlib import suppress
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class TcpRelay:
    """Forwards every connection on ``port`` to ``target``; start and stop it at will."""

    def __init__(self, port: int, target: tuple[str, int]) -> None:
        self.port, self.target = port, target
        self._server: socket.socket | None = None
        self._conns: list[socket.socket] = []

    def start(self) -> None:
        srv = socket.socket()
        srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        srv.bind(("127.0.0.1", self.port))
        srv.listen(64)
        self._server = srv
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

    def _accept(self, srv: socket.socket) -> None:
        while True:
            try:
                client, _ = srv.accept()
            except OSError:
                return
            upstream = socket.create_connection(self.target)
            self._conns += [client, upstream]
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pipe, args=(a, b), daemon=True).start()

    @staticmethod
    def _pipe(src: socket.socket, dst: socket.socket) -> None:
        with suppress(OSError):
            while data := src.recv(65536):
                dst.sendall(data)
        with suppress(OSError):
            dst.shutdown(socket.SHUT_WR)


@dataclass
class Recorded:
    method: str
    target: str
    headers: list[tuple[str, str]]
    body: bytes


@dataclass
class RecordingEndpoint:
    """An HTTP endpoint that records each request and answers with ``reply_headers``."""

    reply_status: int = 200
    reply_headers: list[tuple[str, str]] = field(default_factory=list)
    reply_body: bytes = b'{"ok":true}'
    requests: list[Recorded] = field(default_factory=list)

    def start(self) -> str:
        endpoint = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def _handle(self) -> None:
                length = self.headers.get("Content-Length")
                if length is not None:
                    body = self.rfile.read(int(length))
                elif "chunked" in self.headers.get("Transfer-Encoding", ""):
                    body = b""
                    while size := int(self.rfile.readline().strip(), 16):
                        body += self.rfile.read(size)
                        self.rfile.readline()
                    self.rfile.readline()
                else:
                    body = b""
                endpoint.requests.append(
                    Recorded(self.command, self.path, list(self.headers.items()), body))
                self.send_response(endpoint.reply_status)
                for name, value in endpoint.reply_headers:
                    self.send_header(name, value)
                self.send_header("Content-Length", str(len(endpoint.reply_body)))
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(endpoint.reply_body)

            do_GET = do_POST = do_PUT = do_DELETE = do_HEAD = do_PATCH = _handle

            def log_message(self, *args: object) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()


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
