"""How big one judgment list may be, and which ratings the judgment index can store.

Each query entry and each rating is a nested document of the stored judgment; the judgment
index's ``index.mapping.nested_objects.limit`` (``index_mappings/judgment.json``) is set to
twice ``MAX_RATINGS`` so that a list within these bounds always indexes.
"""

from __future__ import annotations

from typing import Any

MAX_RATINGS = 500_000
# The largest finite value of the ``float`` field ratings are indexed into.
FLOAT_MAX = 3.4028235e38


def size_error(entries: list[dict[str, Any]]) -> str | None:
    """Why the list is too big to store, or None."""
    ratings = sum(len(entry.get("ratings") or []) for entry in entries)
    if ratings > MAX_RATINGS:
        return (f"judgment has {ratings} ratings; at most {MAX_RATINGS} are allowed in one "
                "judgment list")
    if len(entries) > MAX_RATINGS:
        return (f"judgment has {len(entries)} queries; at most {MAX_RATINGS} are allowed in one "
                "judgment list")
    return None
