"""THE interface of remote search configurations for the rest of the workbench: whether an id
is one (``is_remote``), loading it (``load_config``), running a batch of queries on it
(``search_remote``, what experiments and judgments call), the execute route's answer
(``execute``) and the probe a definition passes before it is stored (``probe``).

A remote's fault (down, slow, 429/5xx, an answer that does not map) never raises: it is that
query's ``RemoteFailure``, with a reason naming the configuration.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from typing import Any

from workbench.errors import BadRequest, WorkbenchError
from workbench.remote import client
from workbench.remote.client import RemoteError
from workbench.remote.configs import RemoteConfig, is_remote, load_config
from workbench.remote.mapping import coerce_id, resolve, show
from workbench.remote.templates import TemplateError, render
from workbench.services import Services

__all__ = ["RemoteConfig", "RemoteFailure", "RemoteSearchError", "execute", "is_remote",
           "load_config", "probe", "search_remote"]

#: the text and size of the search a definition is probed with
PROBE_TEXT = "sample query"
PROBE_SIZE = 1


@dataclass(frozen=True)
class RemoteFailure:
    """One query's search failed; ``reason`` names the configuration and what happened, e.g.
    ``remote search configuration [id]: HTTP 503 from GET http://h:p/...: <answer>``."""

    reason: str


class RemoteSearchError(WorkbenchError):
    """The execute route's answer when the remote failed (502, in the error envelope)."""

    status = 502
    error_type = "remote_search_exception"


def _one(svc: Services, config: RemoteConfig, query_text: str,
         custom_fields: dict[str, str] | None, size: int) -> list[dict[str, Any]] | RemoteFailure:
    if config.unusable:
        return RemoteFailure(f"{config.describe()} cannot be used: {config.unusable}")
    try:
        request = render(config.query_template, config.connection_url, query_text, size,
                         custom_fields, config.preset)
        return client.search(svc, config, request, size).hits
    except TemplateError as exc:
        return RemoteFailure(f"{config.describe()}: {exc}")
    except RemoteError as exc:
        return RemoteFailure(exc.reason)


def search_remote(svc: Services, config: RemoteConfig,
                  queries: Sequence[tuple[str, dict[str, str] | None]],
                  size: int) -> list[list[dict[str, Any]] | RemoteFailure]:
    """One entry per query, in order: its hits in OpenSearch's shape (``_id``, ``_score``,
    ``_source``; rank order, at most ``size``), or its failure. Up to
    ``config.max_concurrent_requests`` searches run at once in this process (the slots hold
    the limit across processes too), each under the shared rate limit, answered from the cache
    when fresh."""
    if not queries:
        return []
    workers = max(1, min(config.max_concurrent_requests, len(queries)))
    if workers == 1:
        return [_one(svc, config, text, fields, size) for text, fields in queries]
    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="remote") as pool:
        futures = [pool.submit(_one, svc, config, text, fields, size) for text, fields in queries]
        return [future.result() for future in futures]


def execute(svc: Services, config: RemoteConfig, query_text: str, size: int,
            query_override: str | dict[str, Any] | None = None) -> dict[str, Any]:
    """``POST remote_search/execute``: one search as OpenSearch answers one. ``query_override``
    replaces the stored queryTemplate for this call. A bad template is a 400, a remote's
    failure a 502 (``RemoteSearchError``)."""
    started = time.monotonic()
    if query_override is not None:
        template = (json.dumps(query_override, ensure_ascii=False)
                    if isinstance(query_override, dict) else query_override)
        config = replace(config, query_template=template)
    try:
        render(config.query_template, config.connection_url, query_text, size, None,
               config.preset)
    except TemplateError as exc:
        raise BadRequest(f"query: {exc}" if query_override is not None else str(exc)) from None
    result = _one(svc, config, query_text, None, size)
    if isinstance(result, RemoteFailure):
        raise RemoteSearchError(result.reason)
    scores = [hit["_score"] for hit in result if isinstance(hit.get("_score"), (int, float))]
    return {"took": int((time.monotonic() - started) * 1000), "timed_out": False,
            "hits": {"total": {"value": len(result), "relation": "eq"},
                     "max_score": max(scores) if scores else None, "hits": result}}


def probe(svc: Services, config: RemoteConfig) -> None:
    """The definition against the live remote: the template rendered with ``PROBE_TEXT`` and
    size 1 and sent once; a 400 naming the field unless it answers JSON whose hits path is a
    list and whose first hit (if any) has an id."""
    try:
        request = render(config.query_template, config.connection_url, PROBE_TEXT, PROBE_SIZE,
                         None, config.preset)
    except TemplateError as exc:
        raise BadRequest(str(exc)) from None
    try:
        answer = client.send_once(svc.config, config, request)
    except RemoteError as exc:
        if exc.detail.startswith("connectionUrl "):
            raise BadRequest(exc.detail) from None
        if exc.detail.startswith(("could not reach", "no answer")):
            raise BadRequest(f"connectionUrl: {exc.detail}") from None
        raise BadRequest(f"connectionUrl: the probe search (the text [{PROBE_TEXT}], size "
                         f"{PROBE_SIZE}) failed: {exc.detail}") from None
    mapping = config.mapping
    found, hits = resolve(answer, mapping.hits)
    if not found or not isinstance(hits, list):
        what = "matches nothing" if not found else "does not match a list"
        raise BadRequest(f"responseTemplate.hits: the path [{show(mapping.hits)}] {what} in "
                         f"the probe answer")
    if hits:
        found, value = resolve(hits[0], mapping.id)
        if not found or coerce_id(value) is None:
            what = "matches nothing" if not found else "matches no string or number"
            raise BadRequest(f"responseTemplate.id: the path [{show(mapping.id)}] {what} in "
                             f"the first hit of the probe answer")

