"""``_evaluate`` with Evret's metrics and rules, over HTTP: Evret's worked example by expected ids
and by reference answers credited one to one, token_overlap's minTokens/queryBoost, the new
fields' 400s, and context sufficiency against the stand-in LLM."""

from __future__ import annotations

import json
import math
import uuid
from typing import Any

import pytest
from opensearchpy import OpenSearch

from tests.conftest import JUDGE_MODEL
from tests.integration.test_evaluate_and_compare import wait
from tests.support.api import Api
from tests.support.processes import Worker
from workbench.bench.llm_server import LLMServer

K = 5
RETRIEVED = ["d1", "d4", "d2", "d9", "d8"]
RELEVANT = {"d2", "d8", "d10"}
# The documents' texts: d2, d8 and d10 are the relevant ones; the reference answers are their
# texts, so token_overlap matches d2 with the first and d8 with the second, and no retrieved
# document with the third (d10 was not retrieved). d9 says what d2 says: it matches only the
# first reference answer, already credited to d2, so the metrics do not count it.
TEXTS = {
    "d1": "the history of coal mining in wales",
    "d4": "oil prices rose sharply last winter",
    "d2": "solar panels convert sunlight into electricity",
    "d9": "rooftop solar panels convert sunlight into electricity too",
    "d8": "wind turbines spin generators to make power",
    "d10": "tidal barrages hold seawater behind a dam",
}
REFERENCES = [TEXTS["d2"], TEXTS["d8"], TEXTS["d10"]]


def evret_figures(retrieved: list[str], relevant: set[str], k: int) -> dict[str, float]:
    """Evret's definitions with plain loops: binary relevance, R = |relevant|, Precision over
    k, AP over R, the ideal DCG with min(R, k) relevant documents."""
    top = retrieved[:k]
    flags = [doc in relevant for doc in top]
    found = sum(flags)
    dcg = 0.0
    for rank, flag in enumerate(flags, start=1):
        if flag:
            dcg += 1 / math.log2(rank + 1)
    idcg = 0.0
    for rank in range(1, min(len(relevant), k) + 1):
        idcg += 1 / math.log2(rank + 1)
    precision_sum, hits = 0.0, 0
    for rank, flag in enumerate(flags, start=1):
        if flag:
            hits += 1
            precision_sum += hits / rank
    first = 0.0
    for rank, flag in enumerate(flags, start=1):
        if flag:
            first = 1 / rank
            break
    return {f"NDCG@{k}": dcg / idcg, f"MAP@{k}": precision_sum / len(relevant), "MRR": first,
            f"Precision@{k}": found / k, f"HitRate@{k}": 1.0 if found else 0.0,
            f"Recall@{k}": found / len(relevant)}


LITERAL = {"HitRate@5": 1.0, "Recall@5": 0.6667, "Precision@5": 0.4, "MRR": 0.3333,
           "NDCG@5": 0.4162, "MAP@5": 0.2444}


def check_evret(metrics: dict[str, float]) -> None:
    assert list(metrics) == ["NDCG@5", "MAP@5", "MRR", "Precision@5", "HitRate@5", "Recall@5"]
    assert metrics == pytest.approx(evret_figures(RETRIEVED, RELEVANT, K))
    assert {name: round(value, 4) for name, value in metrics.items()} == LITERAL
    assert metrics["NDCG@5"] == pytest.approx(0.8869 / 2.1309, abs=1e-4)
    assert metrics["MAP@5"] == pytest.approx((1 / 3 + 2 / 5) / 3)


def hits() -> list[dict[str, Any]]:
    return [{"id": doc, "text": TEXTS[doc]} for doc in RETRIEVED]


def test_evrets_worked_example_by_expected_ids(api: Api, llm: LLMServer) -> None:
    # The LLM grades by the query's words; the expected ids decide what the metrics count.
    reply = api.srw("POST", "/_evaluate", {
        "queryText": f"renewable energy {uuid.uuid4().hex}", "hits": hits(), "k": K,
        "judge": "llm", "modelId": JUDGE_MODEL, "expectedIds": ["d2", "d8", "d10"]})
    assert reply.status == 200, reply.data
    answer = reply.json
    check_evret(answer["metrics"])
    assert answer["relevantTotal"] == 3
    assert [h["counted"] for h in answer["hits"]] == [False, False, True, False, True]
    # Ids are compared as strings; a duplicate id counts once; R may be raised by the count.
    more = api.srw("POST", "/_evaluate", {
        "queryText": "q", "hits": hits(), "k": K, "judge": "token_overlap",
        "referenceAnswer": "nothing alike", "expectedIds": ["d2", "d8", "d8"],
        "expectedRelevant": 4}).json
    assert more["relevantTotal"] == 4 and more["metrics"]["Recall@5"] == pytest.approx(2 / 4)


