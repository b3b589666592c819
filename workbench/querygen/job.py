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
from workbench.judges.base import Judge, OptionError
from workbench.judges.llm import LLMJudge
from workbench.judges.registry import BrokenJudge, UnknownJudge
from workbench.llm.budget import tokenizer_of
from workbench.llm.pricing import pricing_of
from workbench.llm.registry import resolve
from workbench.querygen import filter as consistency
from workbench.querygen.cost import document_tokens
from workbench.querygen.documents import SourceDocument, check_context_fields, sample_documents
from workbench.querygen.errors import GenerationError
from workbench.querygen.llm import categories_for, llm_queries
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
    for key in ("filter", "maxTokens", "maxCost"):
        if fields.get(key) is not None:
            doc[key] = fields[key]
    return doc


def _judge(svc: Services, doc: dict[str, Any]) -> Judge | None:
    """The consistency filter's judge of a set (None without a filter); a judge that can no
    longer be built (a plug-in uninstalled since) fails the job with the reason."""
    spec = doc.get("filter")
    if not spec:
        return None
    try:
        return consistency.build(spec, doc.get("modelId"), svc, source=doc["sourceIndex"])
    except (UnknownJudge, OptionError, BrokenJudge) as exc:
        raise JobFailed(f"the consistency filter cannot be built: {exc}") from None


def _sample(svc: Services, doc: dict[str, Any]) -> list[SourceDocument]:
    try:
        documents = sample_documents(
            svc.client, doc["sourceIndex"], int(doc["numberOfQueryTerms"]),
            int(doc.get("seed") or 0), doc.get("contextFields") or (), doc.get("stratifyField"))
    except GenerationError as exc:
        raise JobFailed(str(exc)) from None
    if not documents:
        raise JobFailed(f"index [{doc['sourceIndex']}] has no document with text to generate "
                        "queries from")
    return documents


def estimate(svc: Services, doc: dict[str, Any]) -> dict[str, Any]:
    """``POST /query_sets/_estimate``: the calls, tokens and cost of a set not yet stored
    (``doc`` as ``new_generated_set`` makes it). It samples the documents as the job will
    (the same seed draws the same ones) and counts each document's calls as the budget
    reserves them (``querygen.cost``); no model is called. Assumes every document gives a
    query (so every one is judged) and every call answers at the first try."""
    documents = _sample(svc, doc)
    judge = _judge(svc, doc)
    model_id = doc.get("modelId")
    out: dict[str, Any] = {"modelId": model_id, "documents": len(documents)}
    if model_id is None:  # the reference generator: no model, no tokens
        return {**out, "calls": 0, "generationCalls": 0, "filterCalls": 0, "inputTokens": 0,
                "outputTokens": 0, "totalTokens": 0, "cost": None, "tokenizer": None}
    model = resolve(model_id, svc.config, svc.models)
    tokenizer = tokenizer_of(model)
    input_tokens = output_tokens = 0
    for document, category in zip(documents, categories_for(len(documents),
                                                             list(doc["categories"])),
                                  strict=True):
        tokens_in, tokens_out = document_tokens(document, category, judge, tokenizer.count)
        input_tokens += tokens_in
        output_tokens += tokens_out
    filter_calls = len(documents) if isinstance(judge, LLMJudge) else 0
    pricing = pricing_of(model)
    return {**out, "calls": len(documents) + filter_calls, "generationCalls": len(documents),
            "filterCalls": filter_calls, "inputTokens": input_tokens,
            "outputTokens": output_tokens, "totalTokens": input_tokens + output_tokens,
            "cost": None if pricing is None else pricing.cost(input_tokens, output_tokens),
            "tokenizer": tokenizer.name}


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
    documents = _sample(svc, doc)
    judge = _judge(svc, doc)
    tally = None if judge is None else consistency.Tally(doc["filter"]["judge"])
    control.start(len(documents), "generating")
    generation: dict[str, Any] = {"documents": len(documents)}
    if doc["sampling"] == REFERENCE_SAMPLER:
        queries = reference_queries(documents, seed=int(doc.get("seed") or 0))
        if judge is not None and tally is not None:
            made = len(queries)
            by_id = {d.id: d for d in documents}
            queries = [q for q in queries if tally.check(judge, q.text, by_id[q.source_id])]
            generation.update(tally.summary())
            if made and not queries:
                raise JobFailed(tally.nothing_kept(made))
        control.reach(len(documents))
    else:
        limits = (doc.get("maxTokens"), doc.get("maxCost"))
        outcome = llm_queries(svc, doc["modelId"], documents, list(doc["categories"]), control,
                              limits, judge, tally)
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
