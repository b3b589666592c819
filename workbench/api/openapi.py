"""``GET /_plugins/_search_relevance/_openapi``: the OpenAPI document of every route the
workbench answers itself (``openapi.yaml``, next to this module).

Why this path: the workbench owns the whole ``/_plugins/_search_relevance`` prefix (no path under
it ever reaches the cluster), and a leading underscore is how OpenSearch names endpoints
(``_search``, ``_evaluate``), so it can be neither an entity collection nor a node id of the
stats routes. It is served without the SRW gate (its own blueprint, not a child of ``srw``): it
needs no cluster call and no caller identity, so tools can load it while the cluster is down or
the workbench is disabled, and it holds nothing the repository does not publish.
"""

from __future__ import annotations

import functools
from importlib import resources
from typing import Any

import yaml
from flask import Blueprint, Response, request

from workbench.api import SRW_PREFIX, json_response
from workbench.errors import BadRequest

bp = Blueprint("openapi", __name__)

PATH = SRW_PREFIX + "/_openapi"
YAML_TYPE = "application/yaml; charset=UTF-8"


@functools.cache
def document_text() -> str:
    """The document as kept next to the code (YAML)."""
    return resources.files("workbench.api").joinpath("openapi.yaml").read_text("utf-8")


@functools.cache
def document() -> dict[str, Any]:
    """The document as a JSON-ready dict (YAML anchors expanded, ``x-shared`` left out)."""
    loaded: dict[str, Any] = yaml.safe_load(document_text())
    return {key: value for key, value in loaded.items() if key != "x-shared"}


@bp.get(PATH)
def openapi_document() -> Response:
    fmt = request.args.get("format", "json")
    if fmt == "yaml":
        return Response(document_text(), content_type=YAML_TYPE)
    if fmt != "json":
        raise BadRequest(f"format must be json or yaml, got: {fmt}")
    return json_response(document())
