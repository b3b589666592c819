"""``_evaluate`` in the retrieval-evaluation API's shape, the 1-4 and 0-3 scales in both shapes,
and ``_evaluate/_batch``, over HTTP with the stand-in LLM (it grades by the share of query words
a result contains, spread over the scale the structured answer's enum gives)."""

from __future__ import annotations

import json
import math
import time
import uuid
from typing import Any

import pytest
from opensearchpy import OpenSearch

from tests.conftest import JUDGE_MODEL
from tests.support.api import Api
from tests.support.processes import Worker
from workbench.bench.llm_server import LLMServer
from workbench.config import Config
from workbench.store.indices import EVALUATE_BATCH_INDEX

QUERY = "red running shoes"
LIMIT = Config().evaluate_batch_limit  # the tests' servers run with the default


def dcg(grades: list[float]) -> float:
    return sum((2 ** g - 1) / math.log2(rank + 1) for rank, g in enumerate(grades, start=1))


def ndcg(grades: list[float]) -> float:
    return dcg(grades) / dcg(sorted(grades, reverse=True))


def brief_hits(run: str) -> list[dict[str, Any]]:
    """Three hits holding 3, 1 and 2 of the query's 3 words: the stand-in grades them 4, 2, 3 on
    the 1-4 scale and 3, 1, 2 on 0-3. Ids unique to the run keep the judgment cache out."""
    return [{"id": f"a-{run}", "text": "red running shoes for the city", "brand": "Acme"},
            {"id": f"b-{run}", "text": "a red wool hat", "brand": "Hatto"},
            {"id": f"c-{run}", "text": "blue running shoes", "brand": "Acme"}]


def brief_body(run: str, **extra: Any) -> dict[str, Any]:
    return {"query": {"inputs": {"text": QUERY}}, "eval": {"fields": ["text"], "debug": False},
            "hits": brief_hits(run), "modelId": JUDGE_MODEL, **extra}


def test_hand_worked_ndcg_figures() -> None:
    # 1-4: DCG = 15 + 3/log2(3) + 7/2, ideal 15 + 7/log2(3) + 3/2.
    want_1_4 = (15 + 3 / math.log2(3) + 7 / 2) / (15 + 7 / math.log2(3) + 3 / 2)
    # 0-3: DCG = 7 + 1/log2(3) + 3/2, ideal 7 + 3/log2(3) + 1/2.
    want_0_3 = (7 + 1 / math.log2(3) + 3 / 2) / (7 + 3 / math.log2(3) + 1 / 2)
    assert round(want_1_4, 4) == 0.9750 and round(want_0_3, 4) == 0.9721
    assert ndcg([4, 2, 3]) == pytest.approx(want_1_4)
    assert ndcg([3, 1, 2]) == pytest.approx(want_0_3)


