"""``_evaluate``, reference judges, LLM rationales and judgment agreement, end to end."""

from __future__ import annotations

import math
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from opensearchpy import OpenSearch
from sklearn.metrics import accuracy_score, cohen_kappa_score, f1_score, precision_score

from tests.conftest import JUDGE_MODEL
from tests.support.api import Api
from tests.support.processes import Worker
from tests.support.waiting import finished
from workbench.bench.llm_server import LLMServer
from workbench.store.repository import now_iso

PRODUCTS = {
    "r1": {"title": "red running shoes", "description": "light shoes for running", "price": 50},
    "r2": {"title": "blue running shoes", "description": "road shoes", "price": 60},
    "r3": {"title": "red wool hat", "description": "warm hat", "price": 20},
    "r4": {"title": "trail running shoes in red", "description": "grippy", "price": 80},
    "r5": {"title": "leather wallet", "description": "brown wallet", "price": 30},
}


@pytest.fixture(scope="module")
def catalogue(direct: OpenSearch) -> Iterator[str]:
    index = f"test-eval-{uuid.uuid4().hex[:6]}"
    direct.indices.create(index=index)
    for doc_id, doc in PRODUCTS.items():
        direct.index(index=index, id=doc_id, body=doc)
    direct.indices.refresh(index=index)
    yield index
    direct.indices.delete(index=index)


def pasted(*ids: str) -> list[dict[str, Any]]:
    return [{"id": i, **PRODUCTS[i]} for i in ids]


def expected_metrics(ratings: list[float], relevant: list[bool], k: int) -> dict[str, float]:
    """Straightforward loops: exponential-gain NDCG against the same ratings sorted, AP over the
    relevant results found, reciprocal rank, precision over the list, and whether any result is
    relevant (HitRate)."""
    def dcg(values: list[float]) -> float:
        return sum((2 ** r - 1) / math.log2(i + 2) for i, r in enumerate(values[:k]))
    ideal = dcg(sorted(ratings, reverse=True))
    hits, precisions = 0, []
    for i, flag in enumerate(relevant[:k], start=1):
        if flag:
            hits += 1
            precisions.append(hits / i)
    first = next((i for i, flag in enumerate(relevant[:k], start=1) if flag), None)
    return {f"NDCG@{k}": dcg(ratings) / ideal if ideal > 0 else 0.0,
            f"MAP@{k}": sum(precisions) / hits if hits else 0.0,
            "MRR": 1 / first if first else 0.0,
            f"Precision@{k}": hits / min(k, len(relevant)) if relevant else 0.0,
            f"HitRate@{k}": 1.0 if hits else 0.0}


def test_evaluate_pasted_hits_with_the_llm_rubric(api: Api, llm: LLMServer) -> None:
    # A reference answer of its own keeps this run's cache entries apart from earlier runs'.
    body = {"queryText": "red running shoes", "hits": pasted("r1", "r3", "r2", "r5"),
            "referenceAnswer": f"run {uuid.uuid4().hex}", "fields": ["title"], "k": 4,
            "judge": "llm", "modelId": JUDGE_MODEL}
    reply = api.srw("POST", "/_evaluate", body)
    assert reply.status == 200, reply.data
    answer = reply.json
    assert answer["queryText"] == "red running shoes" and answer["modelId"] == JUDGE_MODEL
    hits = answer["hits"]
    assert [h["id"] for h in hits] == ["r1", "r3", "r2", "r5"]
    assert [h["rank"] for h in hits] == [1, 2, 3, 4]
    # The stand-in judge grades by word overlap: 3/3, 1/3, 2/3, 0/3 of the query words.
    assert [h["rating"] for h in hits] == [3.0, 1.0, 2.0, 0.0]
    assert [h["relevant"] for h in hits] == [True, False, True, False]
    assert all(h["justification"].endswith("appear in the result.") for h in hits)
    assert all(h["confidence"] == 0.9 and h["cached"] is False for h in hits)
    want = expected_metrics([3, 1, 2, 0], [True, False, True, False], 4)
    assert answer["metrics"] == pytest.approx(want)
    assert answer["usage"]["llmCalls"] == 1 and answer["usage"]["cacheHits"] == 0
    usage = answer["usage"]
    assert usage["inputTokens"] > 0 and usage["outputTokens"] > 0
    assert usage["totalTokens"] == usage["inputTokens"] + usage["outputTokens"]
    assert usage["latencyMs"] > 0 and "cost" not in usage
    (request,) = llm.requests
    assert request.response_format["json_schema"]["name"] == "rubric_response"  # type: ignore[index]
    assert "3 = highly relevant" in request.system
    # Only the requested field is shown to the judge.
    assert '{"id": "r1", "content": "{\\"title\\":\\"red running shoes\\"}"}' in request.user

    again = api.srw("POST", "/_evaluate", body).json
    assert len(llm.requests) == 1  # every grade came from the judgment cache
    latency = again["usage"].pop("latencyMs")
    assert isinstance(latency, float) and latency >= 0
    assert again["usage"] == {"inputTokens": 0, "outputTokens": 0, "totalTokens": 0,
                              "llmCalls": 0, "cacheHits": 4}  # no cost: the model has no prices
    assert [h["rating"] for h in again["hits"]] == [3.0, 1.0, 2.0, 0.0]
    assert all(h["cached"] for h in again["hits"])
    assert [h["justification"] for h in again["hits"]] == [h["justification"] for h in hits]