def test_evrets_worked_example_by_reference_answers(api: Api) -> None:
    reply = api.srw("POST", "/_evaluate", {
        "queryText": "renewable energy", "hits": hits(), "k": K, "judge": "token_overlap",
        "referenceAnswer": REFERENCES})
    assert reply.status == 200, reply.data
    answer = reply.json
    by_id = {h["id"]: h for h in answer["hits"]}
    assert by_id["d2"]["reference"] == 0 and by_id["d8"]["reference"] == 1
    # d9 matches the first reference answer too: relevant by the judge, not counted.
    assert by_id["d9"]["relevant"] is True and by_id["d9"]["reference"] is None
    assert [h["counted"] for h in answer["hits"]] == [False, False, True, False, True]
    assert answer["relevantTotal"] == 3
    check_evret(answer["metrics"])


def test_one_reference_answer_counts_every_match(api: Api) -> None:
    answer = api.srw("POST", "/_evaluate", {
        "queryText": "solar", "hits": hits(), "k": K, "judge": "token_overlap",
        "referenceAnswer": TEXTS["d2"]}).json
    assert [h["relevant"] for h in answer["hits"]] == [False, False, True, True, False]
    assert "counted" not in answer["hits"][0] and "relevantTotal" not in answer
    # Today's figures: the ideal ranking is the same ratings sorted, AP over the two found.
    ndcg = (1 / math.log2(4) + 1 / math.log2(5)) / (1 + 1 / math.log2(3))
    assert answer["metrics"] == pytest.approx({
        "NDCG@5": ndcg, "MAP@5": (1 / 3 + 2 / 4) / 2, "MRR": 1 / 3, "Precision@5": 2 / 5,
        "HitRate@5": 1.0})


def test_token_overlap_options_in_evaluate(api: Api) -> None:
    body = {"queryText": "leather", "judge": "token_overlap",
            "referenceAnswer": "slim brown leather wallet case",
            "hits": [{"id": "a", "title": "brown leather belt"}]}
    plain = api.srw("POST", "/_evaluate", body).json["hits"][0]
    assert plain["score"] == pytest.approx(0.4) and plain["relevant"] is False
    boosted = api.srw("POST", "/_evaluate", {**body, "queryBoost": True}).json["hits"][0]
    assert boosted["score"] == pytest.approx(0.5) and boosted["relevant"] is True
    strict = api.srw("POST", "/_evaluate", {
        **body, "judgeOptions": {"queryBoost": True, "minTokens": 3}}).json["hits"][0]
    assert strict["score"] == 0.0
    api.srw("POST", "/_evaluate", {**body, "judgeOptions": {"minTokens": 0}}).error(
        400, "minTokens must be an integer between 1 and 10000, got: 0")


@pytest.mark.parametrize("change, reason", [
    ({"expectedIds": []}, "expectedIds must be a non-empty list of at most 100000 document ids"),
    ({"expectedIds": "d2"}, "expectedIds must be a non-empty list"),
    ({"expectedIds": ["d2", " "]}, "expectedIds must be a non-empty list"),
    ({"expectedIds": [True]}, "expectedIds must be a non-empty list"),
    ({"expectedRelevant": 0}, "expectedRelevant must be a positive integer, got: 0"),
    ({"expectedRelevant": "3"}, "expectedRelevant must be a positive integer, got: 3"),
    ({"expectedIds": ["a", "b"], "expectedRelevant": 1},
     "expectedRelevant (1) is less than the number of expectedIds (2)"),
    ({"contextSufficiency": "yes"}, "contextSufficiency must be true or false"),
    ({"contextSufficiency": True}, "contextSufficiency needs a modelId"),
    ({"contextSufficiency": True, "modelId": JUDGE_MODEL, "referenceAnswer": None},
     "contextSufficiency needs a referenceAnswer"),
    ({"judgeOptions": {"queryBoost": 1}}, "queryBoost must be true or false, got: 1"),
])
def test_bad_new_fields(api: Api, change: dict[str, Any], reason: str) -> None:
    body = {"queryText": "q", "hits": hits(), "judge": "token_overlap",
            "referenceAnswer": "solar"}
    body.update(change)
    reply = api.srw("POST", "/_evaluate", {k: v for k, v in body.items() if v is not None})
    assert reply.status == 400, reply.data
    assert reply.reason.startswith(reason)


