"""Model records (one validation for the environment list and the models route), the request
bodies they produce (reasoning models, Azure OpenAI) against the stand-in server, and the
encryption of stored API keys. No OpenSearch or Redis."""

from __future__ import annotations

import json
from typing import Any

import pytest
from cryptography.fernet import Fernet

from workbench.bench.llm_server import AZURE_ACCESS_DENIED, UNSUPPORTED, LLMServer
from workbench.config import Config, ConfigError
from workbench.llm import ChatRequest, LLMError, RetryPolicy, load_registry
from workbench.llm.bedrock import BedrockChatModel
from workbench.llm.openai import OpenAIChatModel
from workbench.llm.registry import build_model
from workbench.llm.secrets import SecretBox, SecretKeyMissing, UndecryptableKey
from workbench.llm.spec import AZURE_API_VERSION, ModelSpec, SpecError, parse_spec

KEY = "sk-azure-Hq72LmQ0xPz"
HITS = [{"id": "idx::1", "source": "red running shoes"}]
REQUEST = ChatRequest("Rate each hit.", f"SearchText: red shoes; Hits: {json.dumps(HITS)}")


def config() -> Config:
    return Config(llm_timeout=5.0, llm_max_retries=0)


def openai(**extra: Any) -> dict[str, Any]:
    return {"id": "gpt", "provider": "openai", "endpoint": "https://api.openai.com/v1",
            "model": "gpt-4o-mini", **extra}


def azure(**extra: Any) -> dict[str, Any]:
    return {"id": "az", "provider": "azure_openai", "endpoint": "https://res.openai.azure.com/",
            "deployment": "judge-dep", **extra}


def spec_error(item: dict[str, Any], **kwargs: Any) -> SpecError:
    with pytest.raises(SpecError) as caught:
        parse_spec(item, **kwargs)
    return caught.value


# --- records ----------------------------------------------------------------------------------


def test_an_openai_model_sends_temperature_zero_by_default() -> None:
    spec = parse_spec(openai())

    assert spec.chat_url() == "https://api.openai.com/v1/chat/completions"
    assert spec.body_options() == {"temperature": 0}
    assert spec.name == "gpt"  # the id when no name is given


@pytest.mark.parametrize("model", ["o1", "o3-mini", "o4-mini-2025-04-16", "gpt-5",
                                   "openai/o3", "O1-preview"])
def test_known_reasoning_models_send_no_temperature_by_default(model: str) -> None:
    assert "temperature" not in parse_spec(openai(model=model)).body_options()


def test_options_are_sent_as_given_and_null_temperature_sends_none() -> None:
    spec = parse_spec(openai(options={"temperature": None, "max_completion_tokens": 2000,
                                      "reasoning_effort": "low"}))

    assert spec.body_options() == {"max_completion_tokens": 2000, "reasoning_effort": "low"}
    explicit = parse_spec(openai(model="o3-mini", options={"temperature": 1}))
    assert explicit.body_options() == {"temperature": 1}


def test_azure_builds_the_deployment_url_with_the_default_api_version() -> None:
    spec = parse_spec(azure())

    assert spec.api_version == AZURE_API_VERSION
    assert spec.chat_url() == ("https://res.openai.azure.com/openai/deployments/judge-dep/"
                               f"chat/completions?api-version={AZURE_API_VERSION}")
    assert parse_spec(azure(apiVersion="2025-01-01-preview")).chat_url().endswith(
        "?api-version=2025-01-01-preview")


