"""Structured output that degrades by dialect: the formats a call tries, best first.

1. ``json_schema`` (OpenAI's structured outputs; vLLM, Ollama and LM Studio accept it too);
2. ``json_object`` with the same schema under ``schema`` (llama.cpp's Python server, which
   refuses ``json_schema`` but constrains its sampling with a grammar made from the schema);
3. no ``response_format`` at all: the prompt's own JSON instructions (any chat model).

A server that refuses a format (``base.FormatRefused``) costs one quick refused call; the next
rung is tried at once, never the same one again. An unusable answer or any other failure goes
straight to the plain rung, as the plugin falls back (``Steps.to_plain``).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

Format = dict[str, Any] | None


def ladder(json_schema: dict[str, Any]) -> list[Format]:
    """The formats to try for a ``{"type": "json_schema", "json_schema": {"schema": ...}}``
    request, best first; the last is None (no format)."""
    schema = (json_schema.get("json_schema") or {}).get("schema")
    rungs: list[Format] = [json_schema]
    if isinstance(schema, dict):
        rungs.append({"type": "json_object", "schema": schema})
    rungs.append(None)
    return rungs


def mode(form: Format) -> str:
    """The name of a rung: ``json_schema``, ``json_object`` or ``plain``."""
    return "plain" if form is None else str(form.get("type"))


class Steps:
    """One call's way down the ladder: iterating gives each rung to ask, at most once; after a
    refusal the next rung comes, after ``to_plain`` only the plain one (if not asked yet)."""

    def __init__(self, json_schema: dict[str, Any]) -> None:
        self.rungs = ladder(json_schema)
        self._next = 0

    def __iter__(self) -> Iterator[Format]:
        while self._next < len(self.rungs):
            self._next += 1
            yield self.rungs[self._next - 1]

    def to_plain(self) -> None:
        """Skip to the plain rung: the failure was not the format's."""
        self._next = max(self._next, len(self.rungs) - 1)
