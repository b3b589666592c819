"""The LLM provider layer against the local stand-in server (OpenAI, ML Commons) and botocore's
Stubber (Bedrock). No OpenSearch or Redis is involved."""

from __future__ import annotations

import base64
import json
import logging
import math
import pickle
import socket
import time
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.stub import Stubber

from workbench.bench import llm_server as fake
from workbench.bench.llm_server import LLMServer
from workbench.config import Config, ConfigError
from workbench.llm import (
    ChatRequest,
    LLMError,
    RetryPolicy,
    json_escape,
    load_registry,
    messages_string,
    ml_models_search_response,
    resolve,
)
from workbench.llm.base import parse_retry_after
from workbench.llm.bedrock import BedrockChatModel
from workbench.llm.mlcommons import EMPTY_RESULT, MLCommonsModel
from workbench.llm.openai import OpenAIChatModel

FAST = RetryPolicy(base=0.01, cap=0.02)
KEY = "sk-test-Zq81xVbT0p4LmN2c"
SCORE_FORMAT: dict[str, Any] = {
    "type": "json_schema",
    "json_schema": {
        "name": "rating_response",
        "strict": True,
        "schema": {
            "type": "object",
            "properties": {"ratings": {"type": "array", "items": {
                "type": "object",
                "properties": {"id": {"type": "string"}, "rating_score": {"type": "number"}},
                "required": ["id", "rating_score"],
                "additionalProperties": False,
            }}},
            "required": ["ratings"],
            "additionalProperties": False,
        },
    },
}
HITS = [
    {"id": "products::B01", "source": json.dumps({"title": "Red running shoes"})},
    {"id": "products::B02", "source": json.dumps({"title": "Blue winter hat"})},
]
SYSTEM = 'You are an expert search relevance rater.\n\t"Rate" every hit \\ carefully.'
USER = f"SearchText: red shoes; Hits: {json.dumps(HITS)}"


def config(**overrides: Any) -> Config:
    values: dict[str, Any] = {"llm_timeout": 5.0, "llm_max_retries": 2}
    values.update(overrides)
    return Config(**values)


def openai_model(llm: LLMServer, key_env: str | None = "WB_TEST_LLM_KEY", **overrides: Any
                 ) -> OpenAIChatModel:
    return OpenAIChatModel("gpt", llm.openai_base_url, "gpt-4o-mini", key_env,
                           config(**overrides), retry=FAST)


def request(response_format: dict[str, Any] | None = SCORE_FORMAT) -> ChatRequest:
    return ChatRequest(SYSTEM, USER, response_format)


# --- escaping ---------------------------------------------------------------------------------


def test_json_escape_touches_only_the_five_characters() -> None:
    assert json_escape('a\\b"c\nd\re\tf') == 'a\\\\b\\"c\\nd\\re\\tf'
    assert json_escape("é/\x01\u2028<>") == "é/\x01\u2028<>"


def test_messages_string_is_the_plugins_exact_text() -> None:
    assert messages_string('say "hi"', "line1\nline2") == (
        '[{"role":"system","content":"say \\"hi\\""},'
        '{"role":"user","content":"line1\\nline2"}]'
    )


# --- OpenAI-compatible ------------------------------------------------------------------------


