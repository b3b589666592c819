"""What every SRW entity route shares: its repository, and the list / get / search / delete
handlers, job cancelling, and the checks made before a delete (docs/contract.md, "HTTP
conventions")."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from flask import Response, g
from opensearchpy.exceptions import TransportError

from workbench.api import json_body, json_response, services
from workbench.errors import BadRequest, Conflict, NotFound
from workbench.jobs.control import request_cancel
from workbench.schemas.body import load
from workbench.schemas.lists import ListBodySchema
from workbench.store.indices import EXPERIMENT_INDEX
from workbench.store.plugin_settings import Stored
from workbench.store.repository import Repository


def plugin_settings() -> Stored:
    """The settings read by the gate for this request."""
    stored: Stored = g.plugin_settings
    return stored


def repository(index: str) -> Repository:
    return Repository(services().client, index)


def list_entities(repo: Repository, query: dict[str, Any] | None = None,
                  source: Any = None) -> Response:
    """GET on a collection: paging and sort come from the body (schemas/lists.py)."""
    fields = load(ListBodySchema(), json_body(required=False) or {})
    size, (field, order) = fields["size"], fields["sort"]
    return json_response(repo.list_response(size, field, order, query, source))


def search_entities(repo: Repository, excludes: list[str] | None = None) -> Response:
    """``_search`` on the entity's index with any search DSL."""
    body = json_body(required=False) or {"query": {"match_all": {}}, "size": 10}
    if excludes and "_source" not in body:
        body["_source"] = {"excludes": excludes}
    with client_dsl():
        return json_response(repo.search(body))


# Exceptions the cluster maps to 500 although a malformed search body causes them: its parsers
# throw IllegalStateException or ClassCastException on a token they do not expect (e.g.
# ``"_source": [null]``).
CLIENT_DSL_ERRORS = ("illegal_state_exception", "class_cast_exception")


@contextmanager
def client_dsl() -> Iterator[None]:
    """Where the client's own search DSL goes to the cluster, such a 500 is the client's error:
    a 400 with the cluster's type and reason."""
    try:
        yield
    except TransportError as exc:
        error: Any = exc.info.get("error") if isinstance(exc.info, dict) else None
        kind = error.get("type") if isinstance(error, dict) else None
        if exc.status_code == 500 and kind in CLIENT_DSL_ERRORS:
            raise BadRequest(str(error.get("reason")), error_type=str(kind)) from exc
        raise


def get_entity(repo: Repository, entity_id: str, source: Any = None) -> Response:
    return json_response(repo.get_response(entity_id, source))


def delete_entity(repo: Repository, entity_id: str) -> Response:
    status, body = repo.delete(entity_id)
    return json_response(body, status)


def cancel_if_running(index: str, entity_id: str, running: tuple[str, ...]) -> str | None:
    """Ask the job of an entity whose status is one of ``running`` to stop (a Redis flag the job
    checks; Redis down is a 503). Returns the entity's status, None when it does not exist."""
    hit = repository(index).get_hit(entity_id, ["status"])
    if hit is None:
        return None
    status: str | None = hit["_source"].get("status")
    if status in running:
        request_cancel(services().redis, entity_id)
    return status


def cancel_job(index: str, entity_id: str, what: str, running: tuple[str, ...],
               id_key: str | None = None, noun: str | None = None) -> Response:
    """``POST .../{id}/_cancel``: 404 for an unknown ``what``, 409 unless its job is running;
    the job ends it ERROR (cancelled by the user) within seconds. The answer names the entity
    by ``id_key`` (default ``<what>_id``, lower case); ``noun`` is ``what`` in a sentence
    (default: lower case)."""
    status = cancel_if_running(index, entity_id, running)
    if status is None:
        raise NotFound(f"{what} not found: {entity_id}")
    if status not in running:
        raise Conflict(f"{what} [{entity_id}] is {status}; only a {' or '.join(running)} "
                       f"{noun or what.lower()} can be cancelled")
    return json_response({id_key or f"{what.lower()}_id": entity_id, "status": "CANCELLING",
                          "message": "The job stops within seconds and ends ERROR "
                                     "(cancelled by the user)"})


def refuse_if_used(field: str, entity_id: str, what: str) -> None:
    """409 when an experiment references the entity (docs/contract.md, "Delete and referential
    integrity")."""
    ids = repository(EXPERIMENT_INDEX).ids_where(field, entity_id, limit=3)
    if ids:
        raise Conflict(
            f"{what} cannot be deleted as it is currently used by experiments with ids "
            + ", ".join(ids)
        )

