"""Remote search configurations (issue 47; the plugin's proposal, opensearch-project/
search-relevance#267 and #235): ``PUT|POST /remote_search_configurations`` creates, ``GET``
lists (newest first) and reads one, ``PUT /{id}`` replaces a definition, ``DELETE /{id}``
deletes it, and ``POST /remote_search/execute`` runs one search on it.

A definition is checked against the live remote before it is stored (``remote.search.probe``):
its connectionUrl must pass the operator's endpoint policy (``WORKBENCH_REMOTE_ENDPOINTS``,
``WORKBENCH_REMOTE_PRIVATE_ENDPOINTS``), and the probe's answer must map. The password is
write-only: stored encrypted (WORKBENCH_SECRET_KEY) and answered as ``passwordSet`` only.
"""

from __future__ import annotations

import logging
from typing import Any

import redis
from flask import Blueprint, Response

from workbench.api import caller, json_body, json_response, services
from workbench.api.creates import Create, Kind
from workbench.api.entities import (
    delete_entity,
    get_entity,
    list_entities,
    refuse_if_used,
    repository,
)
from workbench.errors import BadRequest, NotFound
from workbench.llm.secrets import SETTING as SECRET_SETTING
from workbench.llm.secrets import SecretKeyMissing, UndecryptableKey
from workbench.redis_keys import remote_cache_pattern
from workbench.remote import client, mapping, templates
from workbench.remote.configs import (
    PUBLIC_SOURCE,
    SECRET_FIELD,
    RemoteConfig,
    password_problem,
)
from workbench.remote.search import execute, load_config, probe
from workbench.schemas.body import load
from workbench.schemas.remote_search import (
    RemoteExecuteSchema,
    RemoteRules,
    RemoteSearchConfigurationSchema,
)
from workbench.store.identity import check_can_write
from workbench.store.indices import REMOTE_CONFIG_INDEX
from workbench.store.repository import now_iso

log = logging.getLogger(__name__)

INDEX = REMOTE_CONFIG_INDEX
REMOTE_SEARCH_CONFIGURATION = Kind("remote_search_configuration", "remote search configuration",
                                   "/remote_search_configurations")
#: the stored fields a body gives (``password`` aside)
FIELDS = ("name", "description", "connectionUrl", "username", "queryTemplate",
          "responseTemplate", "maxRequestsPerSecond", "maxConcurrentRequests",
          "cacheDurationMinutes", "refreshCache", "metadata")

bp = Blueprint("remote_search", __name__)


def _connection_url(url: str) -> str | None:
    return client.refusal(services().config, url, registering=True)


def _password(_: str) -> str | None:
    if not services().secret_box.configured:
        return (f"password cannot be stored: {SECRET_SETTING} is not set (set it on every API "
                "process and worker; the password is stored encrypted with it)")
    return None


def rules() -> RemoteRules:
    return RemoteRules(connection_url=_connection_url, password=_password,
                       query_template=templates.check, response_template=mapping.normalise)


def _may_write() -> None:
    """On a secured cluster: the caller's own 403 unless it may write the index."""
    if caller.secured():
        check_can_write(services().client, INDEX)


def _config(config_id: str, fields: dict[str, Any], password: str | None) -> RemoteConfig:
    return RemoteConfig(
        id=config_id, name=fields["name"], description=fields["description"],
        connection_url=fields["connectionUrl"], query_template=fields["queryTemplate"],
        mapping=mapping.parse(fields["responseTemplate"]),
        response_template=fields["responseTemplate"], username=fields["username"],
        password=password, max_requests_per_second=fields["maxRequestsPerSecond"],
        max_concurrent_requests=fields["maxConcurrentRequests"],
        cache_duration_minutes=fields["cacheDurationMinutes"],
        refresh_cache=fields["refreshCache"], metadata=fields["metadata"])


def _encrypt(password: str) -> str:
    try:
        return services().secret_box.encrypt(password)
    except SecretKeyMissing:
        raise BadRequest(_password(password) or "password cannot be stored") from None


