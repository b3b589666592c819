"""The summary counters of an LLM judgment's metadata (docs/contract.md, "LLM judgments")."""

from __future__ import annotations

from typing import Any


def recompute(metadata: dict[str, Any], entries: list[dict[str, Any]]) -> dict[str, Any]:
    """``totalQueries`` stays; a query is successful when it has an entry in the ratings."""
    out = dict(metadata)
    total = int(out.get("totalQueries", len(entries)))
    successful = min(len(entries), total)
    out.update(totalQueries=total, successfulQueries=successful,
               failedQueries=total - successful)
    if out["failedQueries"] == 0:
        out.pop("lastFailureReason", None)
    return out
