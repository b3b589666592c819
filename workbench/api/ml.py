"""``_plugins/_ml/models/_search``: the models Dashboards may pick for LLM judgments.

Models registered with the workbench (in the environment and, read as the caller, through the
models route) are listed with the cluster's ML Commons models (or alone, when the cluster has no
ML Commons), shaped as ML Commons model documents.
"""

from __future__ import annotations

import json
from typing import Any

from flask import Blueprint, Response, request

from workbench.api import caller, check_output_flags, json_response, services
from workbench.api.proxy import forward
from workbench.llm.registry import ml_models_search_response
from workbench.store import plugins

bp = Blueprint("ml", __name__)
bp.before_request(check_output_flags)  # before the caller is authenticated, as OpenSearch
caller.install(bp)


@bp.route("/_plugins/_ml/models/_search", methods=["GET", "POST"])
def search_models() -> Response:
    svc = services()
    ours = ml_models_search_response(svc.models, with_runtime=True)
    if not plugins.has(svc.client, "opensearch-ml"):
        return json_response(ours)
    if not ours["hits"]["hits"]:
        return forward(request, body_bytes=request.get_data())
    body = request.get_data() or b'{"query":{"match_all":{}}}'
    upstream = svc.upstream.request(
        request.method, "/_plugins/_ml/models/_search",
        [(k, v) for k, v in request.headers.items()], body, len(body))
    data = upstream.read()
    upstream.release_conn()
    if upstream.status >= 300:
        return Response(data, status=upstream.status,
                        content_type=upstream.headers.get("Content-Type"))
    theirs: dict[str, Any] = json.loads(data)
    hits = theirs.setdefault("hits", {"total": {"value": 0, "relation": "eq"}, "hits": []})
    hits["hits"] = list(hits.get("hits") or []) + ours["hits"]["hits"]
    total = hits.get("total")
    if isinstance(total, dict):
        total["value"] = int(total.get("value", 0)) + len(ours["hits"]["hits"])
    return json_response(theirs)
