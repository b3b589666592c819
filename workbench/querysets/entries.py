"""Query-set entries: parsing what clients send (§5.2) and reading what is stored (§4.1)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from workbench.errors import BadRequest
from workbench.schemas import request_json
from workbench.schemas.javafmt import java_string
from workbench.schemas.text import query_set_key_error, query_set_value_error

FIELD = "querySetQueries"


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


def _as_list(raw: Any) -> list[Any]:
    """Dashboards may send the queries as one string: a JSON array, NDJSON, or one per line.
    Such a string must hold at least one query (a blank one is not an empty set)."""
    if isinstance(raw, list):
        return raw
    if isinstance(raw, str):
        text = raw.strip()
        if not text:
            raise BadRequest("querySetQueries must hold at least one query, got an empty string")
        if text.startswith("["):
            try:
                parsed = request_json.loads(text, FIELD)
            except ValueError:
                raise BadRequest("querySetQueries is not a valid JSON array") from None
            if isinstance(parsed, list):
                return parsed
        items: list[Any] = []
        for number, line in enumerate(raw.splitlines(), start=1):
            line = line.strip()
            if not line:
                continue
            if line.startswith("{"):
                try:
                    items.append(request_json.loads(line, f"{FIELD}[{len(items)}]"))
                except ValueError:
                    raise BadRequest(f"querySetQueries line {number} is not valid JSON") from None
            else:
                items.append({"queryText": line})
        return items
    raise BadRequest("querySetQueries must be a list of query objects")


def parse_manual(raw: Any, maximum: int) -> list[dict[str, Any]]:
    """Validate the PUT body's ``querySetQueries`` and return the entries to store.

    Raises ``QuerySetLimitExceeded`` (403) when there are more than ``maximum`` entries.
    """
    if raw is None:
        raise BadRequest("querySetQueries is required")
    items = _as_list(raw)
    if len(items) > maximum:
        raise QuerySetLimitExceeded()
    entries = []
    for item in items:
        if item is None:
            raise BadRequest("Query object cannot be null")
        if isinstance(item, str):
            item = {"queryText": item}
        if not isinstance(item, dict):
            raise BadRequest("Query object must be a JSON object with queryText")
        if item.get("queryText") is None:
            raise BadRequest("queryText is required")
        query_text = java_string(item["queryText"])
        error = query_set_value_error(query_text)
        if error:
            raise BadRequest(f"Invalid queryText: {error}")
        custom: dict[str, str] = {}
        for key, value in item.items():
            if key == "queryText" or value is None:
                continue
            text = java_string(value)
            key_error = query_set_key_error(key)
            if key_error:
                raise BadRequest(f"Invalid field name '{key}': {key_error}")
            if text:
                value_error = query_set_value_error(text)
                if value_error:
                    raise BadRequest(f"Invalid value for field '{key}': {value_error}")
            custom[key] = text
        entries.append({"queryText": query_text, "customFields": custom})
    return entries


class QuerySetLimitExceeded(BadRequest):
    status = 403
    error_type = "search_relevance_exception"

    def __init__(self) -> None:
        super().__init__("Query Set Limit Exceeded.")


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
