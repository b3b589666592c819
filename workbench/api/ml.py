"""``_plugins/_ml/models/_search`` and ``.../{id}/_predict``: what Dashboards asks ML Commons.

Models registered with the workbench (in the environment and, read as the caller, through the
models route) are listed with the cluster's ML Commons models (or alone, when the cluster has no
ML Commons), shaped as ML Commons model documents. Dashboards' prompt validation calls
``_predict`` on the chosen model: for a workbench model the workbench calls the model itself and
answers in ML Commons' shape (its body: schemas/ml_predict.py); any other id goes to the
cluster.
"""

from __future__ import annotations

import json
from typing import Any

from flask import Blueprint, Response, request

from workbench.api import caller, check_output_flags, json_body, json_response, services
from workbench.api.deadlines import sync_deadline
from workbench.api.proxy import forward
from workbench.errors import BadRequest, WorkbenchError
from workbench.llm.base import ChatRequest, LLMError, ModelUnusable
from workbench.llm.registry import ml_models_search_response
from workbench.schemas.body import load
from workbench.schemas.ml_predict import PredictSchema
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


class RemoteServiceError(WorkbenchError):
    """The model's provider refused or failed the call, as ML Commons reports it."""

    status = 502
    error_type = "status_exception"


@bp.route("/_plugins/_ml/models/<model_id>/_predict", methods=["POST"])
def predict(model_id: str) -> Response:
    try:
        model = services().models.get(model_id)
    except ModelUnusable as exc:  # a stored model that cannot be built (bad key, bad fields)
        raise BadRequest(str(exc)) from None
    if model is None:  # an ML Commons model of the cluster
        return forward(request, body_bytes=request.get_data())
    prompt = load(PredictSchema(), json_body() or {})["parameters"]
    chat = ChatRequest(prompt.system, prompt.user)
    try:
        with sync_deadline("_predict"):
            answer = model.chat(chat)
    except ModelUnusable as exc:  # the model's own set-up: nothing reached the provider
        raise BadRequest(str(exc)) from None
    except LLMError as exc:
        status = exc.status if exc.status is not None and 400 <= exc.status < 500 else 502
        raise RemoteServiceError(f"Error from remote service: {exc.reason}", status) from None
    return json_response({"inference_results": [{
        "output": [{"name": "response", "result": answer.text,
                    "dataAsMap": {"response": answer.text}}],
        "status_code": 200,
    }]})