def test_brief_request_and_response(api: Api, llm: LLMServer) -> None:
    run = uuid.uuid4().hex
    body = brief_body(run)
    reply = api.srw("POST", "/_evaluate", body)
    assert reply.status == 200, reply.data
    answer = reply.json
    assert set(answer) == {"metrics", "hits", "usage"}
    assert answer["metrics"] == pytest.approx(
        {"ndcg": 0.9750, "map": (1 / 1 + 2 / 3) / 2, "mrr": 1.0}, abs=5e-5)
    assert answer["metrics"]["ndcg"] == pytest.approx(
        (15 + 3 / math.log2(3) + 7 / 2) / (15 + 7 / math.log2(3) + 3 / 2))
    hits = answer["hits"]
    assert [h["index"] for h in hits] == [0, 1, 2]
    assert [h["fields"] for h in hits] == body["hits"]  # as given, id and unjudged fields too
    assert [h["score"] for h in hits] == [4, 2, 3]
    assert all(isinstance(h["score"], int) for h in hits)
    assert [h["relevant"] for h in hits] == [True, False, True]  # relevant from 3
    assert [h["justification"] for h in hits] == [
        "3 of 3 query words appear in the result.", "1 of 3 query words appear in the result.",
        "2 of 3 query words appear in the result."]
    assert set(hits[0]) == {"index", "fields", "relevant", "score", "justification"}
    usage = answer["usage"]
    assert usage["evaluation_input_tokens"] > 0 and usage["evaluation_output_tokens"] > 0
    assert usage["totalTokens"] == (usage["evaluation_input_tokens"]
                                    + usage["evaluation_output_tokens"])
    assert usage["llmCalls"] == 1 and usage["cacheHits"] == 0 and usage["latencyMs"] > 0
    assert "cost" not in usage  # the test model has no prices

    (request,) = llm.requests
    system = request.system
    for question in ("Highly relevant?", "Moderately relevant?", "Partially relevant?",
                     "Not relevant?"):
        assert question in system
    assert "yes/no questions" in system
    assert "one final grade from 1 to 4" in system
    assert "confidence in that grade from 1" in system and "to 5 (certain)" in system
    item = request.response_format["json_schema"]["schema"]["properties"][  # type: ignore[index]
        "ratings"]["items"]
    assert item["properties"]["grade"]["enum"] == [1, 2, 3, 4]
    assert set(item["required"]) == {"id", "grade", "confidence", "justification"}
    # Only eval.fields are shown to the judge.
    shown = json.loads(request.user.split("Results: ", 1)[1])
    assert [json.loads(r["content"]) for r in shown] == [{"text": h["text"]}
                                                         for h in body["hits"]]

    again = api.srw("POST", "/_evaluate", body).json
    assert len(llm.requests) == 1  # the grades came from the judgment cache
    assert again["usage"]["cacheHits"] == 3 and again["usage"]["evaluation_input_tokens"] == 0
    assert [h["score"] for h in again["hits"]] == [4, 2, 3]


def test_brief_debug_and_k(api: Api, llm: LLMServer) -> None:
    run = uuid.uuid4().hex
    body = brief_body(run)
    body["eval"]["debug"] = True
    answer = api.srw("POST", "/_evaluate", {**body, "k": 2}).json
    assert [h["index"] for h in answer["hits"]] == [0, 1]  # only the first k are judged
    assert answer["metrics"]["ndcg"] == pytest.approx(ndcg([4, 2]))
    debug = answer["debug"]
    assert debug["scale"] == "1-4" and debug["k"] == 2 and debug["modelId"] == JUDGE_MODEL
    assert [r["judged"] for r in debug["results"]] == [{"text": h["text"]}
                                                       for h in body["hits"][:2]]
    # The stand-in's confidence 0.9 is outside the 1-5 range the rubric asks for: dropped.
    assert [r["confidence"] for r in debug["results"]] == [None, None]
    assert debug["llmCalls"][0]["structured"] is True


def test_a_hit_the_model_did_not_rate_has_no_score(api: Api, llm: LLMServer) -> None:
    run = uuid.uuid4().hex
    llm.partial(ids=[f"b-{run}"])
    answer = api.srw("POST", "/_evaluate", brief_body(run)).json
    unrated = answer["hits"][1]
    assert unrated["index"] == 1 and unrated["score"] is None and unrated["relevant"] is False
    assert unrated["justification"] == "the model did not rate this result"
    assert [h["score"] for h in answer["hits"]] == [4, None, 3]


def test_brief_shape_on_the_0_3_scale(api: Api, llm: LLMServer) -> None:
    body = brief_body(uuid.uuid4().hex, judgeOptions={"scale": "0-3"})
    answer = api.srw("POST", "/_evaluate", body).json
    assert [h["score"] for h in answer["hits"]] == [3, 1, 2]
    assert [h["relevant"] for h in answer["hits"]] == [True, False, True]  # relevant from 2
    want = (7 + 1 / math.log2(3) + 3 / 2) / (7 + 3 / math.log2(3) + 1 / 2)
    assert answer["metrics"]["ndcg"] == pytest.approx(want)
    assert round(answer["metrics"]["ndcg"], 4) == 0.9721
    assert "3 = highly relevant" in llm.requests[0].system


