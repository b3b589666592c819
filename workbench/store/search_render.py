"""Turn a search configuration and one query into the search the cluster runs (docs/contract.md,
"Rendering").

``render`` is the one place this happens; judgments and experiments call it for every query.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import pystache

from workbench.errors import BadRequest
from workbench.schemas import request_json

PLACEHOLDERS = ("%SearchText%", "%queryText%")

# OpenSearch renders Mustache search templates with JSON escaping of the parameters.
_renderer = pystache.Renderer(
    escape=lambda text: json.dumps(text, ensure_ascii=False)[1:-1],
    missing_tags="ignore",
)


@dataclass(frozen=True)
class RenderedSearch:
    """What to send: ``POST /<index>/_search[?search_pipeline=<pipeline>]`` with ``body``."""

    index: str
    body: dict[str, Any]
    pipeline: str | None

    def params(self) -> dict[str, str]:
        return {"search_pipeline": self.pipeline} if self.pipeline else {}


def uses_mustache(query: str) -> bool:
    return "{{" in query


#: longest Mustache tag (``{{`` to ``}}``) accepted: pystache's parser takes seconds on an
#: unclosed ``{{`` followed by a few hundred spaces
MAX_TAG_CHARS = 256


def mustache_error(query: str) -> str | None:
    """Why the query's Mustache tags cannot be rendered safely, or None (a linear scan)."""
    position = 0
    while (start := query.find("{{", position)) != -1:
        end = query.find("}}", start + 2)
        if end == -1 or end - start > MAX_TAG_CHARS:
            return (f"query has a Mustache tag at character {start} that is not closed by "
                    f"}}}} within {MAX_TAG_CHARS} characters")
        position = end + 2
    return None


def substitute(query: str, query_text: str, custom_fields: dict[str, str] | None = None) -> str:
    """Fill the placeholders: Mustache (parameters JSON-escaped) when the query has ``{{``,
    otherwise plain replacement of ``%SearchText%`` / ``%queryText%`` (not escaped, as the plugin
    does; query-set texts cannot hold quotes or backslashes)."""
    if uses_mustache(query):
        error = mustache_error(query)
        if error:
            raise BadRequest(error)
        params = {**(custom_fields or {}), "queryText": query_text}
        return str(_renderer.render(query, params))
    for placeholder in PLACEHOLDERS:
        query = query.replace(placeholder, query_text)
    return query


def render(config: dict[str, Any], query_text: str, size: int,
           custom_fields: dict[str, str] | None = None) -> RenderedSearch:
    """The search for one query: placeholders filled, parsed, ``size`` forced to ``size``."""
    text = substitute(str(config.get("query", "")), query_text, custom_fields)
    try:
        body = json.loads(text)
    except ValueError:
        raise BadRequest("Failed to build search request") from None
    if not isinstance(body, dict):
        raise BadRequest("Failed to build search request")
    body["size"] = size
    return RenderedSearch(str(config["index"]), body, config.get("searchPipeline") or None)


def query_error(query: Any, field: str = "query") -> str | None:
    """Why a configuration's ``query`` cannot be used, or None.

    It must be a string holding a JSON object once its placeholders are filled: a query that
    can never be sent is refused rather than stored. It need not use the query text (a
    ``match_all`` baseline is a fair configuration, and the plugin stores it). JSON beyond the
    limits of ``request_json`` is a ``BadRequest`` naming ``field``.
    """
    if query is None:
        return "query is required"
    if not isinstance(query, str):
        return "query must be a string holding the search body as JSON"
    if not query.strip():
        return "query cannot be empty"
    error = mustache_error(query)
    if error:
        return error
    sample = substitute(query, "sample query")
    try:
        parsed = request_json.loads(sample, field)
    except ValueError as exc:
        return f"query is not valid JSON: {exc}"
    if not isinstance(parsed, dict):
        return "query must be a JSON object (the search request body)"
    return None
