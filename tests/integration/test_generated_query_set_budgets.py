"""Generated query sets (docs/cold-start.md): the consistency filter, ``maxTokens``/``maxCost``
budgets, ``POST /query_sets/_estimate`` and the model's faults, over HTTP against the real
cluster, workers and Redis, with the stand-in model (which reports usage as OpenAI does)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from opensearchpy import OpenSearch

from tests.conftest import JUDGE_MODEL
from tests.integration.test_generated_query_sets import (
    catalogue,  # noqa: F401 - the module's fixture
    finished,
    generate,
    unique,
)
from tests.support.api import Api
from tests.support.processes import Worker, own_stack
from workbench.bench.llm_server import LLMServer
from workbench.judges import registry


def cost(input_tokens: int, output_tokens: int) -> float:
    return input_tokens * 2.5 / 1_000_000 + output_tokens * 10.0 / 1_000_000




def body(index: str, **fields: Any) -> dict[str, Any]:
    return {"name": unique(), "sampling": "llm_random", "modelId": JUDGE_MODEL, "index": index,
            "numberOfQueryTerms": 4, "contextFields": ["title", "brand"], **fields}


def estimate(api: Api, payload: dict[str, Any]) -> dict[str, Any]:
    reply = api.srw("POST", "/query_sets/_estimate", payload)
    assert reply.status == 200, reply.data
    return reply.json  # type: ignore[no-any-return]


def first_document(api: Api, direct: OpenSearch, index: str) -> str:
    """The document seed 0 draws first (the reference generator tells, with no model)."""
    done = finished(direct, generate(api, index, numberOfQueryTerms=1))
    return str(done["querySetQueries"][0]["customFields"]["sourceDocId"])


# -- the consistency filter ---------------------------------------------------------------------

def test_token_overlap_keeps_the_reference_queries_found_in_their_documents(
        api: Api, worker: Worker, direct: OpenSearch, catalogue: str) -> None:  # noqa: F811
    done = finished(direct, generate(api, catalogue, filter={"judge": "token_overlap"}))
    assert done["status"] == "COMPLETED", done
    assert done["filter"] == {"judge": "token_overlap"}
    generation = done["generation"]
    assert generation["filter"] == "token_overlap" and generation["unjudgedQueries"] == 0
    # the reference generator writes a title's own words, so each is found in its document
    assert generation["filteredQueries"] == 0
    assert generation["queries"] + generation["duplicates"] == generation["documents"] == 8


def test_token_overlap_drops_queries_their_document_does_not_hold(
        api: Api, worker: Worker, direct: OpenSearch, catalogue: str,  # noqa: F811
        llm: LLMServer) -> None:
    for n in range(3):
        llm.reply_text(f'{{"query": "zebra quartz {n}"}}')
    done = finished(direct, generate(api, catalogue, sampling="llm_random", modelId=JUDGE_MODEL,
                                     numberOfQueryTerms=3, filter={"judge": "token_overlap"}))
    assert done["status"] == "ERROR"
    assert done["metadata"]["error"] == (
        "no query passed the consistency filter: the token_overlap judge rated 3 of 3 queries "
        "not relevant to their source document")
    assert done["metadata"]["usage"]["llmCalls"] == 3


def test_the_llm_filter_asks_the_set_s_model_about_the_source_document(
        api: Api, worker: Worker, direct: OpenSearch, catalogue: str,  # noqa: F811
        llm: LLMServer) -> None:
    doc_id = first_document(api, direct, catalogue)
    title = direct.get(index=catalogue, id=doc_id)["_source"]["title"]
    words = " ".join(title.lower().split()[:3]).replace("(", "").replace(",", "")
    # the generation call answers the scripted query; the judge's call gets the stand-in's
    # default answer, which grades by the share of the query's words in the document
    llm.reply_text(f'{{"query": "{words}"}}')
    kept = finished(direct, generate(api, catalogue, sampling="llm_random", modelId=JUDGE_MODEL,
                                     numberOfQueryTerms=1, filter={"judge": "llm"}))
    assert kept["status"] == "COMPLETED", kept
    assert [e["queryText"] for e in kept["querySetQueries"]] == [words]
    generation = kept["generation"]
    assert (generation["filter"], generation["filteredQueries"]) == ("llm", 0)
    assert generation["usage"]["llmCalls"] == 2  # one call writes, one judges
    judged = [r for r in llm.requests if r.path.endswith("/chat/completions")][-1]
    assert f"Query: {words}" in judged.user and doc_id in judged.user

    llm.reply_text('{"query": "zebra quartz"}')
    dropped = finished(direct, generate(api, catalogue, sampling="llm_random",
                                        modelId=JUDGE_MODEL, numberOfQueryTerms=1,
                                        filter={"judge": "llm"}))
    assert dropped["status"] == "ERROR"
    assert dropped["metadata"]["error"] == (
        "no query passed the consistency filter: the llm judge rated 1 of 1 queries not "
        "relevant to their source document")
    assert dropped["metadata"]["usage"]["llmCalls"] == 2


# -- budgets and the estimate -------------------------------------------------------------------

def test_estimate_then_a_budget_stops_before_the_call_that_would_pass_it(
        api: Api, worker: Worker, direct: OpenSearch, catalogue: str,  # noqa: F811
        llm: LLMServer, priced: str) -> None:
    payload = body(catalogue, modelId=priced)
    before = estimate(api, payload)
    assert {k: before[k] for k in ("modelId", "documents", "calls", "generationCalls",
                                   "filterCalls")} == {
        "modelId": priced, "documents": 4, "calls": 4, "generationCalls": 4, "filterCalls": 0}
    assert before["totalTokens"] == before["inputTokens"] + before["outputTokens"] > 0
    assert before["cost"] == pytest.approx(cost(before["inputTokens"], before["outputTokens"]))
    assert before["tokenizer"] == (
        "cl100k_base (OpenAI's; the model's server does not count tokens)")
    assert llm.calls == 0
    filtered = estimate(api, {**payload, "filter": {"judge": "llm"}})
    assert (filtered["calls"], filtered["filterCalls"]) == (8, 4)
    assert filtered["inputTokens"] > before["inputTokens"]

    for n in range(4):
        llm.reply_text(f'{{"query": "query number {n}"}}')
    full = finished(direct, generate(api, catalogue, sampling="llm_random", modelId=priced,
                                     numberOfQueryTerms=4))
    usage = full["generation"]["usage"]
    assert full["status"] == "COMPLETED" and "budgetReached" not in full["generation"]
    assert usage["llmCalls"] == 4 and usage["inputTokens"] == before["inputTokens"]
    assert usage["cost"] == pytest.approx(cost(usage["inputTokens"], usage["outputTokens"]))

    limit = before["totalTokens"] // 2
    for n in range(4):
        llm.reply_text(f'{{"query": "query number {n}"}}')
    done = finished(direct, generate(api, catalogue, sampling="llm_random", modelId=priced,
                                     numberOfQueryTerms=4, maxTokens=limit))
    generation = done["generation"]
    assert done["status"] == "COMPLETED", done
    assert done["maxTokens"] == limit
    assert generation["budgetReached"] is True
    assert generation["lastFailureReason"] == f"budget reached: maxTokens [{limit}]"
    calls = generation["usage"]["llmCalls"]
    assert 0 < calls < 4 and generation["skippedDocuments"] == 4 - calls
    assert generation["usage"]["totalTokens"] <= limit
    llm.reset()

    tiny = before["cost"] / 1000
    nothing = finished(direct, generate(api, catalogue, sampling="llm_random", modelId=priced,
                                        numberOfQueryTerms=4, maxCost=tiny))
    assert nothing["status"] == "ERROR"
    assert nothing["metadata"]["error"] == (
        f"no query could be generated: budget reached: maxCost [{tiny:g}]")
    assert nothing["metadata"]["usage"]["llmCalls"] == 0 and llm.calls == 0


def test_the_reference_generator_estimates_nothing(api: Api, catalogue: str) -> None:  # noqa: F811
    answer = estimate(api, {"name": unique(), "sampling": "reference_random",
                            "index": catalogue, "numberOfQueryTerms": 3})
    assert answer == {"modelId": None, "documents": 3, "calls": 0, "generationCalls": 0,
                      "filterCalls": 0, "inputTokens": 0, "outputTokens": 0, "totalTokens": 0,
                      "cost": None, "tokenizer": None}


@pytest.mark.parametrize(("change", "reason"), [
    ({"maxCost": 1.0}, f"maxCost needs a model with pricing; model [{JUDGE_MODEL}] has none "
                       "(register it with pricing, or use maxTokens)"),
    ({"maxCost": 0}, "maxCost must be a number greater than 0, got: 0"),
    ({"maxTokens": 0}, "maxTokens must be a positive integer, got: 0"),
    ({"maxTokens": 1.5}, "maxTokens must be a positive integer, got: 1.5"),
    ({"sampling": "reference_random", "modelId": None, "maxTokens": 10},
     "maxTokens is not used by sampling reference_random: it asks no model"),
    ({"sampling": "reference_random", "modelId": None, "maxCost": 1},
     "maxCost is not used by sampling reference_random: it asks no model"),
    ({"filter": "llm"}, "filter must be an object with a judge"),
    ({"filter": {"threshold": 0.5}}, "filter.judge is required: the judge that rates each "
                                     "query against its source document"),
    ({"filter": {"judge": "nope"}},
     f"filter: Unknown judge [nope]; use one of: {', '.join(registry.names())}"),
    ({"filter": {"judge": "token_overlap", "size": 3}},
     "filter: the token_overlap judge takes no option [size]; its options are: threshold, "
     "minTokens, queryBoost"),
    ({"filter": {"judge": "llm", "modelId": "other"}},
     "filter.modelId is not taken: the llm filter grades with the set's modelId"),
    ({"sampling": "reference_random", "modelId": None, "filter": {"judge": "llm"}},
     "filter judge llm needs a model: sampling reference_random has none (use token_overlap "
     "or semantic)"),
])
def test_bad_filter_and_budget_are_refused_naming_the_field(
        api: Api, direct: OpenSearch, catalogue: str, change: dict[str, Any],  # noqa: F811
        reason: str) -> None:
    payload = {k: v for k, v in body(catalogue, **change).items() if v is not None}
    before = direct.count(index="search-relevance-queryset")["count"]
    api.srw("PUT", "/query_sets", payload).error(400, reason)
    api.srw("POST", "/query_sets/_estimate", payload).error(400, reason)
    direct.indices.refresh(index="search-relevance-queryset")
    assert direct.count(index="search-relevance-queryset")["count"] == before


def test_estimate_takes_only_generated_sets(api: Api) -> None:
    api.srw("POST", "/query_sets/_estimate", {"name": "x", "sampling": "manual"}).error(
        400, "sampling must be one of [llm_random, llm_generated, reference_random] to "
             "estimate a query set, got: manual")


# -- the model's faults -------------------------------------------------------------------------

def test_a_429_is_retried_and_the_document_gets_its_query(
        api: Api, worker: Worker, direct: OpenSearch, catalogue: str,  # noqa: F811
        llm: LLMServer) -> None:
    llm.fail(429, times=1, retry_after=0.1)
    llm.reply_text('{"query": "retried query"}')
    done = finished(direct, generate(api, catalogue, sampling="llm_random", modelId=JUDGE_MODEL,
                                     numberOfQueryTerms=1))
    assert done["status"] == "COMPLETED", done
    assert [e["queryText"] for e in done["querySetQueries"]] == ["retried query"]
    assert done["generation"]["failedDocuments"] == 0
    assert done["generation"]["usage"]["llmCalls"] == 1  # the provider's retry is one call
    assert llm.calls == 2


def test_answers_without_a_query_fail_their_documents(
        api: Api, worker: Worker, direct: OpenSearch, catalogue: str,  # noqa: F811
        llm: LLMServer) -> None:
    llm.reply_text("{}", times=2)  # the structured rung, then the plain one
    llm.reply_text('{"query": "a usable query"}')
    llm.reply_text('{"query": "###"}')
    done = finished(direct, generate(api, catalogue, sampling="llm_random", modelId=JUDGE_MODEL,
                                     numberOfQueryTerms=3))
    generation = done["generation"]
    assert done["status"] == "COMPLETED", done
    assert [e["queryText"] for e in done["querySetQueries"]] == ["a usable query"]
    assert (generation["failedDocuments"], generation["refusedQueries"]) == (1, 1)
    assert generation["lastFailureReason"].startswith(
        f"LLM [{JUDGE_MODEL}] could not write a query: ")


@pytest.fixture(scope="module")
def impatient(env: dict[str, str]) -> Iterator[Api]:
    """A server and a worker of their own queue whose LLM calls wait 1 second, once."""
    with own_stack(env, "test", WORKBENCH_LLM_TIMEOUT="1",
                   WORKBENCH_LLM_MAX_RETRIES="0") as api:
        yield api


def test_a_model_that_does_not_answer_in_time_ends_the_set_error(
        impatient: Api, direct: OpenSearch, catalogue: str,  # noqa: F811
        llm: LLMServer) -> None:
    llm.slow(3.0, times=2)
    done = finished(direct, generate(impatient, catalogue, sampling="llm_random",
                                     modelId=JUDGE_MODEL, numberOfQueryTerms=1))
    assert done["status"] == "ERROR"
    assert done["metadata"]["error"] == (
        f"no query could be generated: LLM [{JUDGE_MODEL}] could not write a query: no answer "
        f"from {llm.openai_base_url}/chat/completions within 1s (gave up after 1 attempt)")