@pytest.mark.parametrize("item, field, problem", [
    (openai(provider="cohere"), "provider", "must be one of"),
    (openai(provider={"a": 1}), "provider", "must be one of"),  # was a 500 (found by fuzzing)
    (openai(provider=["openai"]), "provider", "must be one of"),
    (openai(endpoint=None), "endpoint", "is required"),
    (openai(endpoint="ftp://x"), "endpoint", "must be an http(s) URL"),
    (openai(endpoint="https://u:p@api.example.com/v1"), "endpoint", "must not carry credentials"),
    (openai(endpoint="https://api.example.com/v1?x=1"), "endpoint", "without query"),
    (openai(model=""), "model", "is required"),
    (openai(model=5), "model", "is required"),
    (openai(region="us-east-1"), "region", "is not a setting of provider 'openai'"),
    (openai(id="has space"), "id", "must be 1 to 128 letters"),
    (openai(name="x" * 201), "name", "at most 200"),
    (openai(options=[]), "options", "must be an object"),
    (openai(options={"top_k": 3}), "options.top_k", "is not an option of provider 'openai'"),
    (openai(options={"temperature": 3}), "options.temperature", "from 0 to 2"),
    (openai(options={"temperature": "0"}), "options.temperature", "must be a number"),
    (openai(options={"max_completion_tokens": 0}), "options.max_completion_tokens",
     "positive integer"),
    (openai(options={"max_tokens": True}), "options.max_tokens", "positive integer"),
    (openai(options={"max_tokens": 5, "max_completion_tokens": 5}), "options.max_tokens",
     "cannot both be set"),
    (openai(options={"reasoning_effort": "extreme"}), "options.reasoning_effort", "one of"),
    (openai(pricing={"inputPerMillion": -1}), "pricing.inputPerMillion", "from 0 to"),
    (openai(pricing={"perToken": 1}), "pricing.perToken", "is not a price"),
    (openai(pricing=3), "pricing", "must be an object"),
    (openai(apiKeyEnv="sk-abc-def"), "apiKeyEnv", "NAME of an environment variable"),
    (openai(base_url="https://x/v1"), "base_url", 'and "endpoint" name the same setting'),
    (azure(deployment=None), "deployment", "is required"),
    (azure(deployment="a/b"), "deployment", "must be the deployment name"),
    (azure(apiVersion="2024 10"), "apiVersion", "must look like"),
    ({"id": "c", "provider": "bedrock", "model": "m", "apiKey": "k"}, "apiKey",
     "is not a setting of provider 'bedrock'"),
    ({"id": "c", "provider": "bedrock", "model": "m", "options": {"temperature": 1.5}},
     "options.temperature", "from 0 to 1"),
    ({"id": "c", "provider": "bedrock", "model": "m", "options": {"reasoning_effort": "low"}},
     "options.reasoning_effort", "is not an option of provider 'bedrock'"),
])
def test_a_bad_record_names_the_field(item: dict[str, Any], field: str, problem: str) -> None:
    error = spec_error(item)

    assert error.field == field and problem in str(error), str(error)


def test_a_secret_pasted_into_a_field_is_not_echoed() -> None:
    error = spec_error(openai(apiKeyEnv="sk-live-1234567890abcdef"))

    assert "sk-live" not in str(error)


def test_the_environment_list_uses_the_same_validation_in_its_own_spelling() -> None:
    entry = {"id": "az", "provider": "azure_openai", "base_url": "https://res.openai.azure.com",
             "deployment": "judge-dep", "api_version": "2024-06-01", "api_key_env": "AZ_KEY",
             "options": {"temperature": None, "max_completion_tokens": 500},
             "pricing": {"inputPerMillion": 1.1, "outputPerMillion": 4.4}}
    registry = load_registry(Config(models_json=json.dumps([entry])))
    spec = registry.entry("az")

    assert spec is not None and spec.api_version == "2024-06-01"
    assert spec.pricing == {"inputPerMillion": 1.1, "outputPerMillion": 4.4}
    model = registry.get("az")
    assert isinstance(model, OpenAIChatModel) and model.key_header == "api-key"
    assert model.body_options == {"max_completion_tokens": 500}
    with pytest.raises(ConfigError, match=r'models\[0\] \(id .az.\): field "api_version" must'):
        load_registry(Config(models_json=json.dumps([{**entry, "api_version": "x y"}])))
    with pytest.raises(ConfigError, match=r'field "base_url" is required'):
        load_registry(Config(models_json=json.dumps([{"id": "o", "provider": "openai",
                                                      "model": "m"}])))


def test_the_public_view_holds_no_secret_and_no_url_credentials() -> None:
    spec = parse_spec(openai(endpoint="https://user:pw@gw.example.com/v1", apiKeyEnv="GW_KEY"),
                      allow_url_credentials=True)

    shown = json.dumps(spec.public())
    assert "pw" not in shown and "gw.example.com" in shown and "GW_KEY" in shown


def test_bedrock_options_become_the_inference_config() -> None:
    plain = build_model(parse_spec({"id": "c", "provider": "bedrock", "model": "m"}), config())
    tuned = build_model(parse_spec({"id": "c", "provider": "bedrock", "model": "m",
                                    "options": {"temperature": None, "max_tokens": 300}}),
                        config())

    assert isinstance(plain, BedrockChatModel) and plain.inference == {"temperature": 0}
    assert isinstance(tuned, BedrockChatModel) and tuned.inference == {"maxTokens": 300}


# --- payloads against the stand-in -----------------------------------------------------------


def model_for(llm: LLMServer, spec: ModelSpec, api_key: str | None = None) -> Any:
    built = build_model(spec, config(), api_key)
    assert isinstance(built, OpenAIChatModel)
    built.retry = RetryPolicy(base=0.01, cap=0.02)
    return built


