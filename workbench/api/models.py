"""``/_plugins/_search_relevance/models``: register, list, read, change and delete LLM models
at run time (a workbench extension; the plugin relies on ML Commons for models).

Models live in the models index, so every API process and every running worker sees a change at
once. An API key given here is stored only encrypted (WORKBENCH_SECRET_KEY) and never answered:
``apiKeySet`` says whether the model has one. Models registered in the environment are listed
too (``source: environment``) but cannot be changed here (409).

A model's endpoint is where prompts will be sent from inside the workbench's network, so it must
be one the operator trusts (``llm.endpoints``; docs/model-endpoints.md). On a secured cluster,
registering, changing and deleting a model first needs write access to the models index: a
caller without it gets the cluster's own 403 before the body is even read.
"""

from __future__ import annotations

from functools import partial
from typing import Any

from flask import Blueprint, Response

from workbench.api import caller, json_body, json_response, services
from workbench.api.entities import repository
from workbench.errors import BadRequest, Conflict, NotFound
from workbench.llm.endpoints import EndpointPolicy
from workbench.llm.registry import format_memory, place_of
from workbench.llm.runtime import stored_spec
from workbench.llm.secrets import SecretKeyMissing
from workbench.llm.spec import ModelSpec, SpecError, check_api_key, normalise, parse_spec
from workbench.schemas.body import load
from workbench.schemas.models import ModelChangesSchema, ModelSchema
from workbench.store.identity import check_can_write
from workbench.store.indices import MODELS_INDEX
from workbench.store.models import SECRET_FIELD, ModelStore, public
from workbench.store.repository import new_id, now_iso

bp = Blueprint("models", __name__, url_prefix="/models")

ENV_MODEL = ("model [{id}] is registered in the environment (WORKBENCH_MODELS / "
             "WORKBENCH_MODELS_FILE) and cannot be changed through the API; change it there, "
             "or register this model under another id")


def _store() -> ModelStore:
    return ModelStore(services().client)


def _env_spec(model_id: str) -> ModelSpec | None:
    return services().models.entry(model_id)


def _env_public(spec: ModelSpec) -> dict[str, Any]:
    return {**spec.public(), "apiKeySet": spec.api_key_env is not None, "source": "environment"}


def _validate(data: dict[str, Any]) -> tuple[ModelSpec, str | None]:
    """The model a complete body registers, and the key it gives to store (or None)."""
    policy = EndpointPolicy.from_config(services().config)
    parse = partial(parse_spec, check_endpoint=policy.check_registered)
    fields = load(ModelSchema(parse=parse, check_key=check_api_key, invalid=SpecError), data)
    return fields["spec"], fields["apiKey"]


def _may_write() -> None:
    """On a secured cluster: the caller's own 403 unless it may write the models index."""
    if caller.secured():
        check_can_write(services().client, MODELS_INDEX)


def _encrypt(api_key: str) -> str:
    try:
        return services().secret_box.encrypt(api_key.strip())
    except SecretKeyMissing as exc:
        raise BadRequest(f"Invalid model: field \"apiKey\" cannot be stored: {exc}") from None


def _document(spec: ModelSpec, token: str | None, created: dict[str, Any]) -> dict[str, Any]:
    doc = {**spec.public(), **created, "lastUpdated": now_iso()}
    if token:
        doc[SECRET_FIELD] = token
    return doc


def _changes(body: dict[str, Any], path_id: str | None = None) -> dict[str, Any]:
    """The body with canonical field names (``base_url`` -> ``endpoint``...)."""
    schema = ModelChangesSchema(normalise=lambda b: normalise(b)[0], invalid=SpecError,
                                path_id=path_id)
    return load(schema, body)


@bp.route("", methods=["PUT", "POST"])
def create_model() -> Response:
    _may_write()
    body = json_body()
    assert body is not None
    data = {k: v for k, v in _changes(body).items() if v is not None}
    data.setdefault("id", new_id())
    spec, api_key = _validate(data)
    if _env_spec(spec.id) is not None:
        raise Conflict(ENV_MODEL.format(id=spec.id))
    token = _encrypt(api_key) if api_key is not None else None
    now = now_iso()
    _store().create(_document(spec, token, {"timestamp": now, **caller.created_by()}))
    return json_response({"model_id": spec.id, "result": "created"})


@bp.get("")
def list_models() -> Response:
    env = [_env_public(spec) for spec in services().models.specs()]
    stored = [public(doc) for doc in _store().all() if _env_spec(str(doc.get("id"))) is None]
    models = env + stored
    return json_response({"total": len(models), "models": models})


@bp.get("/<entity_id>")
def get_model(entity_id: str) -> Response:
    """The model, with ``structuredOutput``: the structured-output mode its server was found
    to accept (``llm.structured``), or null before its first call."""
    spec = _env_spec(entity_id)
    if spec is not None:
        return json_response({**_env_public(spec), "structuredOutput": _learnt(spec)})
    found = _store().get(entity_id)
    if found is None:
        raise NotFound(f"model not found: {entity_id}")
    try:
        learnt = _learnt(stored_spec(found[0]))
    except SpecError:
        learnt = None  # a document no longer valid is shown as it is; it cannot be called
    return json_response({**public(found[0]), "structuredOutput": learnt})


def _learnt(spec: ModelSpec) -> dict[str, Any] | None:
    return format_memory(services().config, spec.id, place_of(spec)).recall()


@bp.put("/<entity_id>")
def update_model(entity_id: str) -> Response:
    """Fields given replace the stored ones (``null`` removes an optional one); fields left
    out are kept, the key included. A new ``provider`` replaces the whole model."""
    _may_write()
    if _env_spec(entity_id) is not None:
        raise Conflict(ENV_MODEL.format(id=entity_id))
    body = json_body()
    assert body is not None
    changes = _changes(body, path_id=entity_id)
    store = _store()
    found = store.get(entity_id)
    if found is None:
        raise NotFound(f"model not found: {entity_id}")
    doc, version = found
    kept = {k: v for k, v in doc.items()
            if k not in (SECRET_FIELD, "timestamp", "lastUpdated", "createdBy")}
    replace_all = "provider" in changes and changes["provider"] != doc.get("provider")
    data = {**({} if replace_all else kept), **changes, "id": entity_id}
    if changes.get("apiKey") is not None and "apiKeyEnv" not in changes:
        data.pop("apiKeyEnv", None)  # a stored key replaces the environment variable's name
    data = {k: v for k, v in data.items() if v is not None}  # null removes a field
    spec, api_key = _validate(data)
    token = None if replace_all else doc.get(SECRET_FIELD)
    if "apiKey" in changes or changes.get("apiKeyEnv") is not None:
        token = None  # a new key, no key, or a key from the environment instead
    if api_key is not None:
        token = _encrypt(api_key)
    created: dict[str, Any] = {k: doc[k] for k in ("timestamp", "createdBy") if k in doc}
    store.replace(_document(spec, token, created), version)
    return json_response({"model_id": entity_id, "result": "updated"})


@bp.delete("/<entity_id>")
def delete_model(entity_id: str) -> Response:
    _may_write()
    if _env_spec(entity_id) is not None:
        raise Conflict(ENV_MODEL.format(id=entity_id))
    status, answer = repository(MODELS_INDEX).delete(entity_id)
    return json_response(answer, status)
