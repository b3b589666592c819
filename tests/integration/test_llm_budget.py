"""Cost before it is spent: ``POST /judgments/_estimate`` against the run it predicts, and
``maxTokens``/``maxCost`` budgets stopping an LLM judgment, with the real worker, the real
cluster and the stand-in LLM (which reports usage as OpenAI does).

Each test registers its own priced model at run time, so no rating is in the judgment cache
before it starts.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from opensearchpy import OpenSearch

from tests.conftest import JUDGE_MODEL
from tests.support.api import Api
from tests.support.processes import Worker
from tests.support.waiting import finished
from workbench.bench.llm_server import LLMServer

WORDS = "soft breathable mesh upper with a cushioned sole for long days on your feet " * 6
PRODUCTS = [(f"d{i}", f"{colour} {kind} number {i}", f"{colour} {kind}: {WORDS} {i}")
            for i, (colour, kind) in enumerate(
                (c, k) for c in ("red", "blue", "green", "black")
                for k in ("running shoes", "wool hat", "leather wallet", "charging cable"))]
QUERIES = ["red shoes", "wool hat", "charging cable", "black leather wallet", "green running"]


@pytest.fixture(scope="module")
def data(api: Api, direct: OpenSearch) -> Iterator[dict[str, Any]]:
    index = f"test-llm-budget-{uuid.uuid4().hex[:6]}"
    direct.indices.create(index=index)
    for doc_id, title, description in PRODUCTS:
        direct.index(index=index, id=doc_id, body={"title": title, "description": description})
    direct.indices.refresh(index=index)
    query_set = api.srw("PUT", "/query_sets", {"name": "budget set", "querySetQueries": [
        {"queryText": q} for q in QUERIES]}).json["query_set_id"]
    configs = [api.srw("PUT", "/search_configurations", {
        "name": f"by {field}", "index": index,
        "query": json.dumps({"query": {"match": {field: "%SearchText%"}}}),
    }).json["search_configuration_id"] for field in ("title", "description")]
    yield {"index": index, "querySetId": query_set, "configs": configs}
    direct.indices.delete(index=index)




def body(data: dict[str, Any], model_id: str, **fields: Any) -> dict[str, Any]:
    out = {"name": f"budget-{uuid.uuid4().hex[:8]}", "type": "LLM_JUDGMENT",
           "modelId": model_id, "querySetId": data["querySetId"],
           "searchConfigurationList": data["configs"], "size": 10, "tokenLimit": 1000,
           "contextFields": ["title", "description"]}
    out.update(fields)
    return out


def wait(api: Api, judgment_id: str, timeout: float = 120) -> dict[str, Any]:
    return finished(api, f"/judgments/{judgment_id}", timeout)


def run(api: Api, payload: dict[str, Any]) -> dict[str, Any]:
    reply = api.srw("PUT", "/judgments", payload)
    assert reply.status == 200, reply.data
    return wait(api, reply.json["judgment_id"])


def estimate(api: Api, payload: dict[str, Any]) -> dict[str, Any]:
    reply = api.srw("POST", "/judgments/_estimate", payload)
    assert reply.status == 200, reply.data
    return reply.json  # type: ignore[no-any-return]


def cost(input_tokens: int, output_tokens: int) -> float:
    """By hand: 2.5 per million input tokens, 10 per million output tokens."""
    return input_tokens * 2.5 / 1_000_000 + output_tokens * 10.0 / 1_000_000


def within(estimated: int, real: int, share: float = 0.05) -> bool:
    return abs(estimated - real) <= share * real


def test_estimate_then_run(api: Api, worker: Worker, data: dict[str, Any], llm: LLMServer,
                           priced: str) -> None:
    payload = body(data, priced)
    before = estimate(api, payload)
    assert before["modelId"] == priced and before["queries"] == len(QUERIES)
    assert before["failedSearches"] == 0 and before["reusedPairs"] == 0
    assert before["cachedPairs"] == 0 and before["pairsToRate"] == before["pairs"] > 0
    assert before["calls"] > len(QUERIES)  # tokenLimit 1000 splits some queries' hits
    assert before["totalTokens"] == before["inputTokens"] + before["outputTokens"]
    assert before["cost"] == pytest.approx(cost(before["inputTokens"], before["outputTokens"]))
    assert llm.calls == 0  # the estimate calls no model
    # The stand-in, like OpenAI, has no tokenize endpoint (the three dialects were asked).
    assert before["tokenizer"] == "cl100k_base (OpenAI's; the model's server does not count tokens)"

    done = run(api, payload)
    assert done["status"] == "COMPLETED", done["metadata"]
    usage = done["metadata"]["usage"]
    print("estimate:", {k: before[k] for k in ("calls", "inputTokens", "outputTokens", "cost")},
          "run:", usage)
    assert usage["llmCalls"] == llm.calls == before["calls"]
    assert within(before["inputTokens"], usage["inputTokens"])
    # The stand-in answers compact SCORE0_1 ratings, the shape the estimate writes out.
    assert within(before["outputTokens"], usage["outputTokens"])
    assert usage["totalTokens"] == usage["inputTokens"] + usage["outputTokens"]
    assert usage["cost"] == pytest.approx(cost(usage["inputTokens"], usage["outputTokens"]))
    assert usage["latencyMs"] >= 0 and usage["cachedRatings"] == 0
    rated = sum(len(e["ratings"]) for e in done["judgmentRatings"])
    assert rated == before["pairs"]

    after = estimate(api, payload)
    assert (after["calls"], after["pairsToRate"], after["inputTokens"], after["cost"]) == (
        0, 0, 0, 0.0)
    assert after["cachedPairs"] == after["pairs"] == before["pairs"]
    fresh = estimate(api, {**payload, "overwriteCache": True})
    assert fresh["calls"] == before["calls"] and fresh["cachedPairs"] == 0
    reused = estimate(api, {**payload, "overwriteCache": True, "existingJudgments": [done["id"]]})
    assert (reused["reusedPairs"], reused["calls"]) == (before["pairs"], 0)


def test_latency_is_the_summed_time_of_the_calls(api: Api, worker: Worker, data: dict[str, Any],
                                                 llm: LLMServer, priced: str) -> None:
    llm.latency = 0.2
    try:
        done = run(api, body(data, priced, searchConfigurationList=data["configs"][:1],
                             tokenLimit=4000))
    finally:
        llm.latency = 0.0
    usage = done["metadata"]["usage"]
    assert usage["llmCalls"] == len(QUERIES)
    assert 200 * len(QUERIES) <= usage["latencyMs"] < 200 * len(QUERIES) + 5000


def test_max_tokens_stops_the_judgment_and_retry_rates_the_rest(
        api: Api, worker: Worker, data: dict[str, Any], llm: LLMServer, priced: str) -> None:
    planned = estimate(api, body(data, priced))
    # The first reservation refused closes the budget. Which call that is depends on the order
    # the concurrent calls reserve in, and a call is up to about 1,100 tokens here (tokenLimit
    # 1000 and its answer), so the run spends between the limit less one call and the limit.
    # At 65% of the plan, what is left (and re-chunked) still fits in one retry's budget.
    limit = int(planned["totalTokens"] * 0.65)
    payload = body(data, priced, maxTokens=limit)
    done = run(api, payload)
    metadata, usage = done["metadata"], done["metadata"]["usage"]
    reason = f"budget reached: maxTokens [{limit}]"
    assert done["status"] == "COMPLETED", metadata
    assert metadata["budgetReached"] is True and metadata["lastFailureReason"] == reason
    # the queries the budget stopped list their documents under failures: failed queries,
    # so Dashboards offers Retry
    stopped = sum(1 for e in done["judgmentRatings"] if e.get("failures"))
    assert metadata["maxTokens"] == limit and metadata["failedQueries"] == stopped > 0
    assert 0 < usage["llmCalls"] == llm.calls < planned["calls"]
    assert usage["totalTokens"] <= limit  # the stand-in's counts equal the reservations
    rated = {(e["query"], r["docId"]) for e in done["judgmentRatings"] for r in e["ratings"]}
    failed = [(e["query"], f) for e in done["judgmentRatings"] for f in e.get("failures", [])]
    assert rated and failed and len(rated) + len(failed) == planned["pairs"]
    assert all(f["reason"] == reason for _, f in failed)
    assert not rated & {(q, f["docId"]) for q, f in failed}

    rest = estimate(api, payload)  # what was rated is in the cache
    assert rest["cachedPairs"] == len(rated) and rest["pairsToRate"] == len(failed)
    assert rest["totalTokens"] <= limit  # so one retry with the same budget finishes
    calls = llm.calls
    started = api.srw("POST", f"/judgments/{done['id']}/_retry")
    assert started.status == 200, started.data
    retried = wait(api, done["id"])
    assert retried["status"] == "COMPLETED", retried["metadata"]
    assert llm.calls - calls == rest["calls"]
    assert all("failures" not in e for e in retried["judgmentRatings"])
    assert sum(len(e["ratings"]) for e in retried["judgmentRatings"]) == planned["pairs"]
    assert "budgetReached" not in retried["metadata"]
    assert "lastFailureReason" not in retried["metadata"]
    assert retried["metadata"]["failedQueries"] == 0
    total = retried["metadata"]["usage"]
    assert total["llmCalls"] == usage["llmCalls"] + rest["calls"]
    assert total["cost"] == pytest.approx(cost(total["inputTokens"], total["outputTokens"]))


def test_max_cost_stops_before_the_first_call_that_would_pass_it(
        api: Api, worker: Worker, data: dict[str, Any], llm: LLMServer, priced: str) -> None:
    planned = estimate(api, body(data, priced))
    done = run(api, body(data, priced, maxCost=planned["cost"] / 1000))
    assert done["status"] == "COMPLETED", done["metadata"]
    assert llm.calls == 0 and done["metadata"]["usage"]["llmCalls"] == 0
    reason = done["metadata"]["lastFailureReason"]
    assert reason == f"budget reached: maxCost [{planned['cost'] / 1000:g}]"
    failed = [f for e in done["judgmentRatings"] for f in e.get("failures", [])]
    assert len(failed) == planned["pairs"] and all(f["reason"] == reason for f in failed)
    bigger = run(api, body(data, priced, maxCost=planned["cost"] * 2))
    assert "budgetReached" not in bigger["metadata"]
    assert bigger["metadata"]["usage"]["llmCalls"] == planned["calls"]


@pytest.mark.parametrize("fields, reason", [
    ({"maxCost": 1.0}, f"maxCost needs a model with pricing; model [{JUDGE_MODEL}] has none "
                       "(register it with pricing, or use maxTokens)"),
    ({"maxCost": 0}, "maxCost must be a number greater than 0, got: 0"),
    ({"maxCost": "1"}, "maxCost must be a number greater than 0, got: 1"),
    ({"maxTokens": 0}, "maxTokens must be a positive integer, got: 0"),
    ({"maxTokens": 1.5}, "maxTokens must be a positive integer, got: 1.5"),
    ({"maxTokens": True}, "maxTokens must be a positive integer, got: True"),
    ({"querySetId": "nope"}, "QuerySet [nope] does not exist"),
    ({"tokenLimit": 999}, "TokenLimit must be between 1000 and 500000, got: 999"),
])
def test_bad_budget_and_estimate_input(api: Api, data: dict[str, Any], fields: dict[str, Any],
                                       reason: str) -> None:
    payload = body(data, JUDGE_MODEL, **fields)
    api.srw("PUT", "/judgments", payload).error(400, reason)
    api.srw("POST", "/judgments/_estimate", payload).error(400, reason)


def test_estimate_takes_only_llm_judgments(api: Api, data: dict[str, Any]) -> None:
    for kind in ("IMPORT_JUDGMENT", None):
        api.srw("POST", "/judgments/_estimate", {"name": "x", "type": kind}).error(
            400, f"type must be LLM_JUDGMENT to estimate a judgment, got: {kind}")
    api.srw("POST", "/judgments/_estimate", body(data, JUDGE_MODEL, name=None)).error(
        400, "Invalid name: Text cannot be null")  # the create's own checks
    unpriced = estimate(api, body(data, JUDGE_MODEL))
    assert unpriced["cost"] is None and unpriced["modelId"] == JUDGE_MODEL
