"""The model registry's request-body schemas (issue 21), with the rules the route gives them
(llm/spec.py): the exact 400 reasons the integration tests pin (test_runtime_models.py,
test_model_endpoints.py), canonical names, the path's id, and errors that are not the body's."""

from __future__ import annotations

from functools import partial
from typing import Any

import pytest

from workbench.errors import BadRequest
from workbench.llm.endpoints import EndpointRefused
from workbench.llm.spec import SpecError, check_api_key, normalise, parse_spec
from workbench.schemas.body import load
from workbench.schemas.models import ModelChangesSchema, ModelSchema

BASE = {"id": "m1", "provider": "openai", "endpoint": "https://api.openai.com/v1",
        "model": "judge-1"}
TRUST_RULE = "is not a trusted model endpoint"


def refuse_untrusted(endpoint: str) -> None:
    if not endpoint.startswith("https://api.openai.com"):
        raise EndpointRefused(TRUST_RULE)


def changes(body: dict[str, Any], path_id: str | None = None) -> dict[str, Any]:
    schema = ModelChangesSchema(normalise=lambda b: normalise(b)[0], invalid=SpecError,
                                path_id=path_id)
    return load(schema, body)


def model(data: dict[str, Any]) -> dict[str, Any]:
    parse = partial(parse_spec, check_endpoint=refuse_untrusted)
    return load(ModelSchema(parse=parse, check_key=check_api_key, invalid=SpecError), data)


def reason(call: Any, *args: Any) -> str:
    with pytest.raises(BadRequest) as caught:
        call(*args)
    assert type(caught.value) is BadRequest
    assert (caught.value.status, caught.value.error_type) == (400, "illegal_argument_exception")
    return caught.value.reason


# -- the body's names ---------------------------------------------------------------------------

def test_changes_have_canonical_names_in_the_clients_order_nulls_kept() -> None:
    loaded = changes({"model": "m", "base_url": "https://x/v1", "api_key_env": None, "id": "a"})
    assert loaded == {"model": "m", "endpoint": "https://x/v1", "apiKeyEnv": None, "id": "a"}
    assert list(loaded) == ["model", "endpoint", "apiKeyEnv", "id"]
    assert changes({"name": "x"}, path_id="m1") == {"name": "x"}
    assert changes({"id": "m1", "name": "x"}, path_id="m1") == {"id": "m1", "name": "x"}


def test_two_spellings_of_one_setting_are_refused() -> None:
    assert reason(changes, {"endpoint": "a", "base_url": "b"}) == (
        'Invalid model: field "base_url" and "endpoint" name the same setting; give one')


@pytest.mark.parametrize("body", [{"id": "other"}, {"id": None}, {"id": 5, "name": "x"}])
def test_the_path_id_cannot_change(body: dict[str, Any]) -> None:
    # tests/integration/test_runtime_models.py::test_route_validation_and_ownership
    assert reason(changes, body, "m1") == (
        'Invalid model: field "id" cannot be changed (it is the path\'s id)')


def test_spellings_are_checked_before_the_path_id() -> None:
    assert reason(changes, {"id": "other", "model": "a", "modelx": 1, "baseUrl": "u",
                            "endpoint": "v"}, "m1").endswith("name the same setting; give one")


# -- a complete model ---------------------------------------------------------------------------

def test_a_model_loads_its_spec_and_key() -> None:
    loaded = model({**BASE, "apiKey": " sk-1 "})
    assert loaded["spec"].id == "m1" and loaded["spec"].endpoint == "https://api.openai.com/v1"
    assert loaded["apiKey"] == " sk-1 "  # stripped when it is encrypted
    assert model(BASE)["apiKey"] is None


@pytest.mark.parametrize(("data", "expected"), [
    # tests/integration/test_runtime_models.py::test_route_validation_and_ownership
    ({**BASE, "provider": "cohere"}, 'Invalid model: field "provider" must be one of '
                                     "['azure_openai', 'bedrock', 'openai'], got 'cohere'"),
    ({**BASE, "endpoint": "nowhere"}, 'Invalid model: field "endpoint" must be an http(s) URL '
                                      "such as https://api.openai.com/v1, got 'nowhere'"),
    ({**BASE, "options": {"temperature": 5}},
     'Invalid model: field "options.temperature" must be a number from 0 to 2 '
     "(null: send none), got 5"),
    ({**BASE, "options": {"max_tokens": -1}},
     'Invalid model: field "options.max_tokens" must be a positive integer'),
    ({**BASE, "apiKey": "sk-1", "apiKeyEnv": "X"},
     'Invalid model: field "apiKey" and "apiKeyEnv" cannot both be given: store the key, or '
     "name the environment variable holding it"),
    ({**BASE, "apiKey": ""}, 'Invalid model: field "apiKey" must be a non-empty string'),
    ({**BASE, "apiKey": "k" * 4097}, 'Invalid model: field "apiKey" must be at most 4096 '
                                     "characters"),
    ({**BASE, "id": "no spaces please"},
     "Invalid model: field \"id\" must be 1 to 128 letters, digits or . _ : - "
     "(got 'no spaces please')"),
    # test_model_endpoints.py: the operator's endpoint rule, named as the API names it
    ({**BASE, "endpoint": "http://10.1.2.3/v1"},
     f'Invalid model: field "endpoint" {TRUST_RULE}'),
    # the model's own fields come first: a bad key beside a bad model is the model's error
    ({**BASE, "provider": "cohere", "apiKey": ""}, 'Invalid model: field "provider" must be '
                                                  "one of ['azure_openai', 'bedrock', "
                                                  "'openai'], got 'cohere'"),
])
def test_model_reasons(data: dict[str, Any], expected: str) -> None:
    assert reason(model, data) == expected


def test_a_key_is_not_a_bedrock_setting() -> None:
    got = reason(model, {"id": "b", "provider": "bedrock", "model": "m", "apiKey": "sk-1"})
    assert got.startswith('Invalid model: field "apiKey" is not a setting of provider '
                          "'bedrock'")
    assert "sk-1" not in got


def test_errors_that_are_not_the_bodys_are_raised_as_they_are() -> None:
    def broken(data: dict[str, Any]) -> Any:
        raise ValueError("Invalid IPv6 URL")

    with pytest.raises(ValueError, match="Invalid IPv6 URL"):
        load(ModelSchema(parse=broken, check_key=check_api_key, invalid=SpecError), BASE)
