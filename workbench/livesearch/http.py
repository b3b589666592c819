"""HTTP/1.1 for the live search: requests parsed and answers written on asyncio, and a pool of
kept-alive connections to one upstream (the front's cluster socket, or gunicorn's port).

Parsing is llhttp's, through httptools (the parser uvicorn uses); framing, keep-alive and the pool
are the few lines below. Not aiohttp or httpx: their clients cost more Python per request than
the whole interleaved search may spend, and this process only ever talks to two local peers that
are known to speak plain HTTP/1.1 (HAProxy and gunicorn).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import cast

import httptools

#: headers that describe one connection, never forwarded (RFC 9110, 7.6.1)
HOP_BY_HOP = frozenset({b"connection", b"keep-alive", b"proxy-connection", b"te", b"trailer",
                        b"transfer-encoding", b"upgrade", b"content-length"})

_REASONS = {200: b"OK", 400: b"Bad Request", 504: b"Gateway Timeout"}


@dataclass
class Request:
    """One request as received: method, raw target, headers in order (names lower case), body."""

    method: bytes
    target: bytes
    headers: list[tuple[bytes, bytes]]
    body: bytes
    keep_alive: bool = True

    def header(self, name: bytes) -> bytes | None:
        """The first value of header ``name`` (lower case), or None."""
        for key, value in self.headers:
            if key == name:
                return value
        return None


def answer(status: int, headers: Iterable[tuple[bytes, bytes]], body: bytes,
           reason: bytes | None = None) -> bytes:
    """A whole HTTP/1.1 answer with a ``Content-Length``."""
    lines = [b"HTTP/1.1 %d %s" % (status, reason or _REASONS.get(status, b"Unknown"))]
    lines += [name + b": " + value for name, value in headers]
    lines.append(b"content-length: %d" % len(body))
    return b"\r\n".join(lines) + b"\r\n\r\n" + body


@dataclass
class Response:
    """An upstream's answer, read whole."""

    status: int = 0
    reason: bytes = b""
    headers: list[tuple[bytes, bytes]] = field(default_factory=list)
    body: bytes = b""


class UpstreamError(Exception):
    """The upstream could not be reached, or closed the connection without a whole answer."""


class _Reader(asyncio.Protocol):
    """One kept-alive connection to the upstream: writes a request, parses its answer."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.parser = httptools.HttpResponseParser(self)
        self.waiter: asyncio.Future[Response] | None = None
        self.response = Response()
        self._body: list[bytes] = []
        self.reusable = True

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # uvloop's is not a subclass

    def connection_lost(self, exc: Exception | None) -> None:
        self.transport = None
        self.reusable = False
        if self.waiter is not None and not self.waiter.done():
            self.waiter.set_exception(UpstreamError("the connection closed before the answer"))

    def data_received(self, data: bytes) -> None:
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserError as exc:
            self.reusable = False
            if self.waiter is not None and not self.waiter.done():
                self.waiter.set_exception(UpstreamError(f"unreadable answer: {exc}"))
            if self.transport is not None:
                self.transport.close()

    # httptools callbacks
    def on_header(self, name: bytes, value: bytes) -> None:
        self.response.headers.append((name.lower(), value))

    def on_headers_complete(self) -> None:
        self.response.status = self.parser.get_status_code()

    def on_status(self, reason: bytes) -> None:
        self.response.reason += reason

    def on_body(self, body: bytes) -> None:
        self._body.append(body)

    def on_message_complete(self) -> None:
        self.response.body = b"".join(self._body)
        self.reusable = self.parser.should_keep_alive()
        if self.waiter is not None and not self.waiter.done():
            self.waiter.set_result(self.response)

    def send(self, data: bytes) -> asyncio.Future[Response]:
        assert self.transport is not None
        self.response, self._body = Response(), []
        self.waiter = asyncio.get_running_loop().create_future()
        self.transport.write(data)
        return self.waiter


class Pool:
    """Kept-alive connections to one upstream; ``connect`` opens a new one. A connection is
    reused only after a whole answer that allowed it; one that failed is dropped."""

    def __init__(self, connect: Callable[[Callable[[], _Reader]], object], host: bytes) -> None:
        self._connect = connect
        self._idle: list[_Reader] = []
        self.host = host

    async def _open(self) -> tuple[_Reader, bool]:
        """A connection, and whether it was kept from an earlier request."""
        while self._idle:
            reader = self._idle.pop()
            if reader.reusable and reader.transport is not None \
                    and not reader.transport.is_closing():
                return reader, True
        _, reader = await self._connect(_Reader)  # type: ignore[misc]
        assert isinstance(reader, _Reader)
        return reader, False

    async def request(self, method: bytes, target: bytes,
                      headers: Iterable[tuple[bytes, bytes]], body: bytes) -> Response:
        """Send one request and read its whole answer; ``UpstreamError`` when that failed."""
        head = [b"%s %s HTTP/1.1" % (method, target), b"host: " + self.host]
        head += [name + b": " + value for name, value in headers]
        head.append(b"content-length: %d" % len(body))
        data = b"\r\n".join(head) + b"\r\n\r\n" + body
        for attempt in (1, 2):
            try:
                reader, kept = await self._open()
            except OSError as exc:
                raise UpstreamError(f"cannot connect: {exc}") from None
            answered = False
            try:
                response = await reader.send(data)
                answered = True
                break
            except UpstreamError:
                # A kept connection the upstream closed as it was reused (an idle timeout): the
                # request never reached it, so it is sent once more on a new connection.
                if not kept or attempt == 2 or reader.response.status:
                    raise
            finally:
                if not answered and reader.transport is not None:
                    reader.transport.close()  # failed or cancelled (a timeout): never reused
        if reader.reusable:
            self._idle.append(reader)
        elif reader.transport is not None:
            reader.transport.close()
        return response

    def close(self) -> None:
        for reader in self._idle:
            if reader.transport is not None:
                reader.transport.close()
        self._idle.clear()


def unix_pool(path: str, host: bytes) -> Pool:
    """A pool of connections to the Unix socket ``path``."""
    loop_connect = asyncio.get_event_loop
    return Pool(lambda factory: loop_connect().create_unix_connection(factory, path), host)


def tcp_pool(host: str, port: int) -> Pool:
    """A pool of connections to ``host:port``."""
    loop_connect = asyncio.get_event_loop
    return Pool(lambda factory: loop_connect().create_connection(factory, host, port),
                f"{host}:{port}".encode())
