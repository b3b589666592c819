"""Query sets generated from an index (docs/cold-start.md), over HTTP against the real cluster,
real workers and Redis: the plugin-shaped request, its checks, the job with the reference
generator, with the stand-in model for the faults a real server will not produce on demand,
and with llama.cpp's server (``test_a_real_model_writes_the_queries``)."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from opensearchpy import OpenSearch

from tests.conftest import JUDGE_MODEL
from tests.integration.test_cli_loop import cli, ok
from tests.support.api import Api
from tests.support.processes import Server, Worker
from workbench.bench.llm_server import LLMServer
from workbench.schemas.text import query_set_value_error

INDEX = "search-relevance-queryset"
PRODUCTS = [
    ("p01", "Nike Air Zoom Pegasus 39 Men's Running Shoes", "Nike"),
    ("p02", "Adidas Ultraboost 22 Running Shoe for Women", "Adidas"),
    ("p03", "Sony WH-1000XM5 Wireless Noise Cancelling Headphones", "Sony"),
    ("p04", "Bose QuietComfort 45 Bluetooth Headphones, Black", "Bose"),
    ("p05", "Instant Pot Duo 7-in-1 Electric Pressure Cooker, 6 Quart", "Instant Pot"),
    ("p06", "Ninja AF101 Air Fryer (4 Quart, Grey)", "Ninja"),
    ("p07", "Lodge Cast Iron Skillet 10.25 Inch", "Lodge"),
    ("p08", "Hydro Flask Wide Mouth Water Bottle 32 oz", "Hydro Flask"),
    ("p09", "Kindle Paperwhite (16 GB) - Waterproof E-reader", "Amazon"),
    ("p10", "LEGO Star Wars Millennium Falcon Building Kit", "LEGO"),
    ("p11", "Crayola 64 Count Crayons, Assorted Colors", "Crayola"),
    ("p12", "Yeti Rambler 20 oz Tumbler with MagSlider Lid", "Yeti"),
]


def unique(prefix: str = "gen") -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


@pytest.fixture(scope="module")
def catalogue(direct: OpenSearch) -> Iterator[str]:
    index = unique("test-gen-products")
    direct.indices.create(index=index, body={"mappings": {"properties": {
        "title": {"type": "text"}, "brand": {"type": "keyword"},
        "attributes": {"properties": {"color": {"type": "keyword"}}}}}})
    for doc_id, title, brand in PRODUCTS:
        direct.index(index=index, id=doc_id, body={"title": title, "brand": brand,
                                                   "attributes": {"color": "black"}})
    direct.indices.refresh(index=index)
    yield index
    direct.indices.delete(index=index, ignore=[404])


def generate(api: Api, index: str, **fields: Any) -> str:
    body = {"name": unique(), "sampling": "reference_random", "index": index,
            "numberOfQueryTerms": 8, "contextFields": ["title", "brand"], **fields}
    reply = api.srw("PUT", "/query_sets", body)
    assert reply.status == 200, reply.data
    assert set(reply.json) == {"query_set_id", "query_set_result"}
    assert reply.json["query_set_result"] == "CREATED"
    return str(reply.json["query_set_id"])


def finished(direct: OpenSearch, query_set_id: str, timeout: float = 120) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while True:
        source: dict[str, Any] = direct.get(index=INDEX, id=query_set_id)["_source"]
        if source.get("status") != "PROCESSING" or time.monotonic() > deadline:
            return source
        time.sleep(0.2)


def refused(api: Api, body: dict[str, Any]) -> tuple[int, str]:
    reply = api.srw("PUT", "/query_sets", body)
    return reply.status, reply.reason


# -- the request ------------------------------------------------------------------------------

def test_the_reference_generator_makes_a_completed_set(api: Api, worker: Worker,
                                                       direct: OpenSearch,
                                                       catalogue: str) -> None:
    query_set_id = generate(api, catalogue, description="from the catalogue")
    source = finished(direct, query_set_id)
    assert source["status"] == "COMPLETED", source
    assert {k: source[k] for k in ("sampling", "type", "sourceIndex", "numberOfQueryTerms",
                                   "contextFields", "categories", "seed", "description")} == {
        "sampling": "reference_random", "type": "reference_query_set", "sourceIndex": catalogue,
        "numberOfQueryTerms": 8, "contextFields": ["title", "brand"],
        "categories": ["lexical", "semantic"], "seed": 0, "description": "from the catalogue"}
    assert "modelId" not in source and "progress" not in source
    entries = source["querySetQueries"]
    assert 1 <= len(entries) <= 8 and source["generation"]["documents"] == 8
    texts = [e["queryText"] for e in entries]
    assert len({t.casefold() for t in texts}) == len(texts)  # distinct
    ids = {doc_id for doc_id, _, _ in PRODUCTS}
    for entry in entries:
        assert query_set_value_error(entry["queryText"]) is None
        assert not set(entry["queryText"]) & set("#:\n")
        assert entry["customFields"]["category"] == "reference"
        assert entry["customFields"]["sourceDocId"] in ids
    # the same seed draws the same documents, so the same queries; another seed another draw
    again = finished(direct, generate(api, catalogue))
    assert again["querySetQueries"] == entries
    other = finished(direct, generate(api, catalogue, seed=7))
    assert [e["customFields"]["sourceDocId"] for e in other["querySetQueries"]] != [
        e["customFields"]["sourceDocId"] for e in entries]


def test_an_experiment_runs_on_a_generated_set_once_it_is_completed(
        api: Api, worker: Worker, direct: OpenSearch, catalogue: str, llm: LLMServer) -> None:
    config = api.srw("PUT", "/search_configurations", {
        "name": unique(), "index": catalogue,
        "query": '{"query": {"match": {"title": "%SearchText%"}}}'}).json[
        "search_configuration_id"]
    judgment = api.srw("PUT", "/judgments", {
        "name": unique(), "type": "IMPORT_JUDGMENT", "judgmentRatings": [
            {"query": "query number 0", "ratings": [{"docId": "p01", "rating": "1"}]}]}).json[
        "judgment_id"]
    llm.slow(3.0, times=4)
    for n in range(4):
        llm.reply_text(f'{{"query": "query number {n}"}}')
    waiting = generate(api, catalogue, sampling="llm_random", modelId=JUDGE_MODEL,
                       numberOfQueryTerms=4)
    experiment = {"type": "POINTWISE_EVALUATION", "querySetId": waiting,
                  "searchConfigurationList": [config], "judgmentList": [judgment], "size": 5}
    reply = api.srw("PUT", "/experiments", experiment)
    assert (reply.status, reply.reason) == (
        400, f"QuerySet [{waiting}] is still being generated (status PROCESSING); run the "
             "experiment once it is COMPLETED")
    assert finished(direct, waiting)["status"] == "COMPLETED"
    reply = api.srw("PUT", "/experiments", experiment)
    assert reply.status == 200, reply.data


@pytest.mark.parametrize(("change", "status", "reason"), [
    ({"index": None}, 400, "index is required"),
    ({"index": "  "}, 400, "index is required"),
    ({"contextFields": ["title", "nope", "attributes.size", "attributes.color"]}, 400,
     "Context fields [nope, attributes.size] do not exist in the index mapping"),
    ({"stratifyField": "colour"}, 400,
     "Context fields [colour] do not exist in the index mapping"),
    ({"numberOfQueryTerms": 0}, 400, "numberOfQueryTerms must be a positive integer, got: 0"),
    ({"numberOfQueryTerms": 2.5}, 400, "numberOfQueryTerms must be an integer"),
    ({"numberOfQueryTerms": "10"}, 400, "numberOfQueryTerms must be an integer"),
    ({"numberOfQueryTerms": 1001}, 403, "Query Set Limit Exceeded."),
    ({"categories": ["lexical", "navigational"]}, 400,
     "categories [navigational] are not supported; expected any of [lexical, semantic]"),
    ({"categories": []}, 400, "categories must name at least one of [lexical, semantic]"),
    ({"contextFields": "title"}, 400, "contextFields must be a list of non-empty strings"),
    ({"sampling": "llm_random"}, 400, "modelId is required for sampling llm_random"),
    ({"sampling": "llm_generated", "modelId": " "}, 400,
     "modelId is required for sampling llm_generated"),
    ({"modelId": "m"}, 400, "modelId is not used by sampling reference_random: it asks no model"),
    ({"seed": -1}, 400, "seed must be an integer from 0 to 2147483647"),
])
def test_a_bad_request_is_refused_naming_the_field(api: Api, catalogue: str,
                                                    direct: OpenSearch, change: dict[str, Any],
                                                    status: int, reason: str) -> None:
    body = {"name": unique(), "sampling": "reference_random", "index": catalogue,
            "contextFields": ["title"], **change}
    body = {k: v for k, v in body.items() if v is not None}
    before = direct.count(index=INDEX)["count"]
    assert refused(api, body) == (status, reason)
    direct.indices.refresh(index=INDEX)
    assert direct.count(index=INDEX)["count"] == before  # nothing stored


def test_a_missing_index_is_refused(api: Api) -> None:
    missing = unique("no-such-index")
    assert refused(api, {"name": unique(), "sampling": "reference_random", "index": missing}) == (
        400, f"index [{missing}] does not exist")


# -- the model ----------------------------------------------------------------------------------

def test_the_model_writes_one_query_per_document_in_turn_by_category(
        api: Api, worker: Worker, direct: OpenSearch, catalogue: str, llm: LLMServer) -> None:
    answers = ['{"query": "running shoes men"}', 'Sure! {"query": "comfortable shoes"}',
               '{"query": "RUNNING  shoes men"}', '{"query": "bad: query #1"}',
               "wireless headphones\nmore text"]
    for text in answers:
        llm.reply_text(text)
    query_set_id = generate(api, catalogue, sampling="llm_random", modelId=JUDGE_MODEL,
                            numberOfQueryTerms=5)
    source = finished(direct, query_set_id)
    assert source["status"] == "COMPLETED", source
    assert source["type"] == "llm_query_set" and source["modelId"] == JUDGE_MODEL
    # the calls run in parallel, so which document got which answer varies; a duplicate (case
    # and spaces aside) and a query breaking the rules are dropped whatever the order
    entries = source["querySetQueries"]
    assert sorted(e["queryText"].casefold() for e in entries) == [
        "comfortable shoes", "running shoes men", "wireless headphones"]
    assert {e["customFields"]["category"] for e in entries} <= {"lexical", "semantic"}
    assert len({e["customFields"]["sourceDocId"] for e in entries}) == 3
    generation = source["generation"]
    assert {k: generation[k] for k in ("documents", "queries", "duplicates", "failedDocuments",
                                       "refusedQueries")} == {
        "documents": 5, "queries": 3, "duplicates": 1, "failedDocuments": 0,
        "refusedQueries": 1}
    assert generation["usage"]["llmCalls"] == 5
    prompts = [r for r in llm.requests if r.path.endswith("/chat/completions")][-5:]
    assert all("Document:" in str(r.body) for r in prompts)


def test_a_model_that_fails_every_call_ends_the_set_error(api: Api, worker: Worker,
                                                          direct: OpenSearch, catalogue: str,
                                                          llm: LLMServer) -> None:
    llm.fail(500, times=100)
    query_set_id = generate(api, catalogue, sampling="llm_random", modelId=JUDGE_MODEL,
                            numberOfQueryTerms=3)
    source = finished(direct, query_set_id)
    assert source["status"] == "ERROR"
    assert source["metadata"]["error"].startswith(
        f"no query could be generated: LLM [{JUDGE_MODEL}] could not write a query: ")
    assert source["metadata"]["usage"]["llmCalls"] >= 3
    assert source["querySetQueries"] == []


def test_a_generation_is_cancelled(api: Api, worker: Worker, direct: OpenSearch,
                                   catalogue: str, llm: LLMServer) -> None:
    llm.slow(2.0, times=50)
    query_set_id = generate(api, catalogue, sampling="llm_random", modelId=JUDGE_MODEL,
                            numberOfQueryTerms=12)
    reply = api.srw("POST", f"/query_sets/{query_set_id}/_cancel")
    assert reply.status == 200, reply.data
    assert reply.json["query_set_id"] == query_set_id and reply.json["status"] == "CANCELLING"
    source = finished(direct, query_set_id)
    assert source["status"] == "ERROR"
    assert source["metadata"]["error"] == "cancelled by the user"
    again = api.srw("POST", f"/query_sets/{query_set_id}/_cancel")
    assert (again.status, again.reason) == (
        409, f"QuerySet [{query_set_id}] is ERROR; only a PROCESSING query set can be cancelled")


# -- a real model -------------------------------------------------------------------------------

@pytest.fixture
def llama_model(api: Api, llama_url: str) -> Iterator[str]:
    model = unique("llama")
    created = api.srw("PUT", "/models", {
        "id": model, "name": "SmolLM2 on llama.cpp", "provider": "openai",
        "endpoint": llama_url, "model": "smollm2", "options": {"max_tokens": 48}})
    assert created.status in (200, 201), created.data
    yield model
    api.srw("DELETE", f"/models/{model}")


def test_a_real_model_writes_the_queries(api: Api, worker: Worker, direct: OpenSearch,
                                         catalogue: str, llama_model: str) -> None:
    """llama.cpp's server with SmolLM2-135M: a COMPLETED set whose queries obey the rules,
    are distinct and carry their category and source (what a 135M model writes is not
    judged here: workbench/bench/coldstart.py measures how useful generated sets are)."""
    query_set_id = generate(api, catalogue, sampling="llm_random", modelId=llama_model,
                            numberOfQueryTerms=4)
    source = finished(direct, query_set_id, timeout=300)
    assert source["status"] == "COMPLETED", source
    generation = source["generation"]
    assert generation["documents"] == 4 and generation["usage"]["llmCalls"] >= 4
    assert generation["usage"]["inputTokens"] > 0 and generation["usage"]["outputTokens"] > 0
    entries = source["querySetQueries"]
    assert entries, generation  # at least one answer made a query
    texts = [e["queryText"] for e in entries]
    assert len({t.casefold() for t in texts}) == len(texts)
    ids = {doc_id for doc_id, _, _ in PRODUCTS}
    for entry in entries:
        assert query_set_value_error(entry["queryText"]) is None
        assert not set(entry["queryText"]) & set("#:\n")
        assert entry["customFields"]["category"] in ("lexical", "semantic")
        assert entry["customFields"]["sourceDocId"] in ids


# -- the command line ---------------------------------------------------------------------------

def test_generate_then_known_item_judgments_from_the_command_line(
        server: Server, env: dict[str, str], api: Api, worker: Worker, direct: OpenSearch,
        catalogue: str) -> None:
    """``query-set generate --reference`` then ``judgments known-items``: a pointwise
    experiment's MRR is then the known-item MRR, recomputed here from the stored rankings."""
    made = cli(server, env, "query-set", "generate", "--index", catalogue, "--name", unique(),
               "--reference", "--queries", "6", "--context-fields", "title,brand",
               "--filter", "token_overlap")
    query_set_id = ok(made).strip()
    assert made.stderr.splitlines()[0] == (
        f"query set {made.args[made.args.index('--name') + 1]!r}: 6 documents of {catalogue}, "
        "queries by the reference generator")
    assert made.stderr.splitlines()[-1].startswith("6 queries (reference 6) from 6 documents")
    judged = cli(server, env, "judgments", "known-items", query_set_id, "--name", unique())
    judgment_id = ok(judged).strip()
    assert "the source documents of 6 queries" in judged.stderr
    config = api.srw("PUT", "/search_configurations", {
        "name": unique(), "index": catalogue,
        "query": '{"query": {"match": {"title": "%SearchText%"}}}'}).json[
        "search_configuration_id"]
    experiment = api.srw("PUT", "/experiments", {
        "type": "POINTWISE_EVALUATION", "querySetId": query_set_id,
        "searchConfigurationList": [config], "judgmentList": [judgment_id], "size": 10}).json[
        "experiment_id"]
    summary = ok(cli(server, env, "experiment", "summary", experiment, "--json"))
    mean_rr = json.loads(summary)["configurations"][0]["metrics"]["MRR"]["mean"]
    made_set = finished(direct, query_set_id)
    assert made_set["filter"] == {"judge": "token_overlap"}
    assert made_set["generation"]["filter"] == "token_overlap"
    assert made_set["generation"]["filteredQueries"] == 0  # each query is its title's words
    entries = made_set["querySetQueries"]
    source_of = {e["queryText"]: e["customFields"]["sourceDocId"] for e in entries}
    direct.indices.refresh(index="search-relevance-evaluation-result")
    results = direct.search(index="search-relevance-evaluation-result", body={
        "size": 100, "query": {"term": {"experimentId": experiment}}})["hits"]["hits"]
    ranks = []
    for hit in results:
        ids = hit["_source"]["documentIds"]
        source = source_of[hit["_source"]["searchText"]]
        ranks.append(1 / (ids.index(source) + 1) if source in ids[:10] else 0.0)
    assert len(ranks) == 6
    assert mean_rr == pytest.approx(sum(ranks) / 6, abs=1e-12)


def test_an_unknown_model_ends_the_set_error_at_once(api: Api, worker: Worker,
                                                            direct: OpenSearch,
                                                            catalogue: str) -> None:
    """A model id that is neither registered nor an ML Commons model of the cluster: no
    document can succeed, so the job stops asking at once and says why."""
    query_set_id = generate(api, catalogue, sampling="llm_random", modelId="no-such-model",
                            numberOfQueryTerms=12)
    source = finished(direct, query_set_id)
    assert source["status"] == "ERROR", source
    assert source["metadata"]["error"].startswith(
        "no query could be generated: model [no-such-model] is neither registered with the "
        "workbench")
    # the calls already under way (WORKBENCH_LLM_CONCURRENCY, 8) and no more of the 12
    assert source["metadata"]["usage"]["llmCalls"] <= 8
    assert source["querySetQueries"] == []
