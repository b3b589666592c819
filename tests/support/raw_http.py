"""HTTP/1.1 over a plain socket, for requests no client library will write: request lines
without a leading slash, pipelined requests, a chosen source address."""

from __future__ import annotations

import json
import socket
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit


@dataclass
class RawResponse:
    status: int
    headers: dict[str, str]  # lower-case names
    body: bytes

    @property
    def json(self) -> Any:
        return json.loads(self.body)


def request(method: str, target: str, body: Any = None,
            headers: dict[str, str] | None = None) -> bytes:
    """One request as bytes, the target written exactly as given."""
    data = b"" if body is None else (body if isinstance(body, bytes)
                                     else json.dumps(body).encode())
    lines = [f"{method} {target} HTTP/1.1", "Host: localhost"]
    lines += [f"{k}: {v}" for k, v in (headers or {}).items()]
    if body is not None:
        if not any(k.lower() == "content-type" for k in (headers or {})):
            lines.append("Content-Type: application/json")
        lines.append(f"Content-Length: {len(data)}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + data


def exchange(url: str, requests: list[bytes], source: str | None = None,
             timeout: float = 60) -> list[RawResponse]:
    """Send the requests back to back on one connection and read one response for each."""
    parts = urlsplit(url)
    sock = socket.create_connection((parts.hostname, parts.port), timeout=timeout,
                                    source_address=(source, 0) if source else None)
    with sock, sock.makefile("rb") as stream:
        sock.sendall(b"".join(requests))
        return [_response(stream, req.split(b" ", 1)[0] == b"HEAD") for req in requests]


def send(url: str, method: str, target: str, body: Any = None,
         headers: dict[str, str] | None = None) -> RawResponse:
    (response,) = exchange(url, [request(method, target, body, headers)])
    return response


def _response(stream: Any, head_only: bool) -> RawResponse:
    status_line = stream.readline()
    if not status_line:
        raise ConnectionError("the connection closed before a response")
    status = int(status_line.split(b" ", 2)[1])
    headers: dict[str, str] = {}
    while (line := stream.readline().rstrip(b"\r\n")):
        name, _, value = line.decode("latin-1").partition(":")
        headers[name.strip().lower()] = value.strip()
    if head_only or status in (204, 304) or 100 <= status < 200:
        return RawResponse(status, headers, b"")
    if headers.get("transfer-encoding", "").lower() == "chunked":
        body = b""
        while (size := int(stream.readline().split(b";")[0], 16)):
            body += stream.read(size)
            stream.readline()
        while stream.readline().rstrip(b"\r\n"):
            pass
        return RawResponse(status, headers, body)
    if "content-length" in headers:
        return RawResponse(status, headers, stream.read(int(headers["content-length"])))
    return RawResponse(status, headers, stream.read())
