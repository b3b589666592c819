"""``POST /_plugins/_search_relevance/_evaluate``: score one query's result list on the spot;
``POST .../_evaluate/_batch``: many at once, as a job above ``WORKBENCH_EVALUATE_BATCH_LIMIT``
(``GET .../_evaluate/_batch/{id}`` answers its status and result; ``DELETE`` removes an ended
one).

The request shapes are in ``workbench.evaluation``: the workbench's own (``workbench_shape``)
and the retrieval-evaluation API's (``brief_shape``, a body whose ``query`` is an object or
that has ``eval``), each checked by its schema (``workbench.schemas.evaluate_workbench``,
``workbench.schemas.evaluate_brief``) and answered in its own shape; judging and scoring in
``workbench.evaluation.run``, batches in ``workbench.evaluation.batch``. A judge that cannot
judge is a 502 naming it; a bad option, an unknown judge or an unknown model is a 400.
"""

from __future__ import annotations

from typing import Any

from flask import Blueprint, Response

from workbench.api import caller, json_body, json_response, services
from workbench.api.creates import EVALUATE_BATCH, Create
from workbench.api.deadlines import sync_deadline
from workbench.errors import BadRequest, Conflict, NotFound, WorkbenchError
from workbench.evaluation import batch, batch_job, brief_shape, workbench_shape
from workbench.evaluation.run import evaluate as run
from workbench.judges.base import JudgeFailed, OptionError
from workbench.judges.registry import BrokenJudge, UnknownJudge
from workbench.llm.base import ModelUnusable
from workbench.llm.mlcommons import UnknownModel
from workbench.store.indices import EVALUATE_BATCH_INDEX
from workbench.store.repository import Repository

bp = Blueprint("evaluate", __name__)


class BadGateway(WorkbenchError):
    status = 502
    error_type = "llm_exception"


class JudgeUnavailable(WorkbenchError):
    """An installed judge that cannot be loaded: the server's setup, not the request."""

    status = 500
    error_type = "judge_exception"


def http_error(exc: Exception, where: int | None = None) -> Exception:
    """The HTTP error of a judge's or model's failure (``where``: the batch entry, named in
    the reason); anything else is returned as it is, for the app's own handlers."""
    error: WorkbenchError
    if isinstance(exc, (OptionError, UnknownJudge)):
        error = BadRequest(str(exc))
    elif isinstance(exc, BrokenJudge):
        error = JudgeUnavailable(str(exc))
    elif isinstance(exc, JudgeFailed):
        error = BadGateway(str(exc))
    elif isinstance(exc, UnknownModel):
        error = BadRequest(exc.reason)
    elif isinstance(exc, ModelUnusable):
        error = BadRequest(str(exc))
    else:
        return exc
    if where is not None:
        error.reason = batch.located(where, error.reason)
        error.args = (error.reason,)
    return error


@bp.post("/_evaluate")
def evaluate() -> Response:
    body = json_body()
    assert body is not None
    svc = services()
    brief = brief_shape.is_brief(body)
    request = brief_shape.parse(body) if brief else workbench_shape.parse(svc, body)
    try:
        with sync_deadline("_evaluate"):
            done = run(svc, request)
    except Exception as exc:
        error = http_error(exc)
        if error is exc:
            raise
        raise error from exc
    answer = brief_shape.render(done, body) if brief else workbench_shape.render(done)
    return json_response(answer)


@bp.post("/_evaluate/_batch")
def evaluate_batch() -> Response:
    body = json_body()
    assert body is not None
    svc = services()
    # a batch answered at once creates nothing: key unused, and no entity to name
    create = Create(EVALUATE_BATCH, before_write=False)
    try:
        entries = batch.parse(svc, body)
        if len(entries) > svc.config.evaluate_batch_limit:
            return queue(create, body, entries)
        with sync_deadline("_evaluate/_batch"):
            return json_response(batch.run(svc, entries))
    except batch.EntryFailed as exc:
        error = http_error(exc.cause, exc.position)
        raise error from (None if error is exc.cause else exc.cause)


def queue(create: Create, body: dict[str, Any], entries: list[batch.Entry]) -> Response:
    """Store a large batch and queue its job: 202 with its id and status."""
    doc = batch_job.document(entries, caller.created_by(), create.id)
    create.store(Repository(services().client, EVALUATE_BATCH_INDEX), doc, body)
    return create.answer({"id": doc["id"], "status": doc["status"],
                          "queries": doc["queries"]}, 202)


@bp.get("/_evaluate/_batch/<batch_id>")
def batch_status(batch_id: str) -> Response:
    doc = Repository(services().client, EVALUATE_BATCH_INDEX).get_source(batch_id)
    if doc is None:
        raise NotFound(f"Evaluation batch not found: {batch_id}")
    return json_response(batch_job.status(doc))


@bp.delete("/_evaluate/_batch/<batch_id>")
def batch_delete(batch_id: str) -> Response:
    """Delete a batch and its result once it has ended (its job would write a running one
    back): OpenSearch's delete answer, as for every SRW entity."""
    repo = Repository(services().client, EVALUATE_BATCH_INDEX)
    doc = repo.get_source(batch_id, ["status"])
    if doc is None:
        raise NotFound(f"Evaluation batch not found: {batch_id}")
    if doc.get("status") == "PROCESSING":
        raise Conflict(f"Evaluation batch [{batch_id}] is PROCESSING; delete it once it has "
                       "ended")
    status, body = repo.delete(batch_id)
    return json_response(body, status)
