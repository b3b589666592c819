"""Rendering and running an experiment's searches in ``_msearch`` batches."""

from __future__ import annotations

from typing import Any

from workbench.errors import WorkbenchError
from workbench.experiments.context import RunContext
from workbench.jobs.base import JobFailed
from workbench.querysets.entries import QueryEntry
from workbench.store.search import SearchFailure, msearch
from workbench.store.search_render import render


def doc_ids(answer: dict[str, Any]) -> list[str]:
    """Hit ids in rank order, each once."""
    hits = (answer.get("hits") or {}).get("hits") or []  # filter_path drops empty lists
    return list(dict.fromkeys(hit["_id"] for hit in hits))


def run_searches(ctx: RunContext, pairs: list[tuple[QueryEntry, tuple[str, dict[str, Any]]]],
                 ) -> list[tuple[list[str], int]]:
    """(doc ids, took) for each (query, configuration); any failed search fails the run."""
    searches = []
    for entry, (config_id, config) in pairs:
        try:
            searches.append(render(config, entry.query_text, ctx.size, entry.custom_fields))
        except WorkbenchError as exc:
            raise JobFailed(f"{exc.reason} for query [{entry.query_text}] with search "
                            f"configuration [{config_id}]") from exc
    out = []
    answers = msearch(ctx.svc.client, searches, ids_only=True)
    for (entry, (config_id, _)), answer in zip(pairs, answers, strict=True):
        if isinstance(answer, SearchFailure):
            raise JobFailed(f"search for query [{entry.query_text}] with search configuration "
                            f"[{config_id}] failed: {answer.reason}")
        out.append((doc_ids(answer), int(answer.get("took", 0))))
    ctx.check_time()
    return out