def test_workbench_shape_on_the_1_4_scale(api: Api, llm: LLMServer) -> None:
    run = uuid.uuid4().hex
    hits = [{"id": h["id"], "title": h["text"]} for h in brief_hits(run)]
    answer = api.srw("POST", "/_evaluate", {
        "queryText": QUERY, "hits": hits, "k": 3, "modelId": JUDGE_MODEL,
        "judgeOptions": {"scale": "1-4"}}).json
    assert [h["rating"] for h in answer["hits"]] == [4.0, 2.0, 3.0]
    assert [h["relevant"] for h in answer["hits"]] == [True, False, True]
    assert [h["confidence"] for h in answer["hits"]] == [None, None, None]
    assert answer["metrics"]["NDCG@3"] == pytest.approx(ndcg([4, 2, 3]))
    assert "Q1. Highly relevant?" in llm.requests[0].system
    # The default stays 0-3.
    default = api.srw("POST", "/_evaluate", {"queryText": QUERY, "hits": hits, "k": 3,
                                             "modelId": JUDGE_MODEL}).json
    assert [h["rating"] for h in default["hits"]] == [3.0, 1.0, 2.0]
    assert default["metrics"]["NDCG@3"] == pytest.approx(ndcg([3, 1, 2]))


def test_brief_with_a_reference_judge(api: Api) -> None:
    body = {"query": {"inputs": {"text": "red shoes"}}, "judge": "token_overlap",
            "referenceAnswer": "red running shoes",
            "hits": [{"id": "1", "text": "red running shoes"}, {"id": "2", "text": "hat"}]}
    answer = api.srw("POST", "/_evaluate", body).json
    assert [(h["score"], h["relevant"]) for h in answer["hits"]] == [(1, True), (0, False)]
    assert answer["usage"]["llmCalls"] == 0


@pytest.mark.parametrize("change, reason", [
    ({"query": {}}, "query.inputs.text is required"),
    ({"query": {"inputs": {"text": "  "}}}, "query.inputs.text is required"),
    ({"query": {"inputs": "red"}}, 'query.inputs must be an object: {"text": "..."}'),
    ({"query": {"inputs": {"text": 3}}}, "query.inputs.text must be a string"),
    ({"eval": {"fields": []}}, "eval.fields must be a non-empty list of field names"),
    ({"eval": {"fields": "text"}}, "eval.fields must be a non-empty list of field names"),
    ({"eval": {"debug": "yes"}}, "eval.debug must be true or false"),
    ({"eval": []}, 'eval must be an object: {"fields": [...], "debug": false}'),
    ({"hits": None}, "hits is required: this request shape judges the hits it is given"),
    ({"hits": [{"id": "a", "text": "x"}, {"id": "b", "text": "y"}, {"text": "z"}]},
     "hits[2] has no id"),
    ({"hits": [{"id": "a", "title": "x"}]},
     "hits[0] has none of the fields in eval.fields (text)"),
    ({"modelId": None}, "modelId is required: this request shape names no model, so give the "
                        "workbench's modelId (a registered model or an ML Commons model id)"),
    ({"k": 0}, "k must be a positive integer, got: 0"),
    ({"judgeOptions": {"scale": "1-5"}}, 'scale must be one of: 0-3, 1-4, got: "1-5"'),
    ({"judgeOptions": {"scale": ["1-4"]}}, 'scale must be one of: 0-3, 1-4, got: ["1-4"]'),
    ({"judge": "semantic"}, "referenceAnswer is required for the semantic judge"),
    ({"modelId": "no-such-model"}, None),
])
def test_brief_bad_input(api: Api, change: dict[str, Any], reason: str | None) -> None:
    body = {**brief_body(uuid.uuid4().hex), **change}
    reply = api.srw("POST", "/_evaluate", {k: v for k, v in body.items() if v is not None})
    if reason is None:
        assert reply.status == 400 and "no-such-model" in reply.reason, reply.data
    else:
        reply.error(400, reason)


