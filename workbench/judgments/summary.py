"""The summary counters of an LLM judgment's metadata (docs/contract.md, "LLM judgments")."""

from __future__ import annotations

from typing import Any


def left_out(metadata: dict[str, Any], entries: list[dict[str, Any]]) -> int:
    """How many queries have no entry: a judgment made before failed queries were kept (the
    3.6 policy) left them out of ``judgmentRatings``; ``_retry`` runs them again."""
    return max(0, int(metadata.get("totalQueries") or 0) - len(entries))


def recompute(metadata: dict[str, Any], entries: list[dict[str, Any]]) -> dict[str, Any]:
    """``totalQueries`` stays; a query is failed when its entry lists ``failures``, or when it
    has no entry at all (a judgment made before failed queries were kept, which left them
    out). ``lastFailureReason`` is the reason of the last failed document that has one, the
    stored one when none has, and goes when no query failed."""
    out = dict(metadata)
    total = int(out.get("totalQueries", len(entries)))
    failed = sum(1 for entry in entries if entry.get("failures"))
    failed = min(total, failed + left_out(out, entries))
    out.update(totalQueries=total, successfulQueries=total - failed, failedQueries=failed)
    reasons = [f["reason"] for entry in entries for f in entry.get("failures") or []
               if f.get("reason")]
    if failed == 0:
        out.pop("lastFailureReason", None)
    elif reasons:
        out["lastFailureReason"] = reasons[-1]
    return out