def test_context_sufficiency(api: Api, llm: LLMServer) -> None:
    run = uuid.uuid4().hex  # keeps this run's cache entries apart from earlier runs'
    body = {"queryText": f"renewable energy {run}", "hits": hits(), "k": K,
            "judge": "token_overlap", "referenceAnswer": REFERENCES[:2], "modelId": JUDGE_MODEL,
            "contextSufficiency": True}
    reply = api.srw("POST", "/_evaluate", body)
    assert reply.status == 200, reply.data
    answer = reply.json
    assert answer["contextSufficiency"] == {
        "sufficient": True, "rationale": "Every word of the reference answer appears in the "
                                         "results.", "missing": [], "cached": False}
    (request,) = llm.requests
    assert request.response_format["json_schema"]["name"] == "context_sufficiency"  # type: ignore[index]
    assert 'Reference answers: ["solar panels' in request.user
    usage = answer["usage"]
    assert usage["llmCalls"] == 1 and usage["inputTokens"] > 0 and usage["outputTokens"] > 0
    assert usage["totalTokens"] == usage["inputTokens"] + usage["outputTokens"]

    again = api.srw("POST", "/_evaluate", body).json
    assert len(llm.requests) == 1  # from the judgment cache
    assert again["contextSufficiency"]["cached"] is True
    assert again["contextSufficiency"]["sufficient"] is True
    assert again["usage"]["llmCalls"] == 0 and again["usage"]["cacheHits"] == 1

    # The third reference answer's document (d10) was not retrieved: its words are missing.
    short = api.srw("POST", "/_evaluate", {**body, "referenceAnswer": REFERENCES}).json
    verdict = short["contextSufficiency"]
    assert verdict["sufficient"] is False
    assert verdict["missing"] == ["tidal", "barrages", "hold", "seawater", "behind", "dam"]
    assert short["metrics"]["Recall@5"] == pytest.approx(2 / 3)


def test_token_overlap_options_in_a_reference_judgment(api: Api, worker: Worker,
                                                       direct: OpenSearch) -> None:
    index = f"test-evret-{uuid.uuid4().hex[:6]}"
    direct.indices.create(index=index)
    try:
        direct.index(index=index, id="b", body={"title": "blue running shoes"}, refresh=True)
        config = api.srw("PUT", "/search_configurations", {
            "name": "t", "index": index,
            "query": '{"query":{"match":{"title":"%SearchText%"}}}'}).json[
            "search_configuration_id"]
        query_set = api.srw("PUT", "/query_sets", {"name": "refs", "querySetQueries": [
            {"queryText": "running", "referenceAnswer": "red running shoes"}]}).json[
            "query_set_id"]
        body = {"name": "strict", "type": "REFERENCE_JUDGMENT", "judge": "token_overlap",
                "querySetId": query_set, "searchConfigurationList": [config],
                "contextFields": ["title"]}
        scores = {}
        for options in ({}, {"queryBoost": True}, {"queryBoost": True, "minTokens": 3}):
            created = api.srw("PUT", "/judgments", {**body, "judgeOptions": options})
            assert created.status == 200, created.data
            done = wait(api, f"/judgments/{created.json['judgment_id']}")
            assert done["status"] == "COMPLETED", done["metadata"]
            assert done["metadata"].get("judgeOptions", {}) == options
            (rating,) = done["judgmentRatings"][0]["ratings"]
            scores[json.dumps(options)] = rating["score"]
        # {red, running, shoes}: 2/3 found; "running" is the query: +0.1; 2 < 3 tokens: 0.
        assert list(scores.values()) == pytest.approx([2 / 3, 2 / 3 + 0.1, 0.0])
        api.srw("PUT", "/judgments", {**body, "judgeOptions": {"minTokens": 0}}).error(
            400, "minTokens must be an integer between 1 and 10000, got: 0")
    finally:
        direct.indices.delete(index=index)