def test_batch_of_both_shapes(api: Api, llm: LLMServer) -> None:
    run = uuid.uuid4().hex
    workbench_hits = [{"id": f"w{i}-{run}", "title": t} for i, t in enumerate(
        ["leather wallet", "red wallet", "wallet chain", "shoes"])]
    reply = api.srw("POST", "/_evaluate/_batch", {
        "modelId": JUDGE_MODEL,
        "queries": [
            {"query": {"inputs": {"text": QUERY}}, "hits": brief_hits(run)},
            {"queryText": "brown leather wallet", "hits": workbench_hits, "k": 4},
            {"query": {"inputs": {"text": "wool hat"}}, "eval": {"fields": ["text"]},
             "hits": [{"id": f"h1-{run}", "text": "warm coat"},
                      {"id": f"h2-{run}", "text": "wool hat"}]},
        ]})
    assert reply.status == 200, reply.data
    results = reply.json["results"]
    first, second, third = results
    assert [h["score"] for h in first["hits"]] == [4, 2, 3]
    assert set(first) == {"metrics", "hits", "usage"}
    # 0-3 in the workbench shape: 2 of 3 words, 1, 1 (wallet chain), 0.
    assert [h["rating"] for h in second["hits"]] == [2.0, 1.0, 1.0, 0.0]
    assert second["queryText"] == "brown leather wallet"
    assert [h["score"] for h in third["hits"]] == [1, 4]
    summary = reply.json["summary"]
    assert summary["queries"] == 3
    ndcgs = [ndcg([4, 2, 3]), ndcg([2, 1, 1, 0]), ndcg([1, 4])]
    maps = [(1 + 2 / 3) / 2, 1.0, 1 / 2]  # second: only the first is relevant (2 and up)
    mrrs = [1.0, 1.0, 1 / 2]
    assert summary["metrics"]["ndcg"] == pytest.approx(sum(ndcgs) / 3)
    assert summary["metrics"]["map"] == pytest.approx(sum(maps) / 3)
    assert summary["metrics"]["mrr"] == pytest.approx(sum(mrrs) / 3)
    assert "NDCG@4" not in summary["metrics"]  # not reported by every query
    assert first["metrics"]["ndcg"] == pytest.approx(ndcgs[0])
    assert second["metrics"]["NDCG@4"] == pytest.approx(ndcgs[1])
    usage = summary["usage"]
    calls = [first["usage"]["llmCalls"], second["usage"]["llmCalls"], third["usage"]["llmCalls"]]
    assert usage["llmCalls"] == sum(calls) == 3 == llm.calls
    assert usage["inputTokens"] == (first["usage"]["evaluation_input_tokens"]
                                    + second["usage"]["inputTokens"]
                                    + third["usage"]["evaluation_input_tokens"])
    assert usage["outputTokens"] == (first["usage"]["evaluation_output_tokens"]
                                     + second["usage"]["outputTokens"]
                                     + third["usage"]["evaluation_output_tokens"])
    assert usage["totalTokens"] == usage["inputTokens"] + usage["outputTokens"]
    assert usage["cacheHits"] == 0 and usage["latencyMs"] > 0


def test_batch_shared_settings(api: Api, llm: LLMServer) -> None:
    run = uuid.uuid4().hex
    reply = api.srw("POST", "/_evaluate/_batch", {
        "modelId": JUDGE_MODEL, "k": 2, "fields": ["text"], "judgeOptions": {"scale": "0-3"},
        "queries": [{"query": {"inputs": {"text": QUERY}}, "hits": brief_hits(run)},
                    {"queryText": QUERY, "hits": brief_hits(run)[::-1]}]})
    assert reply.status == 200, reply.data
    first, second = reply.json["results"]
    assert [h["score"] for h in first["hits"]] == [3, 1]
    assert [h["rating"] for h in second["hits"]] == [2.0, 1.0]
    metrics = reply.json["summary"]["metrics"]
    assert metrics["NDCG@2"] == pytest.approx((ndcg([3, 1]) + ndcg([2, 1])) / 2)
    assert metrics["Precision@2"] == pytest.approx((1 / 2 + 1 / 2) / 2)
    assert metrics["ndcg"] == metrics["NDCG@2"]


