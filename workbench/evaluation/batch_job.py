"""A batch too large to judge while the caller waits: stored, queued, judged by a worker.

The API checks every entry first, as for a synchronous batch (searches run as the caller), then
stores what each entry asks, its searched hits included, in the batch's document
(``EVALUATE_BATCH_INDEX``, ``PROCESSING``), so the worker judges without searching anything: it
never reads an index the caller could not. The worker runs the job as the service identity, like
every job; it writes ``COMPLETED`` with the result the synchronous call would have answered, or
``ERROR`` with the reason (``evaluation.tasks.EvaluateBatchTask``).
"""

from __future__ import annotations

from dataclasses import fields
from typing import Any

from workbench.evaluation.batch import Entry, EntryFailed, located
from workbench.evaluation.batch import run as run_batch
from workbench.evaluation.request import Request
from workbench.jobs.base import JobFailed, is_transient
from workbench.judges.base import Hit, Query
from workbench.services import Services
from workbench.store.indices import EVALUATE_BATCH_INDEX
from workbench.store.repository import Repository, new_id, now_iso

TASK = "workbench.evaluation.batch"


def dump(request: Request) -> dict[str, Any]:
    """A request as JSON: every field of ``Request``, the query and hits spelled out."""
    out: dict[str, Any] = {}
    for item in fields(Request):
        value = getattr(request, item.name)
        if isinstance(value, Query):
            value = {"text": value.text, "references": list(value.references),
                     "fields": dict(value.fields)}
        elif item.name == "hits":
            value = [{"id": hit.id, "fields": dict(hit.fields)} for hit in value]
        elif isinstance(value, frozenset):
            value = sorted(value)
        out[item.name] = value
    return out


def load(stored: dict[str, Any]) -> Request:
    """The request ``dump`` wrote (fields it does not know are left out)."""
    names = {item.name for item in fields(Request)}
    values = {name: value for name, value in stored.items() if name in names}
    query = stored["query"]
    values["query"] = Query(query["text"], tuple(query.get("references") or ()),
                            query.get("fields") or {})
    values["hits"] = [Hit(hit["id"], hit["fields"]) for hit in stored["hits"]]
    values["shared"] = frozenset(stored.get("shared") or ())
    return Request(**values)


def document(entries: list[Entry], created_by: dict[str, Any],
             batch_id: str | None = None) -> dict[str, Any]:
    """The PROCESSING document of a new batch job (``batch_id``: the id the create chose,
    api/creates.py; a new one when None)."""
    return {
        "id": batch_id or new_id(), "timestamp": now_iso(), "status": "PROCESSING",
        "queries": len(entries), **created_by,
        "entries": [{"brief": entry.brief, "request": dump(entry.request),
                     # the brief shape answers each hit as given
                     "hits": entry.body["hits"] if entry.brief else None}
                    for entry in entries],
    }


def entries_of(doc: dict[str, Any]) -> list[Entry]:
    return [Entry(position, bool(item["brief"]),
                  {"hits": item["hits"]} if item["brief"] else {}, load(item["request"]))
            for position, item in enumerate(doc["entries"])]


def run(svc: Services, batch_id: str) -> None:
    """Judge a stored batch and record its result; a failing entry fails the job, naming it."""
    repo = Repository(svc.client, EVALUATE_BATCH_INDEX)
    doc = repo.get_source(batch_id)
    if doc is None or doc.get("status") != "PROCESSING":
        return  # deleted, or already finished by an earlier delivery
    try:
        result = run_batch(svc, entries_of(doc))
    except EntryFailed as exc:
        cause = exc.cause
        if is_transient(cause):
            raise cause from None  # waited out by the job, like any outage
        reason = getattr(cause, "reason", None) or str(cause)
        kept = {"usage": exc.usage} if exc.usage is not None else {}
        raise JobFailed(located(exc.position, str(reason)), kept) from cause
    repo.update_fields(batch_id, {"status": "COMPLETED", "finishedAt": now_iso(),
                                  "result": result})


def status(doc: dict[str, Any]) -> dict[str, Any]:
    """What ``GET _evaluate/_batch/{id}`` answers: status, count, times, and the result or
    the error once there is one."""
    keys = ("id", "status", "queries", "timestamp", "finishedAt", "createdBy", "error", "usage",
            "result")
    return {key: doc[key] for key in keys if key in doc}
