"""A generated query set's job (docs/cold-start.md): sample the source index's documents, turn
each into the query a user would type to find it, and write the set ``COMPLETED``.

The set is created ``PROCESSING`` with no queries (``new_generated_set``); the job reads it
back, so a redelivered or re-queued job (the lease sweeper) does the same work again, and its
final write is conditional on the version it read, as the judgment jobs' are. Progress, cancel
and the time limit are ``jobs.control``'s; documents are the progress unit.
"""

from __future__ import annotations

import logging
from typing import Any

from opensearchpy import OpenSearch
from opensearchpy.exceptions import ConflictError, NotFoundError

from workbench.errors import BadRequest
from workbench.jobs.base import JobFailed, keep_metadata
from workbench.jobs.control import JobControl
from workbench.querygen.documents import check_context_fields, sample_documents
from workbench.querygen.errors import GenerationError
from workbench.querygen.llm import llm_queries
from workbench.querygen.queries import as_entries, dedupe
from workbench.querygen.reference import reference_queries
from workbench.schemas.query_sets import REFERENCE_SAMPLER
from workbench.services import Services
from workbench.store.indices import QUERY_SET_INDEX
from workbench.store.repository import Repository, now_iso

log = logging.getLogger(__name__)

TASK = "workbench.querygen.generate"
LLM_TYPE = "llm_query_set"
REFERENCE_TYPE = "reference_query_set"


def check_source(client: OpenSearch, index: str, context_fields: list[str],
                 stratify_field: str | None) -> None:
    """Before anything is stored: the index exists and has every context field (and the field
    to stratify by), else a 400 naming them."""
    named = [*context_fields, *([stratify_field] if stratify_field else [])]
    try:
        check_context_fields(client, index, list(dict.fromkeys(named)))
    except GenerationError as exc:
        raise BadRequest(str(exc)) from None


def new_generated_set(query_set_id: str, fields: dict[str, Any]) -> dict[str, Any]:
    """The PROCESSING document of a generated set: the request's fields as the plugin branch
    names them (``index`` stored as ``sourceIndex``), no queries yet."""
    reference = fields["sampling"] == REFERENCE_SAMPLER
    doc: dict[str, Any] = {
        "id": query_set_id,
        "name": fields["name"],
        "description": fields["description"],
        "sampling": fields["sampling"],
        "timestamp": now_iso(),
        "querySetQueries": [],
        "type": REFERENCE_TYPE if reference else LLM_TYPE,
        "status": "PROCESSING",
        "numberOfQueryTerms": fields["numberOfQueryTerms"],
        "sourceIndex": fields["index"],
        "contextFields": fields["contextFields"],
        "categories": fields["categories"],
        "seed": fields["seed"],
    }
    if not reference:
        doc["modelId"] = fields["modelId"]
    if fields["stratifyField"]:
        doc["stratifyField"] = fields["stratifyField"]
    return doc


def generate(svc: Services, query_set_id: str) -> None:
    """Run the generation of one PROCESSING set (nothing to do for any other state)."""
    repo = Repository(svc.client, QUERY_SET_INDEX)
    hit = repo.get_hit(query_set_id)
    if hit is None or hit["_source"].get("status") != "PROCESSING":
        log.info("query set %s is not PROCESSING (deleted or done); nothing to do",
                 query_set_id)
        return
    doc = hit["_source"]
    control = JobControl(svc, QUERY_SET_INDEX, hit, "documents", in_metadata=False)
    control.check()  # cancelled while queued
    try:
        documents = sample_documents(
            svc.client, doc["sourceIndex"], int(doc["numberOfQueryTerms"]),
            int(doc.get("seed") or 0), doc.get("contextFields") or (), doc.get("stratifyField"))
    except GenerationError as exc:
        raise JobFailed(str(exc)) from None
    if not documents:
        raise JobFailed(f"index [{doc['sourceIndex']}] has no document with text to generate "
                        "queries from")
    control.start(len(documents), "generating")
    generation: dict[str, Any] = {"documents": len(documents)}
    if doc["sampling"] == REFERENCE_SAMPLER:
        queries = reference_queries(documents, seed=int(doc.get("seed") or 0))
        control.reach(len(documents))
    else:
        outcome = llm_queries(svc, doc["modelId"], documents, list(doc["categories"]), control)
        try:
            outcome.raise_if_nothing()
        except JobFailed as exc:
            keep_metadata(exc, usage=outcome.usage_doc())
            raise
        queries = outcome.queries
        generation.update(outcome.summary())
    control.check()
    kept = dedupe(queries)
    generation["queries"] = len(kept)
    generation["duplicates"] = len(queries) - len(kept)
    _write(repo, hit, {"status": "COMPLETED", "querySetQueries": as_entries(kept),
                       "generation": generation})


def _write(repo: Repository, hit: dict[str, Any], fields: dict[str, Any]) -> None:
    """The finished set, unless it changed since it was read (a delete, a cancel)."""
    doc = {k: v for k, v in {**hit["_source"], **fields}.items() if k != "progress"}
    try:
        repo.put(doc, seq_no=hit["_seq_no"], primary_term=hit["_primary_term"])
    except (ConflictError, NotFoundError):
        if not repo.holds(doc["id"], fields):
            log.warning("query set %s changed or was deleted while its job ran; result "
                        "dropped", doc["id"])
