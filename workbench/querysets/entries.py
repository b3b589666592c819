"""Query-set entries: reading what is stored (docs/contract.md, "Entries"). What clients send
is checked by workbench/schemas/query_sets.py."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from workbench.schemas.javafmt import java_string


@dataclass(frozen=True)
class QueryEntry:
    """One query of a set: its text and the custom fields (``referenceAnswer``, ...)."""

    query_text: str
    custom_fields: dict[str, str] = field(default_factory=dict)

    @property
    def reference_answer(self) -> str | None:
        return self.custom_fields.get("referenceAnswer")

    @property
    def key(self) -> str:
        """How LLM judgments name the query: the text, plus ``#<custom fields JSON>`` if any."""
        if not self.custom_fields:
            return self.query_text
        return self.query_text + "#" + json.dumps(self.custom_fields, separators=(",", ":"),
                                                  ensure_ascii=False)


def read_entries(doc: dict[str, Any]) -> list[QueryEntry]:
    """Entries of a stored query set, in order, including the legacy ``query#reference`` form."""
    out = []
    for stored in doc.get("querySetQueries") or []:
        text = str(stored.get("queryText", ""))
        if "customFields" in stored:
            custom = {k: str(v) for k, v in (stored.get("customFields") or {}).items()
                      if v is not None}
            out.append(QueryEntry(text, custom))
        else:
            out.append(_legacy(text))
    return out


def _legacy(text: str) -> QueryEntry:
    """3.1 stored ``query#reference`` (or ``query#{json}``) in one string."""
    hash_at = text.find("#")
    if hash_at < 0 or hash_at == len(text) - 1:
        return QueryEntry(text)
    query, rest = text[:hash_at], text[hash_at + 1:]
    stripped = rest.strip()
    if stripped.startswith("{"):
        try:
            parsed = json.loads(stripped)
        except ValueError:
            parsed = None
        if isinstance(parsed, dict):
            return QueryEntry(query, {k: java_string(v) for k, v in parsed.items()
                                      if v is not None})
    return QueryEntry(query, {"referenceAnswer": rest})
