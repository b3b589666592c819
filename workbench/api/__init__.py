"""HTTP layer: one blueprint per entity, plus the catch-all pass-through registered last."""

from __future__ import annotations

import json
from typing import Any

from flask import Response, current_app

from workbench.services import Services

SRW_PREFIX = "/_plugins/_search_relevance"
JSON_TYPE = "application/json; charset=UTF-8"


def services() -> Services:
    """The current process's Services (set up by ``create_app``)."""
    return current_app.extensions["workbench"]


def json_response(body: Any, status: int = 200) -> Response:
    """A JSON answer with OpenSearch's content type."""
    text = json.dumps(body, ensure_ascii=False, separators=(",", ":"))
    return Response(text, status=status, content_type=JSON_TYPE)