def _document(config_id: str, fields: dict[str, Any], token: str | None,
              created: dict[str, Any]) -> dict[str, Any]:
    doc: dict[str, Any] = {"id": config_id, **{k: fields[k] for k in FIELDS}, **created,
                           "passwordSet": token is not None, "lastUpdated": now_iso()}
    if doc["username"] is None:
        del doc["username"]
    if token is not None:
        doc[SECRET_FIELD] = token
    return doc


def _forget_answers(config_id: str) -> None:
    """Drop the cached answers of a configuration that changed or went (best effort: they
    expire anyway)."""
    try:
        r = services().redis
        keys = list(r.scan_iter(match=remote_cache_pattern(config_id), count=1000))
        if keys:
            r.delete(*keys)
    except redis.RedisError as exc:
        log.warning("remote search configuration [%s]: its cached answers could not be "
                    "dropped (%s)", config_id, type(exc).__name__)


@bp.route("/remote_search_configurations", methods=["PUT", "POST"])
def create_remote_search_configuration() -> Response:
    _may_write()
    body = json_body()
    assert body is not None
    create = Create(REMOTE_SEARCH_CONFIGURATION)
    fields = load(RemoteSearchConfigurationSchema(rules()), body)
    password = fields.get("password")
    probe(services(), _config(create.id, fields, password))
    token = _encrypt(password) if password is not None else None
    doc = _document(create.id, fields, token, {"timestamp": now_iso(), **caller.created_by()})
    create.store(repository(INDEX), doc, body)
    return create.answer({"remote_search_configuration_id": create.id,
                          "remote_search_configuration_result": "CREATED"})


@bp.get("/remote_search_configurations")
def list_remote_search_configurations() -> Response:
    return list_entities(repository(INDEX), source=PUBLIC_SOURCE)


@bp.get("/remote_search_configurations/<entity_id>")
def get_remote_search_configuration(entity_id: str) -> Response:
    return get_entity(repository(INDEX), entity_id, source=PUBLIC_SOURCE)


@bp.put("/remote_search_configurations/<entity_id>")
def update_remote_search_configuration(entity_id: str) -> Response:
    """A full replace (fields left out take their defaults), but for the password: left out,
    it is kept; ``null`` or ``""`` removes it."""
    _may_write()
    body = json_body()
    assert body is not None
    repo = repository(INDEX)
    hit = repo.get_hit(entity_id)
    if hit is None:
        raise NotFound(f"Document not found: {entity_id}")
    found = hit["_source"]
    fields = load(RemoteSearchConfigurationSchema(rules()), body)
    token: str | None
    if "password" in fields:
        password = fields["password"]
        token = _encrypt(password) if password is not None else None
    else:
        token = found.get(SECRET_FIELD) or None
        try:
            password = services().secret_box.decrypt(token) if token else None
        except (SecretKeyMissing, UndecryptableKey) as exc:
            raise BadRequest(f"password: {password_problem(exc)}; give the password "
                             "again") from None
    probe(services(), _config(entity_id, fields, password))
    created = {k: found[k] for k in ("timestamp", "createdBy") if k in found}
    repo.put(_document(entity_id, fields, token, created),
             seq_no=int(hit["_seq_no"]), primary_term=int(hit["_primary_term"]))
    _forget_answers(entity_id)
    return json_response({"remote_search_configuration_id": entity_id,
                          "remote_search_configuration_result": "UPDATED"})


@bp.delete("/remote_search_configurations/<entity_id>")
def delete_remote_search_configuration(entity_id: str) -> Response:
    _may_write()
    refuse_if_used("searchConfigurationList", entity_id, "remote search configuration")
    answer = delete_entity(repository(INDEX), entity_id)
    _forget_answers(entity_id)
    return answer


@bp.post("/remote_search/execute")
def execute_remote_search() -> Response:
    body = json_body()
    assert body is not None
    fields = load(RemoteExecuteSchema(), body)
    config_id = fields["remoteConfigId"]
    config = load_config(services(), config_id)
    if config is None:
        raise NotFound(f"remote search configuration not found: {config_id}")
    return json_response(execute(services(), config, fields["queryText"], fields["size"],
                                 fields["query"]))

