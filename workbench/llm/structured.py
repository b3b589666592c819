"""Structured output that degrades by dialect: the formats a call tries, best first.

1. ``json_schema`` (OpenAI's structured outputs; vLLM, Ollama and LM Studio accept it too);
2. ``json_object`` with the same schema under ``schema`` (llama.cpp's Python server, which
   refuses ``json_schema`` but constrains its sampling with a grammar made from the schema);
3. no ``response_format`` at all: the prompt's own JSON instructions (any chat model).

A server that refuses a format (``base.FormatRefused``) costs one quick refused call; the next
rung is tried at once, never the same one again.
"""

from __future__ import annotations

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