@pytest.mark.parametrize("body, reason", [
    ({"queries": []}, "queries must be a non-empty list of evaluations (each an _evaluate "
                      "body, in either shape)"),
    ({"queries": [{"queryText": "x", "hits": [{"id": "1"}]}], "size": 3},
     "Unknown field [size] of a batch: give queries and the shared settings judge, modelId, k, "
     "fields, judgeOptions"),
    ({"queries": [{"queryText": "x", "hits": [{"id": "1", "t": "x"}]}, 3]},
     "queries[1] must be an object (an _evaluate body)"),
    ({"queries": [{"queryText": "x", "hits": [{"id": "1", "t": "x"}]},
                  {"query": {"inputs": {"text": "y"}}, "hits": [{"text": "y"}]}]},
     "queries[1].hits[0] has no id"),
    ({"queries": [{"query": {"inputs": {}}, "hits": [{"id": "1", "text": "y"}]}]},
     "queries[0].query.inputs.text is required"),
    ({"queries": [{"queryText": "x", "hits": [{"id": "1", "t": "x"}], "judge": "semantic"}]},
     "queries[0].referenceAnswer is required for the semantic judge"),
    ({"queries": [{"queryText": "x", "hits": [{"id": "1", "t": "x"}], "judge": "oracle"}]},
     "queries[0]: Unknown judge [oracle]; use one of: llm, token_overlap, semantic"),
    ({"queries": [{"queryText": "x", "hits": [{"id": "1", "t": "x"}]}], "modelId": 3},
     "Field 'modelId' must be a string"),
])
def test_batch_bad_input(api: Api, llm: LLMServer, body: dict[str, Any], reason: str) -> None:
    api.srw("POST", "/_evaluate/_batch", {"modelId": JUDGE_MODEL, **body}).error(400, reason)
    assert llm.calls == 0


def test_batch_llm_failure_names_the_entry(api: Api, llm: LLMServer) -> None:
    llm.fail(500, times=50)
    reply = api.srw("POST", "/_evaluate/_batch", {"modelId": JUDGE_MODEL, "queries": [
        {"query": {"inputs": {"text": "x"}}, "hits": [{"id": uuid.uuid4().hex, "text": "x"}]}]})
    assert reply.status == 502 and reply.json["error"]["type"] == "llm_exception"
    assert reply.reason.startswith(f"queries[0]: LLM [{JUDGE_MODEL}] failed:"), reply.reason


def wait_batch(api: Api, batch_id: str) -> dict[str, Any]:
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        reply = api.srw("GET", f"/_evaluate/_batch/{batch_id}")
        assert reply.status == 200, reply.data
        if reply.json["status"] != "PROCESSING":
            return reply.json  # type: ignore[no-any-return]
        time.sleep(0.2)
    raise AssertionError(batch_id)


def overlap_entry(number: int) -> dict[str, Any]:
    return {"queryText": f"item {number}", "judge": "token_overlap",
            "referenceAnswer": f"item {number}", "hits": [{"id": "1", "t": f"item {number}"}]}


