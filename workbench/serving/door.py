"""The door: a byte relay on the workbench's public port, in front of nginx.

nginx's HTTP parser refuses a request line whose target has no leading slash
(``POST _plugins/_ml/models/_search HTTP/1.1``) with an HTML 400 before any configuration
applies, while OpenSearch routes it as ``/_plugins/...`` and OpenSearch Dashboards'
search-relevance plugin sends exactly that for its model list. The door follows the HTTP/1.1
framing of what clients send (request heads, ``Content-Length`` and chunked bodies) so that it
can give each request line the slash (``workbench.serving.request_target``); every other byte, in
both directions, is relayed unchanged. Responses are not parsed at all.

The door tells nginx the client's address with the PROXY protocol (v1), so nginx's access log
shows the client, not the door. Anything it cannot follow with certainty (an oversized or
malformed head, a transfer coding other than chunked, an upgrade) switches that connection to
plain relaying: nginx then answers it as it would have without the door, and no byte of a body
is ever taken for a request line.

``serve`` binds the public port and runs one door process per core on it, each an asyncio loop
accepting from the shared socket; nginx listens on a Unix socket in the front's run directory.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import re
import signal
import socket
import sys
from typing import cast

import uvloop

from workbench.errors import envelope
from workbench.serving.request_target import fix_request_line

log = logging.getLogger(__name__)

MAX_HEAD = 1 << 20  # nginx's own limit here: large_client_header_buffers 8 1m
_MAX_LINE = 4096  # a chunk-size or trailer line
_HEAD_END = re.compile(rb"\r?\n\r?\n")
_VERSIONED = re.compile(rb" HTTP/\d\.\d\r?$")
_HEX = re.compile(rb"[0-9A-Fa-f]{1,16}")

_HEAD, _BODY, _SIZE, _DATA, _DATA_END, _TRAILER, _RAW = range(7)


class Framer:
    """Follows the requests in a client's byte stream and gives each request line its slash.

    ``feed`` takes the bytes as they arrive and returns the bytes to send on: the same bytes,
    except a fixed request line. Heads and chunk-size lines are held back until complete.
    """

    def __init__(self) -> None:
        self.state = _HEAD
        self.pending = b""  # an incomplete head or chunk line
        self.remaining = 0  # body or chunk bytes still to pass

    def feed(self, data: bytes) -> bytes:
        if self.state == _RAW:
            return data
        out: list[bytes] = []
        if self.pending:
            data, self.pending = self.pending + data, b""
        pos, end = 0, len(data)
        while pos < end:
            state = self.state
            if state in (_BODY, _DATA):
                take = min(self.remaining, end - pos)
                out.append(data[pos:pos + take])
                pos += take
                self.remaining -= take
                if not self.remaining:
                    self.state = _HEAD if state == _BODY else _DATA_END
            elif state == _HEAD:
                pos = self._head(data, pos, out)
            elif state == _RAW:
                out.append(data[pos:])
                break
            else:
                pos = self._chunk_line(data, pos, out)
        return b"".join(out)

    def _head(self, data: bytes, pos: int, out: list[bytes]) -> int:
        start = pos
        while pos < len(data) and data[pos] in b"\r\n":  # empty lines before a request
            pos += 1
        if pos > start:
            out.append(data[start:pos])
        if pos == len(data):
            return pos
        line_end = data.find(b"\n", pos)
        if line_end >= 0 and not _VERSIONED.search(data, pos, line_end):
            self.state = _RAW  # not an HTTP/1.x request line: nothing to follow
            out.append(data[pos:])
            return len(data)
        found = _HEAD_END.search(data, pos)
        if found is None:
            if len(data) - pos > MAX_HEAD:
                self.state = _RAW
                out.append(data[pos:])
                return len(data)
            self.pending = data[pos:]
            return len(data)
        head = data[pos:found.end()]
        out.append(self._fixed_head(head))
        return found.end()

    def _fixed_head(self, head: bytes) -> bytes:
        """The head with its request line fixed; the next state from its framing headers."""
        line_end = head.index(b"\n")
        line = head[:line_end].rstrip(b"\r")
        fixed = fix_request_line(line)
        self.state = self._framing(line, head[line_end + 1:])
        if fixed is line:
            return head
        return fixed + head[len(line):]

    def _framing(self, line: bytes, fields: bytes) -> int:
        lengths: list[bytes] = []
        codings: list[bytes] = []
        upgrade = False
        for raw in fields.split(b"\n"):
            if not raw.strip(b"\r"):
                continue
            if raw[:1] in (b" ", b"\t"):  # obsolete line folding: not followed
                return _RAW
            name, colon, value = raw.partition(b":")
            if not colon:
                return _RAW
            key = name.strip().lower()
            if key == b"content-length":
                lengths.append(value.strip())
            elif key == b"transfer-encoding":
                codings += [c.strip().lower() for c in value.split(b",") if c.strip()]
            elif key == b"upgrade":
                upgrade = True
        if upgrade or line.startswith(b"CONNECT "):
            return _RAW
        if codings:
            if codings[-1] != b"chunked" or lengths:
                return _RAW
            return _SIZE
        if not lengths:
            return _HEAD
        if len(set(lengths)) != 1 or not lengths[0].isdigit():
            return _RAW
        self.remaining = int(lengths[0])
        return _BODY if self.remaining else _HEAD

    def _chunk_line(self, data: bytes, pos: int, out: list[bytes]) -> int:
        """A chunk-size line, the line ending after a chunk, or a trailer line."""
        nl = data.find(b"\n", pos)
        if nl < 0:
            if len(data) - pos > _MAX_LINE:
                self.state = _RAW
                out.append(data[pos:])
            else:
                self.pending = data[pos:]
            return len(data)
        line = data[pos:nl].rstrip(b"\r")
        out.append(data[pos:nl + 1])
        if self.state == _DATA_END:
            self.state = _SIZE if not line else _RAW
        elif self.state == _TRAILER:
            if not line:
                self.state = _HEAD
        else:
            size = line.split(b";", 1)[0].strip()
            if not _HEX.fullmatch(size):
                self.state = _RAW
            else:
                self.remaining = int(size, 16)
                self.state = _DATA if self.remaining else _TRAILER
        return nl + 1


def proxy_header(client: socket.socket) -> bytes:
    """The PROXY protocol v1 line naming the client and the address it connected to."""
    try:
        peer = client.getpeername()
        local = client.getsockname()
    except OSError:
        return b"PROXY UNKNOWN\r\n"
    family = "TCP6" if client.family == socket.AF_INET6 else "TCP4"
    return f"PROXY {family} {peer[0]} {local[0]} {peer[1]} {local[1]}\r\n".encode()


_UNAVAILABLE_BODY = json.dumps(envelope(503, "workbench_unavailable_exception",
                                        "the workbench API is not answering"),
                               separators=(",", ":")).encode()
# What a client gets when nginx does not answer the door: the nginx front's own 503 envelope.
UNAVAILABLE = (b"HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json; "
               b"charset=UTF-8\r\ncontent-length: %d\r\nconnection: close\r\n\r\n%s"
               % (len(_UNAVAILABLE_BODY), _UNAVAILABLE_BODY))


class _Upstream(asyncio.Protocol):
    """nginx's side of one relayed connection: its bytes go to the client unchanged."""

    def __init__(self, client: _Client) -> None:
        self.client = client

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)

    def data_received(self, data: bytes) -> None:
        self.client.transport.write(data)

    def eof_received(self) -> bool:
        self.client.transport.close()  # after what is buffered is sent
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        self.client.transport.close()

    def pause_writing(self) -> None:
        self.client.transport.pause_reading()

    def resume_writing(self) -> None:
        self.client.transport.resume_reading()


