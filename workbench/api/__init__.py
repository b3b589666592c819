"""HTTP layer: one blueprint per entity, plus the catch-all pass-through registered last."""

from __future__ import annotations

import json
from typing import Any

from flask import Response, current_app, has_request_context, request

from workbench.api import filter_path
from workbench.errors import BadRequest, NotAcceptable, ParseError
from workbench.schemas import request_json
from workbench.services import Services

SRW_PREFIX = "/_plugins/_search_relevance"
JSON_TYPE = "application/json; charset=UTF-8"
# The body types OpenSearch reads as JSON (``application/*`` included), and those it reads that
# the workbench cannot (YAML, CBOR, Smile): both families also in their versioned form.
JSON_BODY_TYPES = {"application/json", "application/x-ndjson", "application/*",
                   "application/vnd.opensearch+json", "application/vnd.opensearch+x-ndjson"}
UNREADABLE_BODY_TYPES = {"application/yaml", "application/cbor", "application/smile",
                         "application/vnd.opensearch+yaml", "application/vnd.opensearch+cbor",
                         "application/vnd.opensearch+smile"}
# Parameters OpenSearch reads as booleans on every request, before any handler.
OUTPUT_FLAGS = ("pretty", "human", "error_trace")
#: WSGI environ key: bytes of the body ``json_body`` read into memory. The server's
#: ``post_request`` hook (serving/gunicorn_app.py) retires the worker after a large one; a
#: pass-through body is streamed, never held whole, so it is not counted.
BODY_BYTES = "workbench.body_bytes"


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


def flag(name: str, default: bool = False) -> bool:
    """A boolean query parameter as OpenSearch reads one: ``true``, ``false`` or empty (true);
    anything else is a 400."""
    raw = request.args.get(name)
    if raw is None:
        return default
    if raw in ("", "true"):
        return True
    if raw == "false":
        return False
    raise BadRequest(f"Failed to parse value [{raw}] as only [true] or [false] are allowed.")


def check_output_flags() -> None:
    """``before_request`` of every blueprint the workbench answers: OpenSearch refuses a
    non-boolean ``pretty``, ``human`` or ``error_trace`` before its handler runs (so before
    anything is created)."""
    for name in OUTPUT_FLAGS:
        flag(name)


def json_body(required: bool = True) -> dict[str, Any] | None:
    """The request's JSON object (or the ``source`` query parameter, as OpenSearch allows).

    A missing body is None when not required; a body in a content type OpenSearch would not
    read as JSON is a 406, as OpenSearch answers; anything but a JSON object is a 400, and so is
    JSON beyond the limits of ``request_json``.
    """
    raw: bytes | str = request.get_data(cache=True)
    if raw:
        request.environ[BODY_BYTES] = len(raw)
        _check_content_type()
    elif request.args.get("source"):
        raw = request.args["source"]
    if not raw or not raw.strip():
        if required:
            raise ParseError("request body is required")
        return None
    try:
        body = request_json.loads(raw)
    except (ValueError, UnicodeDecodeError) as exc:
        raise ParseError(f"Failed to parse request body: {exc}") from None
    if not isinstance(body, dict):
        raise ParseError("request body must be a JSON object")
    return body


def _check_content_type() -> None:
    header = request.headers.get("Content-Type", "")
    mimetype = request.mimetype
    if mimetype in UNREADABLE_BODY_TYPES:
        raise NotAcceptable(f"Content-Type header [{header}] is not supported by the workbench: "
                            "send the body as application/json")
    if mimetype not in JSON_BODY_TYPES:
        raise NotAcceptable(f"Content-Type header [{header}] is not supported")