def test_a_batch_above_the_limit_is_a_job(api: Api, llm: LLMServer, worker: Worker) -> None:
    run = uuid.uuid4().hex
    entries = [{"query": {"inputs": {"text": QUERY}}, "hits": brief_hits(run)},
               *(overlap_entry(n) for n in range(LIMIT))]
    reply = api.srw("POST", "/_evaluate/_batch", {"modelId": JUDGE_MODEL, "queries": entries})
    assert reply.status == 202, reply.data
    assert reply.json["status"] == "PROCESSING" and reply.json["queries"] == LIMIT + 1
    done = wait_batch(api, reply.json["id"])
    assert done["status"] == "COMPLETED", done
    assert done["id"] == reply.json["id"] and done["queries"] == LIMIT + 1
    result = done["result"]
    first = result["results"][0]
    assert [h["score"] for h in first["hits"]] == [4, 2, 3]
    assert [h["fields"] for h in first["hits"]] == brief_hits(run)
    assert all(r["hits"][0]["rating"] == 1.0 for r in result["results"][1:])
    summary = result["summary"]
    assert summary["queries"] == LIMIT + 1
    assert summary["metrics"]["ndcg"] == pytest.approx((ndcg([4, 2, 3]) + LIMIT) / (LIMIT + 1))
    assert summary["usage"]["llmCalls"] == 1 == llm.calls

    # At the limit it is answered at once.
    at_limit = api.srw("POST", "/_evaluate/_batch",
                       {"queries": [overlap_entry(n) for n in range(LIMIT)]})
    assert at_limit.status == 200 and at_limit.json["summary"]["queries"] == LIMIT
    # Bad input is refused before anything is stored or queued.
    api.srw("POST", "/_evaluate/_batch", {"queries": [*entries[1:], {"queryText": "x"}]}).error(
        400, f"queries[{LIMIT}]: give hits, a searchConfigurationId, or an index and a "
             "searchQuery")
    api.srw("GET", "/_evaluate/_batch/no-such-batch").error(
        404, "Evaluation batch not found: no-such-batch")
    # An ended batch can be deleted with its result; a running one cannot.
    deleted = api.srw("DELETE", f"/_evaluate/_batch/{reply.json['id']}")
    assert deleted.status == 200 and deleted.json["result"] == "deleted"
    api.srw("GET", f"/_evaluate/_batch/{reply.json['id']}").error(
        404, f"Evaluation batch not found: {reply.json['id']}")
    api.srw("DELETE", "/_evaluate/_batch/no-such-batch").error(
        404, "Evaluation batch not found: no-such-batch")


def test_an_llm_failure_ends_the_job_error(api: Api, llm: LLMServer, worker: Worker) -> None:
    llm.fail(500, times=50)
    entries = [{"query": {"inputs": {"text": "x"}}, "hits": [{"id": uuid.uuid4().hex,
                                                               "text": "x"}]},
               *(overlap_entry(n) for n in range(LIMIT))]
    reply = api.srw("POST", "/_evaluate/_batch", {"modelId": JUDGE_MODEL, "queries": entries})
    assert reply.status == 202, reply.data
    done = wait_batch(api, reply.json["id"])
    assert done["status"] == "ERROR" and "result" not in done
    assert done["error"].startswith(f"queries[0]: LLM [{JUDGE_MODEL}] failed:"), done


def test_a_failed_batch_job_keeps_what_its_judged_entries_cost(
        api: Api, llm: LLMServer, worker: Worker) -> None:
    """One entry names a model no one knows; the others are judged by the stand-in, one call
    each: the ERROR keeps those calls and their tokens in ``usage``."""
    run = uuid.uuid4().hex
    entries = [{"query": {"inputs": {"text": "x"}}, "modelId": f"nope-{run[:6]}",
                "hits": [{"id": "x", "text": "x"}]},
               *({"query": {"inputs": {"text": f"item {n}"}},
                  "hits": [{"id": f"{run}-{n}", "text": f"item {n}"}]} for n in range(LIMIT))]
    reply = api.srw("POST", "/_evaluate/_batch", {"modelId": JUDGE_MODEL, "queries": entries})
    assert reply.status == 202, reply.data
    done = wait_batch(api, reply.json["id"])
    assert done["status"] == "ERROR" and "result" not in done, done
    assert done["error"].startswith("queries[0]: "), done
    usage = done["usage"]
    assert usage["llmCalls"] == LIMIT == llm.calls, (usage, llm.calls)
    assert usage["inputTokens"] > 0 and usage["outputTokens"] > 0


def test_a_running_batch_is_not_deleted(api: Api, direct: OpenSearch) -> None:
    """Its job would write it back when it ends: a 409 until then."""
    batch_id = f"running-{uuid.uuid4().hex}"
    direct.index(index=EVALUATE_BATCH_INDEX, id=batch_id, refresh=True,
                 body={"id": batch_id, "status": "PROCESSING", "queries": 1})
    try:
        api.srw("DELETE", f"/_evaluate/_batch/{batch_id}").error(
            409, f"Evaluation batch [{batch_id}] is PROCESSING; delete it once it has ended")
        assert direct.exists(index=EVALUATE_BATCH_INDEX, id=batch_id)
    finally:
        direct.delete(index=EVALUATE_BATCH_INDEX, id=batch_id, ignore=[404])
