"""Where every rating came from, and an experiment's judgment lists merged as it reads them.

A rating's ``source`` names its kind and what made it: ``human`` (an ``IMPORT_JUDGMENT``: the
lists people rated), ``llm:<modelId>``, ``ubi:<clickModel>``, ``reference:<judge>``. A merged
list (``FILLED_JUDGMENT``) stores it on every rating, so a rating taken again from such a list
keeps the source it had; the counts go to the list's ``metadata.sources``.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from workbench.metrics import validate_ratings
from workbench.querysets.entries import QueryEntry

HUMAN = "human"
KINDS = ("human", "llm", "ubi", "reference")


def source_of(judgment: dict[str, Any]) -> str:
    """The source of the ratings of a judgment list that does not name one per rating."""
    kind = judgment.get("type")
    metadata = judgment.get("metadata") or {}
    if kind == "IMPORT_JUDGMENT":
        return HUMAN
    if kind == "LLM_JUDGMENT":
        return f"llm:{metadata.get('modelId')}"
    if kind == "UBI_JUDGMENT":
        return f"ubi:{metadata.get('clickModel')}"
    if kind == "REFERENCE_JUDGMENT":
        return f"reference:{metadata.get('judge')}"
    return str(kind or "unknown").lower()


def counts(rows: Iterable[dict[str, Any]]) -> dict[str, int]:
    """source -> how many ratings of ``rows`` it gave."""
    out: dict[str, int] = {}
    for row in rows:
        for rating in row.get("ratings") or []:
            source = str(rating.get("source"))
            out[source] = out.get(source, 0) + 1
    return dict(sorted(out.items()))


def is_kind(source: str, kind: str) -> bool:
    """``source`` is of ``kind`` (``human``, ``llm``, ``ubi``, ``reference``)."""
    return source == kind or source.startswith(f"{kind}:")


class Lists:
    """An experiment's judgment lists, in its order: per list the first row of each query (as a
    run looks it up, experiments/context.py), every rating carrying its source."""

    def __init__(self, judgments: list[dict[str, Any]]) -> None:
        self.rows: list[dict[str, list[dict[str, Any]]]] = []
        for judgment in judgments:
            source = source_of(judgment)
            rows: dict[str, list[dict[str, Any]]] = {}
            for row in judgment.get("judgmentRatings") or []:
                query = str(row.get("query"))
                if query in rows:
                    continue
                rows[query] = [{**r, "docId": str(r["docId"]),
                                "source": r.get("source") or source}
                               for r in row.get("ratings") or [] if r.get("docId") is not None]
            self.rows.append(rows)

    def top(self) -> float:
        """The largest rating of any list (0 when there is none)."""
        values = [float(v) for rows in self.rows for ratings in rows.values()
                  for v in validate_ratings({str(n): r.get("rating")
                                             for n, r in enumerate(ratings)}).values()]
        return max(values, default=0.0)

    def seen(self, entry: QueryEntry) -> tuple[str, dict[str, dict[str, Any]]]:
        """The ratings a run sees for ``entry`` (later lists win; the plain text is looked up
        before the key with custom fields), and the query name they are stored under: the first
        that any list uses (the plain text when none rates the query)."""
        name = None
        merged: dict[str, dict[str, Any]] = {}
        for rows in self.rows:
            for query in (entry.query_text, entry.key):
                if query in rows:
                    name = name or query
                    merged.update({r["docId"]: r for r in rows[query]})
                    break
        return name or entry.query_text, merged

    def others(self, taken: set[str]) -> list[tuple[str, dict[str, dict[str, Any]]]]:
        """The rows of queries outside ``taken`` (not in the experiment's query set), merged
        across the lists by query name, in first-seen order."""
        out: dict[str, dict[str, dict[str, Any]]] = {}
        for rows in self.rows:
            for query, ratings in rows.items():
                if query not in taken:
                    out.setdefault(query, {}).update({r["docId"]: r for r in ratings})
        return list(out.items())
