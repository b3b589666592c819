"""Running many rendered searches at once with ``_msearch`` (one request per batch, not per
query), as judgments and experiments need."""

from __future__ import annotations

import json
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

from opensearchpy import OpenSearch
from opensearchpy.exceptions import NotFoundError

from workbench.store.identity import carry
from workbench.store.search_render import RenderedSearch

BATCH = 200


@dataclass(frozen=True)
class SearchFailure:
    """One search of a batch that the cluster refused; ``reason`` is readable."""

    status: int
    reason: str


class ShardFailure(Exception):
    """A search answered from only some of its shards: its results are partial, so the job that
    relies on them fails rather than finish on part of the data."""


def check_shards(answer: dict[str, Any], index: str) -> dict[str, Any]:
    """``answer`` when every shard answered; else raises ``ShardFailure`` naming the indices
    and the first failure's reason. Every search a job relies on goes through here."""
    shards = answer.get("_shards") or {}
    if not shards.get("failed"):
        return answer
    failures = shards.get("failures") or []
    indices = sorted({str(f["index"]) for f in failures if f.get("index")}) or [index]
    reason = (failures[0].get("reason") if failures else None) or {}
    if isinstance(reason, dict):
        cause = reason.get("caused_by") or {}
        text = f"{reason.get('type', 'error')}: {reason.get('reason', '')}"
        if cause.get("reason"):
            text += f" (caused by {cause.get('type', 'error')}: {cause['reason']})"
    else:
        text = str(reason)
    raise ShardFailure(f"search on [{index}] failed on {shards['failed']} of "
                       f"{shards.get('total', '?')} shards of index(es) [{', '.join(indices)}]: "
                       f"{text}")


def missing_pipeline(client: OpenSearch, configs: list[dict[str, Any]]) -> str | None:
    """Why a job cannot run these search configurations because a named search pipeline does
    not exist, or None. Creates accept a pipeline that does not exist yet (as the plugin
    does), so jobs check it when they start: otherwise the cluster would refuse the whole
    ``_msearch`` with a reason that names no configuration."""
    for name in sorted({str(c.get("searchPipeline") or "").strip() for c in configs} - {""}):
        try:
            client.transport.perform_request("GET", f"/_search/pipeline/{quote(name, safe='')}")
        except NotFoundError:
            users = [str(c.get("id")) for c in configs
                     if str(c.get("searchPipeline") or "").strip() == name]
            return (f"Search pipeline [{name}] of search configuration [{', '.join(users)}] "
                    "does not exist in the cluster")
    return None


# What an evaluation needs of each answer: ids, scores, timing and shard failures (a fraction of
# the bytes).
IDS_ONLY = ("responses.took,responses.status,responses.error,responses.hits.hits._id,"
            "responses.hits.hits._score,responses._shards.failed,responses._shards.total,"
            "responses._shards.failures")


Answer = dict[str, Any] | SearchFailure


def msearch(client: OpenSearch, searches: list[RenderedSearch], batch: int = BATCH,
            ids_only: bool = False) -> list[Answer]:
    """Answers in the order of ``searches``. ``ids_only`` asks for hit ids and scores only (no
    ``_source``), which is all an experiment reads. A search answered by only some of its shards
    raises ``ShardFailure``."""
    results: list[Answer | None] = [None] * len(searches)
    for positions, answers in msearch_batches(client, searches, batch, ids_only):
        for position, answer in zip(positions, answers, strict=True):
            results[position] = answer
    return [r for r in results if r is not None]


def msearch_batches(client: OpenSearch, searches: list[RenderedSearch], batch: int = BATCH,
                    ids_only: bool = False) -> Iterator[tuple[list[int], list[Answer]]]:
    """(positions, answers) one ``_msearch`` at a time; the next request is already on its way
    while the caller works on the current answers. Searches sharing a search pipeline go
    together."""
    by_pipeline: dict[str | None, list[int]] = {}
    for position, search in enumerate(searches):
        by_pipeline.setdefault(search.pipeline, []).append(position)
    chunks = [(pipeline, positions[start:start + batch])
              for pipeline, positions in by_pipeline.items()
              for start in range(0, len(positions), batch)]

    def send(pipeline: str | None, chunk: list[int]) -> list[Answer]:
        params: dict[str, str] = {}
        if ids_only:
            params["filter_path"] = IDS_ONLY
        answer = client.msearch(body=msearch_body([searches[p] for p in chunk], ids_only),
                                params=params, request_timeout=300)
        return [_result(response, searches[position].index)
                for position, response in zip(chunk, answer["responses"], strict=True)]

    with ThreadPoolExecutor(1, thread_name_prefix="msearch") as pool:
        pending = [pool.submit(carry(send), *chunk) for chunk in chunks[:1]]
        for number, (_, chunk) in enumerate(chunks):
            if number + 1 < len(chunks):
                pending.append(pool.submit(carry(send), *chunks[number + 1]))
            yield chunk, pending[number].result()


def msearch_body(searches: list[RenderedSearch], ids_only: bool = False) -> str:
    """The NDJSON body of one ``_msearch``. ``_msearch`` takes no ``search_pipeline``
    parameter (3.x refuses it): each body names its pipeline instead."""
    lines = []
    for search in searches:
        body = search.body
        if ids_only:
            body = {**body, "_source": False}
        if search.pipeline and "search_pipeline" not in body:
            body = {**body, "search_pipeline": search.pipeline}
        lines.append(json.dumps({"index": search.index}))
        lines.append(json.dumps(body))
    return "\n".join(lines) + "\n"


def _result(response: dict[str, Any], index: str) -> dict[str, Any] | SearchFailure:
    if "error" not in response:
        return check_shards(response, index)
    error = response["error"]
    if isinstance(error, dict):
        cause = (error.get("root_cause") or [error])[0]
        reason = f"{cause.get('type', 'error')}: {cause.get('reason', '')}"
    else:
        reason = str(error)
    return SearchFailure(int(response.get("status", 500)), reason)