def test_evaluate_runs_a_search_configuration(api: Api, llm: LLMServer, catalogue: str,
                                              direct: OpenSearch) -> None:
    config = api.srw("PUT", "/search_configurations", {
        "name": "titles", "index": catalogue,
        "query": '{"query":{"match":{"title":"%SearchText%"}}}'}).json["search_configuration_id"]
    reply = api.srw("POST", "/_evaluate", {"queryText": "red shoes", "k": 3,
                                           "referenceAnswer": f"run {uuid.uuid4().hex}",
                                           "searchConfigurationId": config,
                                           "judge": "llm", "modelId": JUDGE_MODEL,
                                           "debug": True})
    assert reply.status == 200, reply.data
    direct_ids = [h["_id"] for h in direct.search(index=catalogue, body={
        "query": {"match": {"title": "red shoes"}}, "size": 3})["hits"]["hits"]]
    assert [h["id"] for h in reply.json["hits"]] == direct_ids
    debug = reply.json["debug"]
    assert [r["id"] for r in debug["results"]] == direct_ids
    assert set(debug["results"][0]["fields"]) == {"title", "description", "price"}
    assert debug["llmCalls"][0]["structured"] is True
    other = api.srw("POST", "/_evaluate", {
        "queryText": "wallet", "index": catalogue, "judge": "token_overlap",
        "referenceAnswer": "leather wallet",
        "searchQuery": {"query": {"match": {"title": "%SearchText%"}}}})
    assert [h["id"] for h in other.json["hits"]] == ["r5"]


def test_reference_judges_in_evaluate(api: Api) -> None:
    hits = pasted("r1", "r2", "r3", "r4")
    overlap = api.srw("POST", "/_evaluate", {
        "queryText": "red shoes", "referenceAnswer": "red running shoes", "hits": hits,
        "fields": ["title"], "judge": "token_overlap"}).json
    assert overlap["threshold"] == 0.5 and overlap["judge"] == "token_overlap"
    assert [(h["id"], h["rating"], h["relevant"]) for h in overlap["hits"]] == [
        ("r1", 1.0, True), ("r2", 1.0, True), ("r3", 0.0, False), ("r4", 1.0, True)]
    assert overlap["hits"][0]["score"] == 1.0  # the whole phrase appears
    assert overlap["hits"][1]["score"] == pytest.approx(2 / 3)  # running, shoes
    assert overlap["usage"]["llmCalls"] == 0
    strict = api.srw("POST", "/_evaluate", {
        "queryText": "red shoes", "referenceAnswer": "red running shoes", "hits": hits,
        "fields": ["title"], "judge": "token_overlap", "threshold": 0.9}).json
    assert [h["rating"] for h in strict["hits"]] == [1.0, 0.0, 0.0, 1.0]
    semantic = api.srw("POST", "/_evaluate", {
        "queryText": "red shoes", "referenceAnswer": "running shoes in red", "hits": hits,
        "fields": ["title"], "judge": "semantic"}).json
    scores = {h["id"]: h["score"] for h in semantic["hits"]}
    assert scores["r1"] > scores["r3"] and scores["r4"] > scores["r3"]
    assert semantic["hits"][0]["relevant"] is True and semantic["hits"][2]["relevant"] is False


@pytest.mark.parametrize("change, status, reason", [
    ({"judge": "oracle"}, 400, "Unknown judge [oracle]; use one of: llm, token_overlap, semantic"),
    ({"judge": "semantic"}, 400, "referenceAnswer is required for the semantic judge"),
    ({"k": 0}, 400, "k must be a positive integer, got: 0"),
    ({"hits": [{"title": "no id"}]}, 400, "hits[0] has no id"),
    ({"hits": None, "index": None}, 400,
     "give hits, a searchConfigurationId, or an index and a searchQuery"),
    ({"queryText": ""}, 400, "queryText is required"),
    ({"modelId": None}, 400, "modelId is required for the llm judge"),
    ({"judge": "token_overlap", "referenceAnswer": "x", "threshold": 2}, 400,
     "threshold must be a number between 0 and 1, got: 2"),
])
def test_evaluate_bad_input(api: Api, change: dict[str, Any], status: int, reason: str) -> None:
    body = {"queryText": "red shoes", "hits": pasted("r1"), "judge": "llm", "modelId": JUDGE_MODEL}
    body.update(change)
    api.srw("POST", "/_evaluate", {k: v for k, v in body.items() if v is not None}).error(
        status, reason)


