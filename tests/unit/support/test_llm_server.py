"""The stand-in LLM server's own behaviour, so tests built on it can trust its answers."""

from __future__ import annotations

import json
from typing import Any

import urllib3

from workbench.bench.llm_server import LLMServer, judge
from workbench.llm import json_escape, messages_string

HITS = [
    {"id": "idx::A", "source": json.dumps({"title": "Red running shoes", "color": "red"})},
    {"id": "idx::B", "source": json.dumps({"title": "Red hat"})},
    {"id": "idx::C", "source": json.dumps({"title": "Garden hose"})},
]
SCORE_SYSTEM = (
    "Rate on this scale:\n- 1.0: perfect\n- 0.0: irrelevant\n"
    '{"ratings": [{"id": "<id>", "rating_score": <number or RELEVANT/IRRELEVANT>}]}'
)
BINARY_SYSTEM = (
    "Rate on this scale:\n- RELEVANT: perfect\n- IRRELEVANT: completely irrelevant\n"
    '{"ratings": [{"id": "<id>", "rating_score": <number or RELEVANT/IRRELEVANT>}]}'
)
ENUM_FORMAT = {"type": "json_schema", "json_schema": {"name": "rating_response", "schema": {
    "type": "object", "properties": {"ratings": {"type": "array", "items": {
        "type": "object", "properties": {
            "id": {"type": "string"},
            "rating_score": {"type": "string", "enum": ["RELEVANT", "IRRELEVANT"]}}}}}}}}
HTTP = urllib3.PoolManager()


def openai_call(llm: LLMServer, user: str, system: str = SCORE_SYSTEM,
                response_format: dict[str, Any] | None = None) -> tuple[int, Any]:
    body: dict[str, Any] = {"model": "m", "messages": [
        {"role": "system", "content": system}, {"role": "user", "content": user}]}
    if response_format is not None:
        body["response_format"] = response_format
    response = HTTP.request("POST", llm.openai_base_url + "/chat/completions", json=body)
    return response.status, response.json()


def ratings(answer: Any) -> list[dict[str, Any]]:
    return list(json.loads(answer["choices"][0]["message"]["content"])["ratings"])


def test_judge_scores_word_overlap_with_the_query() -> None:
    user = f"SearchText: red running shoes; Hits: {json.dumps(HITS)}"

    assert judge(SCORE_SYSTEM, user, None) == [
        {"id": "idx::A", "rating_score": 1.0},
        {"id": "idx::B", "rating_score": 0.3},
        {"id": "idx::C", "rating_score": 0.0},
    ]


def test_judge_finds_the_query_in_a_custom_template_and_ignores_the_reference() -> None:
    templated = f"Query: garden hose\n\nDocuments: {json.dumps(HITS)}"
    referenced = f"SearchText: hose; Reference: red shoes; Hits: {json.dumps(HITS)}"

    assert [r["rating_score"] for r in judge(SCORE_SYSTEM, templated, None)] == [0.0, 0.0, 1.0]
    assert [r["rating_score"] for r in judge(SCORE_SYSTEM, referenced, None)] == [0.0, 0.0, 1.0]


def test_judge_answers_relevant_irrelevant_when_asked() -> None:
    user = f"SearchText: red shoes; Hits: {json.dumps(HITS)}"

    by_system = [r["rating_score"] for r in judge(BINARY_SYSTEM, user, None)]
    by_schema = [r["rating_score"] for r in judge(SCORE_SYSTEM, user, ENUM_FORMAT)]
    assert by_system == by_schema == ["RELEVANT", "RELEVANT", "IRRELEVANT"]


def test_openai_path_answers_with_usage_and_records_authorization(llm: LLMServer) -> None:
    response = HTTP.request(
        "POST", llm.openai_base_url + "/chat/completions",
        json={"messages": [{"role": "user", "content": f"SearchText: hose; Hits: {HITS}"}]},
        headers={"Authorization": "Bearer k1"},
    )
    answer = response.json()

    assert response.status == 200 and answer["object"] == "chat.completion"
    assert set(answer["usage"]) == {"prompt_tokens", "completion_tokens", "total_tokens"}
    [recorded] = llm.requests
    assert recorded.authorization == "Bearer k1" and recorded.kind == "openai"


def test_predict_path_reads_messages_and_answers_in_ml_commons_shape(llm: LLMServer) -> None:
    user = f"SearchText: garden hose; Hits: {json.dumps(HITS)}"
    parameters = {"messages": messages_string(BINARY_SYSTEM, user),
                  "system_prompt": json_escape(BINARY_SYSTEM), "user_prompt": json_escape(user)}
    response = HTTP.request("POST", llm.url + "/_plugins/_ml/models/m1/_predict",
                            json={"parameters": parameters})
    answer = response.json()

    output = answer["inference_results"][0]["output"][0]
    assert output["name"] == "response" and answer["inference_results"][0]["status_code"] == 200
    assert ratings(output["dataAsMap"])[2] == {"id": "idx::C", "rating_score": "RELEVANT"}
    assert llm.requests[0].user == user and llm.requests[0].system == BINARY_SYSTEM


def test_scripts_are_consumed_in_order_then_the_judge_answers(llm: LLMServer) -> None:
    user = f"SearchText: red; Hits: {json.dumps(HITS)}"
    llm.fail(503, times=2, retry_after=1)
    llm.reply_text("```json\n[]\n```")
    llm.partial(ids=["B"])
    llm.partial(drop_fraction=0.5)
    llm.extra_ids(["idx::Z"])
    llm.empty_ratings()

    first = HTTP.request("POST", llm.openai_base_url + "/chat/completions",
                         json={"messages": [{"role": "user", "content": user}]})
    assert (first.status, first.headers["Retry-After"]) == (503, "1")
    assert openai_call(llm, user)[0] == 503
    assert openai_call(llm, user)[1]["choices"][0]["message"]["content"] == "```json\n[]\n```"
    assert [r["id"] for r in ratings(openai_call(llm, user)[1])] == ["idx::A", "idx::C"]
    assert [r["id"] for r in ratings(openai_call(llm, user)[1])] == ["idx::A"]
    assert [r["id"] for r in ratings(openai_call(llm, user)[1])][-1] == "idx::Z"
    assert llm.pending == 1  # empty_ratings waits for a call with response_format
    assert len(ratings(openai_call(llm, user)[1])) == 3
    assert ratings(openai_call(llm, user, response_format=ENUM_FORMAT)[1]) == []
    assert len(ratings(openai_call(llm, user)[1])) == 3
    assert llm.calls == 9 and llm.pending == 0


def test_reject_response_format_only_hits_structured_calls(llm: LLMServer) -> None:
    user = f"SearchText: red; Hits: {json.dumps(HITS)}"
    llm.reject_response_format(times=2)

    assert openai_call(llm, user, response_format=ENUM_FORMAT)[0] == 400
    assert openai_call(llm, user)[0] == 200
    assert openai_call(llm, user, response_format=ENUM_FORMAT)[0] == 400
    assert openai_call(llm, user, response_format=ENUM_FORMAT)[0] == 200


def test_reset_forgets_everything(llm: LLMServer) -> None:
    llm.fail(500, times=3)
    llm.latency = 0.5
    openai_call(llm, "x")
    llm.reset()

    assert (llm.calls, llm.requests, llm.pending, llm.latency) == (0, [], 0, 0.0)
    assert openai_call(llm, "x")[0] == 200
