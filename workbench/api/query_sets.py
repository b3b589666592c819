"""Query sets: ``PUT`` (manual, or generated from an index's documents by a job:
workbench/querygen), ``POST`` (sampled from UBI), list, get, ``_search``, delete."""

from __future__ import annotations

from typing import Any

from flask import Blueprint, Response

from workbench.api import caller, json_body, json_response, services
from workbench.api.creates import GENERATED_QUERY_SET, QUERY_SET, Create
from workbench.api.deadlines import sync_deadline
from workbench.api.entities import (
    cancel_if_running,
    cancel_job,
    delete_entity,
    get_entity,
    list_entities,
    plugin_settings,
    refuse_if_used,
    repository,
    search_entities,
)
from workbench.api.judgment_estimate import price_of
from workbench.errors import BadRequest, Conflict
from workbench.jobs.base import JobFailed
from workbench.judges.base import OptionError
from workbench.judges.registry import BrokenJudge, UnknownJudge
from workbench.llm.base import LLMError
from workbench.querygen import filter as consistency
from workbench.querygen.job import check_source, estimate, new_generated_set
from workbench.querysets import sampling
from workbench.schemas.body import load
from workbench.schemas.query_sets import (
    GeneratedQuerySetSchema,
    GenerationRules,
    ManualQuerySetSchema,
    SampledQuerySetSchema,
    is_generated,
)
from workbench.store.indices import QUERY_SET_INDEX
from workbench.store.repository import now_iso

INDEX = QUERY_SET_INDEX
RUNNING = ("PROCESSING",)

bp = Blueprint("query_sets", __name__, url_prefix="/query_sets")


def _store(create: Create, body: dict[str, Any], fields: dict[str, Any],
           entries: list[dict[str, Any]], kind: str) -> Response:
    doc = {
        "id": create.id,
        "name": fields["name"],
        "description": fields["description"],
        "sampling": fields["sampling"],
        "timestamp": now_iso(),
        "querySetQueries": entries,
        "type": kind,
    }
    result = create.store(repository(INDEX), doc, body)
    return create.answer({"query_set_id": doc["id"],
                          "query_set_result": str(result["result"]).upper()})


def _maximum() -> int:
    maximum: int = plugin_settings().value("query_set.maximum")
    return maximum


@bp.put("")
def put_query_set() -> Response:
    body = json_body()
    assert body is not None
    if is_generated(body):
        return _generate(body)
    create = Create(QUERY_SET)
    fields = load(ManualQuerySetSchema(maximum=_maximum()), body)
    return _store(create, body, fields, fields["querySetQueries"], "manual_query_set")


def _filter_judge(spec: dict[str, Any], model_id: str | None) -> object:
    """The consistency filter's judge, built as the job will build it; a 400 naming
    ``filter`` for a judge unknown or options it refuses."""
    try:
        return consistency.build(spec, model_id)
    except (UnknownJudge, OptionError, BrokenJudge) as exc:
        raise BadRequest(f"filter: {exc}") from None


def _generated_fields(body: dict[str, Any]) -> dict[str, Any]:
    """A generated set's body, checked (the index and its context fields must exist)."""
    rules = GenerationRules(price_of=price_of, judge=_filter_judge)
    fields = load(GeneratedQuerySetSchema(maximum=_maximum(), rules=rules), body)
    # the job reads the index later as the service identity: the caller must be able to now
    caller.refuse_unless_searchable([], [fields["index"]])
    check_source(services().client, fields["index"], fields["contextFields"],
                 fields["stratifyField"])
    return fields


def _generate(body: dict[str, Any]) -> Response:
    """A generated set: checked, stored PROCESSING with no queries, and its job queued
    (docs/cold-start.md)."""
    create = Create(GENERATED_QUERY_SET)
    fields = _generated_fields(body)
    doc = new_generated_set(create.id, fields)
    doc.update(caller.created_by())
    result = create.store(repository(INDEX), doc, body)  # and queues its job
    return create.answer({"query_set_id": doc["id"],
                          "query_set_result": str(result["result"]).upper()})


@bp.post("/_estimate")
def estimate_query_set() -> Response:
    """The calls, tokens and cost of a generated set before it is created: the body of the
    ``PUT``, checked by the same code (same messages); nothing is stored, no model is called
    (as ``judgments/_estimate``)."""
    body = json_body()
    assert body is not None
    if not is_generated(body):
        raise BadRequest("sampling must be one of [llm_random, llm_generated, reference_random] "
                         f"to estimate a query set, got: {body.get('sampling')}")
    fields = _generated_fields(body)
    try:
        with sync_deadline("query_sets/_estimate"):
            return json_response(estimate(services(), new_generated_set("_estimate", fields)))
    except (JobFailed, LLMError) as exc:  # what would end the job ERROR before any call
        raise BadRequest(str(exc)) from None


@bp.post("")
def post_query_set() -> Response:
    body = json_body()
    assert body is not None
    create = Create(QUERY_SET)
    fields = load(SampledQuerySetSchema(maximum=_maximum()), body)
    client = services().client
    index, size, sampler = fields["ubiQueriesIndex"], fields["querySetSize"], fields["sampling"]
    if not sampling.index_is_usable(client, index):
        raise Conflict("UBI queries index does not exist")
    if sampler == "topn":
        queries = sampling.topn(client, index, size)
    elif sampler == "random":
        queries = sampling.random_sample(client, index, size)
    else:
        queries = sampling.pptss(client, index, size)
    entries = [{"queryText": q, "customFields": {}} for q in queries]
    return _store(create, body, fields, entries, "ubi_query_set")


@bp.get("")
def list_query_sets() -> Response:
    return list_entities(repository(INDEX))


@bp.route("/_search", methods=["GET", "POST"])
def search_query_sets() -> Response:
    return search_entities(repository(INDEX))


@bp.get("/<entity_id>")
def get_query_set(entity_id: str) -> Response:
    return get_entity(repository(INDEX), entity_id)


@bp.delete("/<entity_id>")
def delete_query_set(entity_id: str) -> Response:
    refuse_if_used("querySetId", entity_id, "query set")
    cancel_if_running(INDEX, entity_id, RUNNING)  # a set being generated: its job stops
    return delete_entity(repository(INDEX), entity_id)


@bp.post("/<entity_id>/_cancel")
def cancel_query_set(entity_id: str) -> Response:
    return cancel_job(INDEX, entity_id, "QuerySet", RUNNING, id_key="query_set_id",
                      noun="query set")