def test_llm_failure_in_evaluate_is_a_502_naming_the_model(api: Api, llm: LLMServer) -> None:
    llm.fail(500, times=50)
    reply = api.srw("POST", "/_evaluate", {"queryText": "wallet", "hits": pasted("r5"),
                                           "referenceAnswer": f"run {uuid.uuid4().hex}",
                                           "judge": "llm", "modelId": JUDGE_MODEL})
    assert reply.status == 502
    assert reply.json["error"]["type"] == "llm_exception"
    assert reply.reason.startswith(f"LLM [{JUDGE_MODEL}] failed:")
    # An unknown model is a 400: tests/integration/test_fuzz_regressions.py


def wait(api: Api, path: str) -> dict[str, Any]:
    return finished(api, path, 120)


def test_reference_judgment_job(api: Api, worker: Worker, catalogue: str) -> None:
    config = api.srw("PUT", "/search_configurations", {
        "name": "t", "index": catalogue,
        "query": '{"query":{"match":{"title":"%SearchText%"}}}'}).json["search_configuration_id"]
    query_set = api.srw("PUT", "/query_sets", {"name": "refs", "querySetQueries": [
        {"queryText": "red shoes", "referenceAnswer": "red running shoes"},
        {"queryText": "wallet", "referenceAnswer": "leather wallet"}]}).json["query_set_id"]
    reply = api.srw("PUT", "/judgments", {
        "name": "by reference", "type": "REFERENCE_JUDGMENT", "judge": "token_overlap",
        "querySetId": query_set, "searchConfigurationList": [config], "size": 5,
        "contextFields": ["title"]})
    assert reply.status == 200, reply.data
    done = wait(api, f"/judgments/{reply.json['judgment_id']}")
    assert done["status"] == "COMPLETED", done["metadata"]
    assert done["metadata"]["judge"] == "token_overlap" and done["metadata"]["threshold"] == 0.5
    assert done["metadata"]["successfulQueries"] == 2
    by_query = {e["query"].split("#")[0]: {r["docId"]: r for r in e["ratings"]}
                for e in done["judgmentRatings"]}
    shoes = by_query["red shoes"]
    assert shoes["r1"]["rating"] == "1.0" and shoes["r1"]["score"] == 1.0
    assert shoes["r3"]["rating"] == "0.0"
    assert by_query["wallet"]["r5"]["rating"] == "1.0"

    no_reference = api.srw("PUT", "/query_sets", {"name": "bare", "querySetQueries": [
        {"queryText": "red shoes"}, {"queryText": "wallet", "referenceAnswer": "x"}]}).json[
        "query_set_id"]
    api.srw("PUT", "/judgments", {
        "name": "x", "type": "REFERENCE_JUDGMENT", "judge": "semantic",
        "querySetId": no_reference, "searchConfigurationList": [config]}).error(
        400, f"QuerySet [{no_reference}] has 1 queries without a referenceAnswer; the semantic "
             "judge compares results with it")
    api.srw("PUT", "/judgments", {
        "name": "x", "type": "REFERENCE_JUDGMENT", "judge": "vibes",
        "querySetId": query_set, "searchConfigurationList": [config]}).error(
        400, "Unknown judge [vibes]; use one of: token_overlap, semantic")


def test_llm_judgment_with_rationale(api: Api, worker: Worker, catalogue: str,
                                     llm: LLMServer) -> None:
    config = api.srw("PUT", "/search_configurations", {
        "name": "t", "index": catalogue,
        "query": '{"query":{"match":{"title":"%SearchText%"}}}'}).json["search_configuration_id"]
    query_set = api.srw("PUT", "/query_sets", {"name": "q", "querySetQueries": [
        {"queryText": "red shoes"}]}).json["query_set_id"]
    body = {"name": "why", "type": "LLM_JUDGMENT", "modelId": JUDGE_MODEL,
            "querySetId": query_set, "searchConfigurationList": [config], "size": 3,
            "contextFields": ["title"], "includeRationale": True}
    first = wait(api, f"/judgments/{api.srw('PUT', '/judgments', body).json['judgment_id']}")
    assert first["status"] == "COMPLETED" and first["metadata"]["includeRationale"] is True
    ratings = first["judgmentRatings"][0]["ratings"]
    assert ratings and all(r["rationale"].endswith("appear in the result.") for r in ratings)
    item = llm.requests[0].response_format["json_schema"]["schema"]["properties"][  # type: ignore[index]
        "ratings"]["items"]
    assert "rationale" in item["required"]
    calls = llm.calls
    second = wait(api, f"/judgments/{api.srw('PUT', '/judgments', body).json['judgment_id']}")
    assert llm.calls == calls  # cached, rationale included
    assert second["judgmentRatings"][0]["ratings"] == ratings


