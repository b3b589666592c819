"""A small raw-HTTP JSON client for the workbench's routes: exact status, headers and body, no
client magic. The benchmarks call the workbench with it and the tests use the same one
(tests/support/api.py)."""

from __future__ import annotations

import json
import weakref
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

import urllib3

SRW = "/_plugins/_search_relevance"


@dataclass
class Reply:
    status: int
    headers: Any
    data: bytes

    @property
    def json(self) -> Any:
        return json.loads(self.data)

    @property
    def text(self) -> str:
        return self.data.decode()

    @property
    def reason(self) -> str:
        """The error reason of an OpenSearch error envelope."""
        return str(self.json["error"]["reason"])

    def error(self, status: int, reason: str, error_type: str | None = None) -> None:
        """Assert this is the error envelope with that status and reason."""
        assert self.status == status, (self.status, self.data[:500])
        body = self.json
        assert body["status"] == status
        assert body["error"]["reason"] == reason, body
        assert body["error"]["root_cause"][0]["reason"] == reason
        if error_type:
            assert body["error"]["type"] == error_type


class Api:
    def __init__(self, base: str) -> None:
        self.base = base
        self.http = urllib3.PoolManager(retries=False, timeout=120)
        _CLIENTS.add(self)

    def call(self, method: str, path: str, body: Any = None, params: dict[str, Any] | None = None,
             raw: bytes | None = None, headers: dict[str, str] | None = None) -> Reply:
        url = self.base + path + ("?" + urlencode(params) if params else "")
        data = raw if raw is not None else (json.dumps(body).encode() if body is not None else None)
        hdrs = {"Content-Type": "application/json", **(headers or {})}
        response = self.http.request(method, url, body=data, headers=hdrs)
        return Reply(response.status, response.headers, response.data)

    def srw(self, method: str, path: str, body: Any = None, **kwargs: Any) -> Reply:
        return self.call(method, SRW + path, body, **kwargs)


#: every ``Api`` still referenced, so that stopping a server can close their connections to it
_CLIENTS: weakref.WeakSet[Api] = weakref.WeakSet()


def close_connections(base: str) -> None:
    """Close the idle kept-alive connections of every ``Api`` of ``base``. A server stopped
    with SIGTERM waits up to 2 s for each kept-alive connection before it exits (gunicorn's
    gthread worker, ``STOP_KEEPALIVE_LINGER``); an ``Api`` used again opens a new one."""
    for api in list(_CLIENTS):
        if api.base == base:
            api.http.clear()
