"""Rendering and running an experiment's searches: a local configuration's in ``_msearch``
batches, a remote one's through ``workbench.remote.search`` (issue 47), a chunk of queries at
a time. A local search that fails fails the run; a remote one fails only its (query,
configuration) pair, which the run records (``remote_outcome``)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from workbench.errors import WorkbenchError
from workbench.experiments.context import RunContext
from workbench.jobs.base import JobFailed
from workbench.querysets.entries import QueryEntry
from workbench.remote.search import RemoteFailure, search_remote
from workbench.store.search import SearchFailure, msearch_batches
from workbench.store.search_render import RenderedSearch, render

Pair = tuple[QueryEntry, tuple[str, dict[str, Any]]]  # (query, (configuration id, config))
Found = tuple[list[str], int | None]  # (doc ids in rank order, took; None from a remote)
Outcome = Found | RemoteFailure
#: queries of one remote configuration sent in one ``search_remote`` call: the run checks for a
#: cancel and reports progress between chunks
REMOTE_CHUNK = 50
#: the key of a ``results`` entry that stands for a failed remote search until the run takes
#: it out into ``remoteSearchFailures`` (``remote_outcome``); never stored
FAILED = "remoteSearchFailure"
#: failures kept on the experiment document (all are counted)
FAILURES_KEPT = 100
#: the fields that record them
REMOTE_FIELDS = ("remoteSearchFailures", "remoteSearchFailureCount")


def doc_ids(answer: dict[str, Any]) -> list[str]:
    """Hit ids in rank order, each once."""
    hits = (answer.get("hits") or {}).get("hits") or []  # filter_path drops empty lists
    return list(dict.fromkeys(hit["_id"] for hit in hits))


def _render(ctx: RunContext, pairs: list[Pair]) -> list[RenderedSearch]:
    searches = []
    for entry, (config_id, config) in pairs:
        try:
            searches.append(render(config, entry.query_text, ctx.size, entry.custom_fields))
        except WorkbenchError as exc:
            raise JobFailed(f"{exc.reason} for query [{entry.query_text}] with search "
                            f"configuration [{config_id}]") from exc
    return searches


def _local(ctx: RunContext, pairs: list[Pair], positions: list[int]
           ) -> Iterator[list[tuple[int, Outcome]]]:
    if not positions:
        return
    for found, answers in msearch_batches(ctx.svc.client,
                                          _render(ctx, [pairs[p] for p in positions]),
                                          ids_only=True):
        batch: list[tuple[int, Outcome]] = []
        for at, answer in zip(found, answers, strict=True):
            position = positions[at]
            if isinstance(answer, SearchFailure):
                entry, (config_id, _) = pairs[position]
                raise JobFailed(f"search for query [{entry.query_text}] with search "
                                f"configuration [{config_id}] failed: {answer.reason}")
            batch.append((position, (doc_ids(answer), int(answer.get("took", 0)))))
        yield batch


def _remote(ctx: RunContext, pairs: list[Pair], positions: list[int]
            ) -> Iterator[list[tuple[int, Outcome]]]:
    by_config: dict[str, list[int]] = {}
    for position in positions:
        by_config.setdefault(pairs[position][1][0], []).append(position)
    for config_id, mine in by_config.items():
        config = ctx.remote[config_id]
        for start in range(0, len(mine), REMOTE_CHUNK):
            chunk = mine[start:start + REMOTE_CHUNK]
            answers = search_remote(ctx.svc, config, [
                (pairs[p][0].query_text, pairs[p][0].custom_fields or None) for p in chunk],
                ctx.size)
            yield [(position, answer if isinstance(answer, RemoteFailure) else
                    (list(dict.fromkeys(str(hit["_id"]) for hit in answer)), None))
                   for position, answer in zip(chunk, answers, strict=True)]


def stream_searches(ctx: RunContext, pairs: list[Pair]
                    ) -> Iterator[list[tuple[int, Outcome]]]:
    """(position, (doc ids, took) or the remote failure) for each (query, configuration), a
    batch at a time (an ``_msearch``, or a chunk of one remote configuration's queries), so the
    caller can evaluate and write while the next batch is searched. A failed local search fails
    the run."""
    remote = [p for p, (_, (config_id, _)) in enumerate(pairs) if config_id in ctx.remote]
    chosen = set(remote)
    local = [p for p in range(len(pairs)) if p not in chosen]
    for source in (_local(ctx, pairs, local), _remote(ctx, pairs, remote)):
        for batch in source:
            ctx.advance(len(batch))
            ctx.check_time()
            yield batch


def run_searches(ctx: RunContext, pairs: list[Pair]) -> list[Outcome]:
    """(doc ids, took) or the remote failure for each (query, configuration), in order."""
    found: list[Outcome | None] = [None] * len(pairs)
    for batch in stream_searches(ctx, pairs):
        for position, result in batch:
            found[position] = result
    return [f for f in found if f is not None]


def failed_entry(entry: QueryEntry, config_id: str, failure: RemoteFailure) -> dict[str, Any]:
    """The stand-in ``results`` entry of a failed remote search (``FAILED``)."""
    return {"searchConfigurationId": config_id, "queryText": entry.query_text,
            FAILED: failure.reason}


def remote_outcome(ctx: RunContext, results: list[dict[str, Any]]
                   ) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The run's ``results`` without the stand-ins of failed remote searches, and the fields
    that record those on the experiment: ``remoteSearchFailures`` (the first
    ``FAILURES_KEPT``: ``{searchConfigurationId, queryText, reason}``) and
    ``remoteSearchFailureCount``, none when the run has no remote configuration. When every
    search of a remote configuration failed the run fails, naming it and its first reason."""
    if not ctx.remote:
        return results, {}
    kept, failures = [], []
    for result in results:
        if FAILED in result:
            failures.append({"searchConfigurationId": result["searchConfigurationId"],
                             "queryText": result["queryText"], "reason": result[FAILED]})
        else:
            kept.append(result)
    fields: dict[str, Any] = {"remoteSearchFailures": failures[:FAILURES_KEPT],
                              "remoteSearchFailureCount": len(failures)}
    for config_id in ctx.remote:
        theirs = [f for f in failures if f["searchConfigurationId"] == config_id]
        if ctx.entries and len(theirs) >= len(ctx.entries):
            raise JobFailed(f"every search with remote search configuration [{config_id}] "
                            f"failed: {theirs[0]['reason']}", fields)
    return kept, fields
