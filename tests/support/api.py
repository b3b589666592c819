"""The tests' client of the SRW routes: the benchmarks' raw-HTTP client
(workbench/bench/client.py) and what tests add to it."""

from __future__ import annotations

from typing import Any, Protocol

from workbench.bench.client import SRW, Api, Reply, close_connections

__all__ = ["SRW", "Api", "Reply", "SrwCaller", "close_connections", "search_configuration"]


class SrwCaller(Protocol):
    """What calls SRW routes: an ``Api``, or a test's client that acts as one user."""

    def srw(self, method: str, path: str, body: Any = None) -> Reply: ...


def search_configuration(api: SrwCaller, name: str, index: str, query: str,
                         **extra: Any) -> str:
    """PUT a search configuration (it must be a 200) and return its id."""
    reply = api.srw("PUT", "/search_configurations",
                    {"name": name, "index": index, "query": query, **extra})
    assert reply.status == 200, reply.data
    return str(reply.json["search_configuration_id"])