def test_a_reasoning_model_with_max_completion_tokens_is_answered(llm: LLMServer) -> None:
    spec = parse_spec(openai(endpoint=llm.openai_base_url, model="o3-mini",
                             options={"max_completion_tokens": 800, "reasoning_effort": "low"}))
    result = model_for(llm, spec, "sk-o").chat(REQUEST)

    body = llm.requests[0].body
    assert json.loads(result.text)["ratings"][0]["id"] == "idx::1"
    assert "temperature" not in body and body["max_completion_tokens"] == 800
    assert body["reasoning_effort"] == "low" and body["model"] == "o3-mini"
    assert llm.requests[0].authorization == "Bearer sk-o"


@pytest.mark.parametrize("options, param", [({"temperature": 0}, "temperature"),
                                            ({"temperature": None, "max_tokens": 50},
                                             "max_tokens")])
def test_a_reasoning_model_refuses_temperature_and_max_tokens_as_openai_does(
        llm: LLMServer, options: dict[str, Any], param: str) -> None:
    spec = parse_spec(openai(endpoint=llm.openai_base_url, model="o3-mini", options=options))
    with pytest.raises(LLMError) as caught:
        model_for(llm, spec).chat(REQUEST)

    assert caught.value.status == 400 and caught.value.retryable is False
    assert UNSUPPORTED[param] in str(caught.value)
    assert llm.calls == 1  # a 400 is final: not retried


def test_azure_sends_the_api_key_header_to_the_deployment_url(llm: LLMServer) -> None:
    llm.azure_deployment("judge-dep", KEY)
    spec = parse_spec(azure(endpoint=llm.url))
    result = model_for(llm, spec, KEY).chat(REQUEST)

    seen = llm.requests[0]
    assert json.loads(result.text)["ratings"]
    assert seen.path == (f"/openai/deployments/judge-dep/chat/completions?"
                         f"api-version={AZURE_API_VERSION}")
    assert seen.headers.get("api-key") == KEY and seen.authorization is None
    assert "model" not in seen.body and seen.body["temperature"] == 0


def test_azure_refuses_a_wrong_key_and_the_error_does_not_show_it(llm: LLMServer) -> None:
    llm.azure_deployment("judge-dep", KEY)
    wrong = "sk-wrong-key-000111"
    with pytest.raises(LLMError) as caught:
        model_for(llm, parse_spec(azure(endpoint=llm.url)), wrong).chat(REQUEST)

    assert caught.value.status == 401 and AZURE_ACCESS_DENIED[:40] in str(caught.value)
    assert wrong not in str(caught.value) and KEY not in str(caught.value)


def test_azure_reasoning_deployment_refuses_temperature(llm: LLMServer) -> None:
    llm.azure_deployment("reasoner", KEY, model="o4-mini")
    refused = parse_spec(azure(endpoint=llm.url, deployment="reasoner"))
    fixed = parse_spec(azure(endpoint=llm.url, deployment="reasoner", model="o4-mini"))

    with pytest.raises(LLMError, match="'temperature' is not supported"):
        model_for(llm, refused, KEY).chat(REQUEST)
    assert json.loads(model_for(llm, fixed, KEY).chat(REQUEST).text)["ratings"]


# --- encryption --------------------------------------------------------------------------------


def test_keys_are_encrypted_and_rotation_keeps_old_tokens_readable() -> None:
    old, new = Fernet.generate_key().decode(), Fernet.generate_key().decode()
    token = SecretBox(old).encrypt(KEY)

    assert KEY not in token and SecretBox(old).decrypt(token) == KEY
    rotated = SecretBox(f"{new},{old}")
    assert rotated.decrypt(token) == KEY
    assert SecretBox(new).decrypt(rotated.encrypt(KEY)) == KEY  # the first key encrypts
    with pytest.raises(UndecryptableKey, match="WORKBENCH_SECRET_KEY"):
        SecretBox(new).decrypt(token)
    with pytest.raises(SecretKeyMissing, match="WORKBENCH_SECRET_KEY is not set"):
        SecretBox(None).encrypt(KEY)


def test_a_bad_secret_key_setting_stops_start_up_without_echoing_it() -> None:
    good = Fernet.generate_key().decode()
    assert Config.from_env({"WORKBENCH_SECRET_KEY": f" {good} , "}).secret_key == good
    with pytest.raises(ConfigError) as caught:
        Config.from_env({"WORKBENCH_SECRET_KEY": f"{good},not-a-key-secret"})

    assert "WORKBENCH_SECRET_KEY: key 2 is not a Fernet key" in str(caught.value)
    assert "not-a-key-secret" not in str(caught.value)
    assert "****" in repr(Config.from_env({"WORKBENCH_SECRET_KEY": good}))
