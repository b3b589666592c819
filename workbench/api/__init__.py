"""HTTP layer: one blueprint per entity, plus the catch-all pass-through registered last."""

from __future__ import annotations

import json
from typing import Any

from flask import Response, current_app, has_request_context, request

from workbench import filter_path
from workbench.errors import ParseError
from workbench.services import Services

SRW_PREFIX = "/_plugins/_search_relevance"
JSON_TYPE = "application/json; charset=UTF-8"


def services() -> Services:
    """The current process's Services (set up by ``create_app``)."""
    svc: Services = current_app.extensions["workbench"]
    return svc


def json_response(body: Any, status: int = 200) -> Response:
    """A JSON answer with OpenSearch's content type, honouring ``filter_path`` and ``pretty``."""
    indent = None
    if has_request_context():
        body = filter_path.apply(body, request.args.get("filter_path"))
        if request.args.get("pretty") not in (None, "false"):
            indent = 2
    separators = (",", " : ") if indent else (",", ":")
    text = json.dumps(body, ensure_ascii=False, indent=indent, separators=separators)
    return Response(text + ("\n" if indent else ""), status=status, content_type=JSON_TYPE)


def json_body(required: bool = True) -> dict[str, Any] | None:
    """The request's JSON object (or the ``source`` query parameter, as OpenSearch allows).

    A missing body is None when not required; anything but a JSON object is a 400.
    """
    raw: bytes | str = request.get_data(cache=True)
    if not raw and request.args.get("source"):
        raw = request.args["source"]
    if not raw or not raw.strip():
        if required:
            raise ParseError("request body is required")
        return None
    try:
        body = json.loads(raw)
    except (ValueError, UnicodeDecodeError) as exc:
        raise ParseError(f"Failed to parse request body: {exc}") from None
    if not isinstance(body, dict):
        raise ParseError("request body must be a JSON object")
    return body