def test_openai_call_sends_chat_completion_and_returns_text(
    llm: LLMServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("WB_TEST_LLM_KEY", KEY)
    result = openai_model(llm).chat(request())

    ratings = json.loads(result.text)["ratings"]
    assert ratings == [{"id": "products::B01", "rating_score": 1.0},
                       {"id": "products::B02", "rating_score": 0.0}]
    [sent] = llm.requests
    assert sent.path == "/v1/chat/completions"
    assert sent.body == {
        "model": "gpt-4o-mini",
        "messages": [{"role": "system", "content": SYSTEM}, {"role": "user", "content": USER}],
        "temperature": 0,
        "max_tokens": 1024,  # every call is bounded; 1024 when the caller gives no bound
        "response_format": SCORE_FORMAT,
    }


@pytest.mark.parametrize(("model", "options", "bound"), [
    ("gpt-4o-mini", None, {"max_tokens": 300}),
    # a reasoning model's hidden reasoning counts as output; it takes only this name
    ("o4-mini", {}, {"max_completion_tokens": 300 + 4096}),
    # the model's own options win
    ("gpt-4o-mini", {"temperature": 0, "max_tokens": 50}, {"max_tokens": 50}),
    ("o4-mini", {"max_completion_tokens": 9000}, {"max_completion_tokens": 9000}),
])
def test_every_openai_call_carries_an_output_bound(llm: LLMServer, model: str,
                                                   options: dict[str, Any] | None,
                                                   bound: dict[str, int]) -> None:
    chat = OpenAIChatModel("gpt", llm.openai_base_url, model, None, config(), retry=FAST,
                           body_options=options, reasoning=model.startswith("o"))
    chat.chat(ChatRequest(SYSTEM, USER, None, 300))
    [sent] = llm.requests
    assert {k: v for k, v in sent.body.items() if "max" in k} == bound


def test_an_answer_stopped_by_its_bound_says_so(llm: LLMServer) -> None:
    llm.reply_json({"id": "c", "object": "chat.completion", "choices": [{
        "index": 0, "finish_reason": "length",
        "message": {"role": "assistant", "content": '{"ratings": [{"id": "products::B0'}}],
        "usage": {"prompt_tokens": 10, "completion_tokens": 300, "total_tokens": 310}})
    result = openai_model(llm, key_env=None).chat(request())
    assert result.cut_off is True
    assert result.why_unusable("no JSON") == (
        "no JSON (the answer was cut off at its output-token bound)")


def test_openai_usage_is_the_reported_one(llm: LLMServer) -> None:
    result = openai_model(llm, key_env=None).chat(request())

    assert result.input_tokens == fake.prompt_tokens(SYSTEM, USER)
    assert result.output_tokens == fake.completion_tokens(result.text)
    assert result.tokens_estimated is False


def test_openai_usage_is_estimated_when_not_reported(llm: LLMServer) -> None:
    llm.reply_text("x" * 41)
    llm.no_usage()
    reported = openai_model(llm, key_env=None).chat(request())
    estimated = openai_model(llm, key_env=None).chat(request())

    assert (reported.output_tokens, reported.tokens_estimated) == (
        fake.completion_tokens("x" * 41), False)
    assert estimated.tokens_estimated is True
    assert estimated.input_tokens == math.ceil(len(SYSTEM + USER) / 4)
    assert estimated.output_tokens == math.ceil(len(estimated.text) / 4)


def test_openai_fallback_call_omits_response_format(llm: LLMServer) -> None:
    openai_model(llm, key_env=None).chat(request(None))

    assert "response_format" not in llm.requests[0].body


def test_openai_429_is_retried_after_retry_after(llm: LLMServer) -> None:
    llm.fail(429, retry_after=0.4)
    started = time.monotonic()
    result = openai_model(llm, key_env=None).chat(request())

    assert time.monotonic() - started >= 0.4  # the backoff alone would be ~0.01 s
    assert llm.calls == 2
    assert json.loads(result.text)["ratings"]


def test_openai_500_after_all_retries_is_a_retryable_error(
    llm: LLMServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("WB_TEST_LLM_KEY", KEY)
    llm.fail(500, times=3)
    with pytest.raises(LLMError) as caught:
        openai_model(llm, llm_max_retries=2).chat(request())

    error = caught.value
    assert llm.calls == 3
    assert (error.retryable, error.status, error.model_id) == (True, 500, "gpt")
    assert "model [gpt]" in str(error) and "HTTP 500" in str(error)
    assert "scripted failure" in str(error) and "3 attempts" in str(error)
    assert "\n" not in str(error) and KEY not in str(error)


def test_openai_400_is_final_at_once(llm: LLMServer) -> None:
    llm.fail(400, times=5)
    with pytest.raises(LLMError) as caught:
        openai_model(llm, key_env=None).chat(request())

    assert llm.calls == 1
    assert (caught.value.retryable, caught.value.status) == (False, 400)


def test_openai_timeout_is_retried_then_retryable(llm: LLMServer) -> None:
    llm.latency = 0.6
    started = time.monotonic()
    with pytest.raises(LLMError) as caught:
        openai_model(llm, key_env=None, llm_timeout=0.15, llm_max_retries=1).chat(request())

    assert caught.value.retryable is True
    assert "within 0.15s" in str(caught.value)
    assert llm.calls == 2
    assert time.monotonic() - started < 1.0  # gave up on timeouts, did not wait for answers


def test_openai_slow_first_answer_then_success(llm: LLMServer) -> None:
    llm.slow(0.6)
    result = openai_model(llm, key_env=None, llm_timeout=0.2).chat(request())

    assert json.loads(result.text)["ratings"] and llm.calls == 2


def test_openai_unreachable_server_is_retryable() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    model = OpenAIChatModel("gpt", f"http://127.0.0.1:{port}/v1", "m", None,
                            config(llm_max_retries=1), retry=FAST)
    with pytest.raises(LLMError) as caught:
        model.chat(request())
    assert caught.value.retryable is True and "cannot connect" in str(caught.value)


def test_openai_key_is_sent_as_bearer_and_never_shown(
    llm: LLMServer, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    monkeypatch.setenv("WB_TEST_LLM_KEY", KEY)
    model = openai_model(llm)
    model.chat(request())
    llm.fail(503, times=3)
    with pytest.raises(LLMError) as transient:
        model.chat(request())
    llm.reply_json({"error": {"message": f"Incorrect API key provided: {KEY}."}}, status=401)
    with pytest.raises(LLMError) as refused:
        model.chat(request())

    assert llm.requests[0].authorization == f"Bearer {KEY}"
    assert "authorization" not in {k.lower() for k in llm.requests[0].headers}
    assert "Incorrect API key provided" in str(refused.value)
    for text in [str(transient.value), str(refused.value), repr(refused.value),
                 *(r.getMessage() for r in caplog.records)]:
        assert KEY not in text
    assert any("retry" in r.getMessage() for r in caplog.records)  # the log was captured


def test_openai_key_is_read_at_call_time(llm: LLMServer, monkeypatch: pytest.MonkeyPatch) -> None:
    model = openai_model(llm)
    monkeypatch.setenv("WB_TEST_LLM_KEY", "first-key")
    model.chat(request())
    monkeypatch.setenv("WB_TEST_LLM_KEY", "rotated-key")
    model.chat(request())

    assert [r.authorization for r in llm.requests] == ["Bearer first-key", "Bearer rotated-key"]


def test_openai_missing_key_variable_fails_before_calling(
    llm: LLMServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("WB_TEST_LLM_KEY", raising=False)
    with pytest.raises(LLMError) as caught:
        openai_model(llm).chat(request())

    assert caught.value.retryable is False and "WB_TEST_LLM_KEY" in str(caught.value)
    assert llm.calls == 0


def test_openai_without_key_env_sends_no_authorization(llm: LLMServer) -> None:
    openai_model(llm, key_env=None).chat(request())

    assert llm.requests[0].has_authorization is False


def test_llm_error_survives_pickling() -> None:
    error = LLMError("m1", "HTTP 503 from x", status=503, retryable=True)
    copy = pickle.loads(pickle.dumps(error))

    assert (copy.model_id, copy.reason, copy.status, copy.retryable, str(copy)) == (
        "m1", "HTTP 503 from x", 503, True, "model [m1]: HTTP 503 from x")


def test_retry_policy_prefers_retry_after_within_caps() -> None:
    policy = RetryPolicy(base=0.5, cap=20.0, retry_after_cap=30.0)

    assert policy.delay(0, 7.0) == 7.0
    assert policy.delay(0, 120.0) == 30.0
    assert 0.25 <= policy.delay(0, None) <= 0.5
    assert 10.0 <= policy.delay(10, None) <= 20.0
    assert parse_retry_after("2") == 2.0 and parse_retry_after("soon") is None
    assert parse_retry_after("Wed, 21 Oct 2015 07:28:00 GMT") == 0.0


# --- ML Commons -------------------------------------------------------------------------------


def ml_model(llm: LLMServer, model_id: str = "abc123", **overrides: Any) -> MLCommonsModel:
    return MLCommonsModel(model_id, config(opensearch_url=llm.url, **overrides), retry=FAST)


def test_mlcommons_sends_the_plugins_parameters(llm: LLMServer) -> None:
    ml_model(llm).chat(ChatRequest('say "hi"\n', "tab\there", SCORE_FORMAT))

    [sent] = llm.requests
    assert sent.path == "/_plugins/_ml/models/abc123/_predict"
    parameters = sent.body["parameters"]
    assert set(sent.body) == {"parameters"}
    assert parameters["messages"] == (
        '[{"role":"system","content":"say \\"hi\\"\\n"},'
        '{"role":"user","content":"tab\\there"}]'
    )
    assert parameters["system_prompt"] == 'say \\"hi\\"\\n'
    assert parameters["user_prompt"] == "tab\\there"
    assert isinstance(parameters["response_format"], str)
    assert json.loads(parameters["response_format"]) == SCORE_FORMAT
    assert set(parameters) == {"messages", "system_prompt", "user_prompt", "response_format"}


def test_mlcommons_goes_to_the_next_node_when_one_refuses(llm: LLMServer) -> None:
    """OPENSEARCH_URL with a node that is down listed first: the call is retried on the next
    node, which is then used until the first one's time out is over."""
    model = MLCommonsModel("abc123", config(opensearch_url=f"http://127.0.0.1:9,{llm.url}"),
                           retry=FAST)
    for _ in range(3):
        model.chat(ChatRequest("s", "u", SCORE_FORMAT))
    assert [sent.path for sent in llm.requests] == ["/_plugins/_ml/models/abc123/_predict"] * 3
    assert model.nodes.order()[-1] == "http://127.0.0.1:9"  # left out for now


def test_mlcommons_sends_the_clusters_credentials_as_basic_auth(llm: LLMServer) -> None:
    ml_model(llm, opensearch_username="ml-user", opensearch_password="pä:ss").chat(request(None))

    expected = "Basic " + base64.b64encode("ml-user:pä:ss".encode()).decode()
    assert llm.requests[0].authorization == expected


def test_mlcommons_fallback_call_omits_response_format(llm: LLMServer) -> None:
    ml_model(llm).chat(request(None))

    assert set(llm.requests[0].body["parameters"]) == {"messages", "system_prompt", "user_prompt"}


def test_mlcommons_reads_openai_choices_and_usage(llm: LLMServer) -> None:
    result = ml_model(llm).chat(request())

    assert [r["id"] for r in json.loads(result.text)["ratings"]] == [h["id"] for h in HITS]
    assert result.tokens_estimated is False
    assert result.input_tokens == fake.prompt_tokens(SYSTEM, USER)


def test_mlcommons_reads_the_response_field(llm: LLMServer) -> None:
    llm.ml_response_field()
    result = ml_model(llm).chat(request())

    assert json.loads(result.text)["ratings"][0] == {"id": "products::B01", "rating_score": 1.0}


def predict_answer(data_as_map: dict[str, Any]) -> dict[str, Any]:
    return {"inference_results": [
        {"output": [{"name": "response", "dataAsMap": data_as_map}], "status_code": 200}]}


def test_mlcommons_response_field_wins_over_choices(llm: LLMServer) -> None:
    llm.reply_json(predict_answer(
        {"response": "from response", "choices": [{"message": {"content": "from choices"}}]}))
    result = ml_model(llm).chat(request())

    assert result.text == "from response"
    assert result.tokens_estimated is True  # no usage in that answer


def test_mlcommons_unrecognised_shape_has_the_contract_message(llm: LLMServer) -> None:
    llm.reply_json(predict_answer({"completion": "hi", "stop_reason": "end", "response": 3}))
    with pytest.raises(LLMError) as caught:
        ml_model(llm).chat(request())

    assert caught.value.reason == (
        'Unrecognised model response shape; expected a top-level "response" string set by the '
        "connector blueprint's post_process_function, but the response contained these fields "
        "instead: [completion, stop_reason, response]"
    )
    assert caught.value.retryable is False


@pytest.mark.parametrize("body", [
    {"inference_results": []},
    {"inference_results": [{"output": [], "status_code": 200}]},
    {},
])
def test_mlcommons_empty_output_has_the_contract_message(
    llm: LLMServer, body: dict[str, Any]
) -> None:
    llm.reply_json(body)
    with pytest.raises(LLMError) as caught:
        ml_model(llm).chat(request())

    assert caught.value.reason == (
        "Empty model result produced. Expected at least [1] tensor output and [1] model tensor, "
        "but got [0]"
    )
    assert caught.value.reason == EMPTY_RESULT


@pytest.mark.parametrize("status, body", [
    (400, {"error": "no handler found for uri [/_plugins/_ml/models/x/_predict] and method "
                    "[POST]", "status": 400}),
    (404, {"error": {"root_cause": [], "type": "status_exception",
                     "reason": "Failed to find model"}, "status": 404}),
])
def test_mlcommons_unknown_model_is_final(llm: LLMServer, status: int, body: Any) -> None:
    llm.reply_json(body, status=status, times=3)
    with pytest.raises(LLMError) as caught:
        ml_model(llm, model_id="nope").chat(request())

    assert llm.calls == 1 and caught.value.retryable is False
    assert "[nope] is neither registered with the workbench" in str(caught.value)
    assert "nor available through ML Commons" in str(caught.value)


def test_mlcommons_other_4xx_is_final_with_the_clusters_reason(llm: LLMServer) -> None:
    llm.fail(400, times=3)
    with pytest.raises(LLMError) as caught:
        ml_model(llm).chat(request())

    assert llm.calls == 1 and caught.value.retryable is False
    assert "Error from remote service: scripted failure 400" in str(caught.value)


def test_mlcommons_sends_cluster_credentials_and_retries_5xx(llm: LLMServer) -> None:
    url = llm.url.replace("http://", "http://admin:s3cret-pw@")
    llm.fail(503, times=2)
    result = MLCommonsModel("abc", config(opensearch_url=url), retry=FAST).chat(request())
    llm.fail(503, times=3)
    with pytest.raises(LLMError) as caught:
        MLCommonsModel("abc", config(opensearch_url=url), retry=FAST).chat(request())

    assert json.loads(result.text)["ratings"]
    expected = "Basic " + base64.b64encode(b"admin:s3cret-pw").decode()
    assert {r.authorization for r in llm.requests} == {expected}
    assert caught.value.retryable is True
    assert "s3cret" not in str(caught.value) and "admin" not in str(caught.value)


# --- Bedrock ----------------------------------------------------------------------------------


def bedrock(**overrides: Any) -> tuple[BedrockChatModel, Stubber]:
    client = boto3.client("bedrock-runtime", region_name="us-east-1",
                          aws_access_key_id="AKIDTEST", aws_secret_access_key="test-secret")
    stubber = Stubber(client)
    stubber.activate()
    model = BedrockChatModel("claude", "anthropic.claude-3-haiku", "us-east-1",
                             config(**overrides), client=client, retry=FAST)
    return model, stubber


def converse_answer(content: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "output": {"message": {"role": "assistant", "content": content}},
        "stopReason": "end_turn",
        "usage": {"inputTokens": 321, "outputTokens": 45, "totalTokens": 366},
        "metrics": {"latencyMs": 12},
    }


def converse_params(response_format: dict[str, Any] | None) -> dict[str, Any]:
    params: dict[str, Any] = {
        "modelId": "anthropic.claude-3-haiku",
        "system": [{"text": SYSTEM}],
        "messages": [{"role": "user", "content": [{"text": USER}]}],
        "inferenceConfig": {"maxTokens": 1024, "temperature": 0},
    }
    if response_format:
        params["toolConfig"] = {
            "tools": [{"toolSpec": {
                "name": "rating_response",
                "description": "Record the answer in the required JSON structure.",
                "inputSchema": {"json": response_format["json_schema"]["schema"]},
            }}],
            "toolChoice": {"tool": {"name": "rating_response"}},
        }
    return params


def test_bedrock_text_answer_and_usage() -> None:
    model, stubber = bedrock()
    stubber.add_response("converse", converse_answer([{"text": '{"ratings": []}'}]),
                         converse_params(None))
    result = model.chat(request(None))

    stubber.assert_no_pending_responses()
    assert result.text == '{"ratings": []}'
    assert (result.input_tokens, result.output_tokens, result.tokens_estimated) == (321, 45, False)


def test_bedrock_structured_answer_comes_from_the_forced_tool() -> None:
    model, stubber = bedrock()
    ratings = {"ratings": [{"id": "products::B01", "rating_score": 0.9}]}
    stubber.add_response("converse", converse_answer([
        {"text": "Here you go"},
        {"toolUse": {"toolUseId": "t1", "name": "rating_response", "input": ratings}},
    ]), converse_params(SCORE_FORMAT))
    result = model.chat(request())

    stubber.assert_no_pending_responses()
    assert json.loads(result.text) == ratings


def test_bedrock_throttling_is_retried() -> None:
    model, stubber = bedrock()
    stubber.add_client_error("converse", "ThrottlingException", "Too many requests", 429)
    stubber.add_client_error("converse", "ServiceUnavailableException", "busy", 503)
    stubber.add_response("converse", converse_answer([{"text": "ok"}]))
    result = model.chat(request(None))

    stubber.assert_no_pending_responses()
    assert result.text == "ok"


def test_bedrock_gives_up_after_retries_with_a_retryable_error() -> None:
    model, stubber = bedrock(llm_max_retries=1)
    for _ in range(2):
        stubber.add_client_error("converse", "ModelTimeoutException", "slow model", 408)
    with pytest.raises(LLMError) as caught:
        model.chat(request(None))

    stubber.assert_no_pending_responses()
    assert caught.value.retryable is True and "ModelTimeoutException" in str(caught.value)
    assert "model [claude]" in str(caught.value)


def test_bedrock_validation_error_is_not_retried() -> None:
    model, stubber = bedrock()
    stubber.add_client_error("converse", "ValidationException", "bad schema", 400)
    stubber.add_response("converse", converse_answer([{"text": "never used"}]))
    with pytest.raises(LLMError) as caught:
        model.chat(request())

    assert (caught.value.retryable, caught.value.status) == (False, 400)
    assert "ValidationException: bad schema" in str(caught.value)
    with pytest.raises(AssertionError):
        stubber.assert_no_pending_responses()  # the second answer was never asked for


# --- registry ---------------------------------------------------------------------------------


def openai_entry(model_id: str = "gpt", **extra: Any) -> dict[str, Any]:
    return {"id": model_id, "name": f"{model_id} model", "provider": "openai",
            "base_url": "https://api.example.com/v1", "model": "gpt-4o-mini",
            "api_key_env": "OPENAI_API_KEY", **extra}


BEDROCK_ENTRY = {"id": "claude", "name": "Claude", "provider": "bedrock",
                 "model": "anthropic.claude-3-haiku", "region": "us-east-1"}


def test_registry_merges_file_and_inline_lists(tmp_path: Path) -> None:
    models_file = tmp_path / "models.json"
    models_file.write_text(json.dumps([openai_entry(), BEDROCK_ENTRY]))
    inline = json.dumps([openai_entry(model="gpt-4.1"), openai_entry("local", api_key_env=None)])
    registry = load_registry(config(models_file=str(models_file), models_json=inline))

    assert list(registry) == ["gpt", "claude", "local"]
    gpt = registry.get("gpt")
    assert isinstance(gpt, OpenAIChatModel) and gpt.model == "gpt-4.1"
    assert isinstance(registry.get("claude"), BedrockChatModel)
    assert registry.get("unknown") is None


def test_empty_configuration_gives_an_empty_registry() -> None:
    registry = load_registry(config())

    assert len(registry) == 0 and registry.models() == []
    assert ml_models_search_response(registry)["hits"]["hits"] == []


@pytest.mark.parametrize("entries, message", [
    ({"id": "gpt"}, "expected a JSON list of models"),
    ([openai_entry(provider=None)], 'models[0] (id \'gpt\'): field "provider" must be one of'),
    ([openai_entry(provider="cohere")],
     "must be one of ['azure_openai', 'bedrock', 'openai'], got 'cohere'"),
    ([openai_entry(base_url=None)], 'field "base_url" is required'),
    ([openai_entry(base_url="api.example.com")], 'field "base_url" must be an http(s) URL'),
    ([openai_entry(model="")], 'field "model" is required'),
    ([openai_entry(apiKeyEnv="X")], 'field "apiKeyEnv" and "api_key_env" name the same'),
    ([openai_entry(region="x")], 'field "region" is not a setting of provider'),
    ([BEDROCK_ENTRY, {**BEDROCK_ENTRY, "region": 5}], 'models[1] (id \'claude\'): field "region"'),
    ([openai_entry(), openai_entry()], "model id 'gpt' is listed twice"),
    ([openai_entry(id="has space")], 'field "id" must be 1 to 128 letters'),
    ([{"provider": "openai"}], 'models[0]: field "id" is required'),
    (["gpt"], "models[0]: expected a JSON object, got str"),
])
def test_registry_validation_names_entry_and_field(entries: Any, message: str) -> None:
    with pytest.raises(ConfigError) as caught:
        load_registry(config(models_json=json.dumps(entries)))

    assert str(caught.value).startswith("WORKBENCH_MODELS: ")
    assert message in str(caught.value)


def test_registry_file_errors_name_the_file(tmp_path: Path) -> None:
    broken = tmp_path / "broken.json"
    broken.write_text('[{"id": "gpt",')
    with pytest.raises(ConfigError, match=r"WORKBENCH_MODELS_FILE \(.*broken.json\): not valid"):
        load_registry(config(models_file=str(broken)))
    with pytest.raises(ConfigError, match=r"missing.json\): cannot read the file"):
        load_registry(config(models_file=str(tmp_path / "missing.json")))


def test_registry_refuses_an_inline_api_key() -> None:
    with pytest.raises(ConfigError) as caught:
        load_registry(config(models_json=json.dumps([openai_entry(api_key=KEY)])))

    assert 'field "api_key" is not accepted' in str(caught.value)
    assert "api_key_env" in str(caught.value) and KEY not in str(caught.value)


def test_registry_refuses_a_key_pasted_into_api_key_env() -> None:
    with pytest.raises(ConfigError) as caught:
        load_registry(config(models_json=json.dumps([openai_entry(api_key_env=KEY)])))

    assert "NAME of an environment variable" in str(caught.value)
    assert KEY not in str(caught.value)


def test_models_are_listed_like_ml_commons_models_without_secrets() -> None:
    entries = [openai_entry(description="Our judge"), BEDROCK_ENTRY]
    registry = load_registry(config(models_json=json.dumps(entries)))
    docs = registry.models()

    assert docs == [
        {"name": "gpt model", "algorithm": "REMOTE", "model_state": "DEPLOYED",
         "model_id": "gpt", "description": "Our judge"},
        {"name": "Claude", "algorithm": "REMOTE", "model_state": "DEPLOYED",
         "model_id": "claude",
         "description": "Amazon Bedrock model anthropic.claude-3-haiku in us-east-1 "
                        "(registered with the workbench)"},
    ]
    assert "OPENAI_API_KEY" not in json.dumps(docs) and "api.example.com" not in json.dumps(docs)


def test_ml_models_search_response_is_a_search_envelope() -> None:
    registry = load_registry(config(models_json=json.dumps([openai_entry(), BEDROCK_ENTRY])))
    answer = ml_models_search_response(registry)

    assert answer["hits"]["total"] == {"value": 2, "relation": "eq"}
    assert [h["_id"] for h in answer["hits"]["hits"]] == ["gpt", "claude"]
    assert answer["hits"]["hits"][1]["_source"] == registry.models()[1]
    assert {"took", "timed_out", "_shards"} <= set(answer)


def test_resolve_uses_registered_models_then_ml_commons(
    llm: LLMServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("WB_TEST_LLM_KEY", KEY)
    entry = openai_entry("judge", base_url=llm.openai_base_url, api_key_env="WB_TEST_LLM_KEY")
    cfg = config(opensearch_url=llm.url, models_json=json.dumps([entry]))
    registry = load_registry(cfg)

    registered = resolve("judge", cfg, registry)
    fallback = resolve("Xy-12_ab", cfg, registry)
    registered.chat(request())
    fallback.chat(request())

    assert registered is registry.get("judge")
    assert isinstance(fallback, MLCommonsModel) and fallback.model_id == "Xy-12_ab"
    assert [r.path for r in llm.requests] == [
        "/v1/chat/completions", "/_plugins/_ml/models/Xy-12_ab/_predict"]
    assert llm.requests[0].authorization == f"Bearer {KEY}"
    assert llm.requests[1].authorization is None


def test_one_model_instance_serves_many_threads(llm: LLMServer) -> None:
    from concurrent.futures import ThreadPoolExecutor

    model = openai_model(llm, key_env=None)
    llm.latency = 0.05
    llm.fail(429, times=4, retry_after=0.01)
    with ThreadPoolExecutor(max_workers=12) as pool:
        results = list(pool.map(lambda _: model.chat(request()), range(24)))

    assert all(json.loads(r.text)["ratings"] for r in results)
    assert llm.calls == 28