def import_judgment(api: Api, rows: dict[str, dict[str, str]]) -> str:
    reply = api.srw("PUT", "/judgments", {"name": "human", "type": "IMPORT_JUDGMENT",
                                          "judgmentRatings": [
                                              {"query": q, "ratings": [{"docId": d, "rating": r}
                                                                       for d, r in docs.items()]}
                                              for q, docs in rows.items()]})
    return wait(api, f"/judgments/{reply.json['judgment_id']}")["id"]


def test_compare_two_judgment_lists(api: Api, worker: Worker) -> None:
    human = {"q1": {"a": "3", "b": "0", "c": "2", "d": "1", "x": "3"},
             "q2": {"e": "0", "f": "3", "g": "1"}, "only-human": {"h": "2"}}
    model = {"q1": {"a": "0.9", "b": "0.2", "c": "0.4", "d": "0.6", "y": "0.1"},
             "q2": {"e": "0.1", "f": "0.8", "g": "0.7"}, "only-model": {"i": "0.5"}}
    reference, candidate = import_judgment(api, human), import_judgment(api, model)
    reply = api.srw("POST", "/judgments/_compare", {
        "referenceJudgmentId": reference, "candidateJudgmentId": candidate,
        "referenceThreshold": 2, "candidateThreshold": 0.5})
    assert reply.status == 200, reply.data
    report = reply.json
    assert report["reference"] == {"id": reference, "name": "human", "type": "IMPORT_JUDGMENT",
                                   "threshold": 2.0}
    assert report["pairs"] == {"both": 7, "reference_only": 2, "candidate_only": 2,
                               "queries_both": 2, "queries_reference_only": 1,
                               "queries_candidate_only": 1}
    truth = [True, False, True, False, False, True, False]  # a b c d e f g, human >= 2
    guess = [True, False, False, True, False, True, True]  # model >= 0.5
    binary = report["binary"]
    assert binary["accuracy"] == pytest.approx(accuracy_score(truth, guess))
    assert binary["cohen_kappa"] == pytest.approx(cohen_kappa_score(truth, guess))
    assert binary["precision"] == pytest.approx(precision_score(truth, guess))
    assert binary["f1"] == pytest.approx(f1_score(truth, guess))
    assert binary["confusion_matrix"] == {"true_positive": 2, "false_positive": 2,
                                          "true_negative": 2, "false_negative": 1}
    assert binary["false_positive_rate"] == pytest.approx(2 / 4)
    assert binary["false_negative_rate"] == pytest.approx(1 / 3)
    assert report["graded"]["levels"] >= 3
    per_query = {row["query"]: row for row in report["rank_correlation"]["per_query"]}
    assert per_query["q1"]["pairs"] == 4 and per_query["q2"]["pairs"] == 3


def test_compare_bad_input(api: Api, worker: Worker, direct: OpenSearch) -> None:
    done = import_judgment(api, {"q": {"a": "1"}})
    api.srw("POST", "/judgments/_compare", {"referenceJudgmentId": done,
                                            "candidateJudgmentId": done}).error(
        400, "A judgment list cannot be compared with itself; give two different judgment ids")
    api.srw("POST", "/judgments/_compare", {"referenceJudgmentId": done}).error(
        400, "candidateJudgmentId is required")
    api.srw("POST", "/judgments/_compare", {"referenceJudgmentId": done,
                                            "candidateJudgmentId": "missing"}).error(
        404, "Judgment not found: missing")
    running = str(uuid.uuid4())
    direct.index(index="search-relevance-judgment", id=running, refresh=True, body={
        # Dated now: a PROCESSING entity is only looked at by the workers' sweepers after
        # twice the lease time (docs/reliability.md), so this one stays untouched.
        "id": running, "timestamp": now_iso(), "name": "busy",
        "status": "PROCESSING", "type": "LLM_JUDGMENT", "metadata": {}, "judgmentRatings": []})
    try:
        api.srw("POST", "/judgments/_compare", {"referenceJudgmentId": done,
                                                "candidateJudgmentId": running}).error(
            409, f"Judgment [{running}] is PROCESSING; compare it once it is COMPLETED")
    finally:
        direct.delete(index="search-relevance-judgment", id=running, refresh=True)