class _Client(asyncio.Protocol):
    """The client's side: its bytes pass the framer, then go to nginx."""

    def __init__(self, upstream_path: str) -> None:
        self.upstream_path = upstream_path
        self.framer = Framer()
        self.upstream: asyncio.Transport | None = None
        self.early: list[bytes] = []
        self.closed = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # uvloop's are not subclasses
        sock = transport.get_extra_info("socket")
        self.early.append(proxy_header(sock))
        asyncio.get_running_loop().create_task(self._connect())

    async def _connect(self) -> None:
        loop = asyncio.get_running_loop()
        try:
            upstream, _ = await loop.create_unix_connection(
                lambda: _Upstream(self), self.upstream_path)
        except OSError as exc:
            log.warning("the front behind the door is not answering: %s", exc)
            self.transport.write(UNAVAILABLE)
            self.transport.close()
            return
        if self.closed:
            upstream.close()
            return
        self.upstream = cast(asyncio.Transport, upstream)
        self.upstream.write(b"".join(self.early))
        self.early = []

    def data_received(self, data: bytes) -> None:
        out = self.framer.feed(data)
        if not out:
            return
        if self.upstream is None:
            self.early.append(out)
        else:
            self.upstream.write(out)

    def eof_received(self) -> bool:
        if self.upstream is not None and self.upstream.can_write_eof():
            self.upstream.write_eof()  # the client is done sending; its answers still come
        return True

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        if self.upstream is not None:
            self.upstream.close()

    def pause_writing(self) -> None:
        if self.upstream is not None:
            self.upstream.pause_reading()

    def resume_writing(self) -> None:
        if self.upstream is not None:
            self.upstream.resume_reading()


def listening_socket(host: str, port: int) -> socket.socket:
    """The public socket, bound by ``serve`` and shared by the door processes it starts."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    sock.listen(4096)
    return sock


async def serve(sock: socket.socket, upstream_path: str) -> None:
    loop = asyncio.get_running_loop()
    sock.setblocking(False)
    server = await loop.create_server(lambda: _Client(upstream_path), sock=sock)
    stop = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    async with server:
        await stop.wait()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m workbench.serving.door")
    parser.add_argument("--fd", type=int, required=True, help="the listening socket")
    parser.add_argument("--upstream", required=True, help="nginx's Unix socket")
    args = parser.parse_args(argv)
    logging.basicConfig(level=os.environ.get("WORKBENCH_LOG_LEVEL", "INFO").upper(),
                        stream=sys.stderr, format="%(asctime)s %(levelname)s door: %(message)s")
    # uvloop: libuv's loop, less CPU per relayed request than asyncio's own.
    uvloop.run(serve(socket.socket(fileno=args.fd), args.upstream))
    return 0


if __name__ == "__main__":
    sys.exit(main())
