"""Rendering and running an experiment's searches in ``_msearch`` batches."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from workbench.errors import WorkbenchError
from workbench.experiments.context import RunContext
from workbench.jobs.base import JobFailed
from workbench.querysets.entries import QueryEntry
from workbench.store.search import SearchFailure, msearch_batches
from workbench.store.search_render import RenderedSearch, render

Pair = tuple[QueryEntry, tuple[str, dict[str, Any]]]  # (query, (configuration id, config))
Found = tuple[list[str], int]  # (doc ids in rank order, took)


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


def stream_searches(ctx: RunContext, pairs: list[Pair]) -> Iterator[list[tuple[int, Found]]]:
    """(position, (doc ids, took)) for each (query, configuration), one ``_msearch`` batch at
    a time, so the caller can evaluate and write while the next batch is searched. Any failed
    search fails the run."""
    for positions, answers in msearch_batches(ctx.svc.client, _render(ctx, pairs),
                                              ids_only=True):
        batch = []
        for position, answer in zip(positions, answers, strict=True):
            if isinstance(answer, SearchFailure):
                entry, (config_id, _) = pairs[position]
                raise JobFailed(f"search for query [{entry.query_text}] with search "
                                f"configuration [{config_id}] failed: {answer.reason}")
            batch.append((position, (doc_ids(answer), int(answer.get("took", 0)))))
        ctx.advance(len(batch))
        ctx.check_time()
        yield batch


def run_searches(ctx: RunContext, pairs: list[Pair]) -> list[Found]:
    """(doc ids, took) for each (query, configuration), in order."""
    found: list[Found | None] = [None] * len(pairs)
    for batch in stream_searches(ctx, pairs):
        for position, result in batch:
            found[position] = result
    return [f for f in found if f is not None]
