"""The structured-output ladder and the format refusals that step down it."""

from __future__ import annotations

import json

import pytest

from workbench.llm.base import FormatRefused, LLMError, Transient, check_status, refuses_format
from workbench.llm.structured import Steps, answer_bound, constrained, ladder, mode

SCHEMA = {"type": "object", "properties": {"ratings": {"type": "array"}}}
JSON_SCHEMA = {"type": "json_schema", "json_schema": {"name": "r", "strict": True,
                                                      "schema": SCHEMA}}
# What llama.cpp's Python server (0.3.36) answers to a json_schema request, as captured.
LLAMA_REFUSAL = json.dumps({"error": {
    "message": "1 validation error:\n  {'type': 'literal_error', 'loc': ('body', "
               "'response_format', 'type'), 'msg': \"Input should be 'text' or 'json_object'\", "
               "'input': 'json_schema'}",
    "type": "internal_server_error", "param": None, "code": None}}).encode()


def test_the_ladder_goes_from_json_schema_to_json_object_with_the_schema_to_plain() -> None:
    rungs = ladder(JSON_SCHEMA)
    assert rungs == [JSON_SCHEMA, {"type": "json_object", "schema": SCHEMA}, None]
    assert [mode(rung) for rung in rungs] == ["json_schema", "json_object", "plain"]


def test_a_format_without_a_schema_has_no_json_object_rung() -> None:
    assert ladder({"type": "json_schema", "json_schema": {"name": "r"}}) == [
        {"type": "json_schema", "json_schema": {"name": "r"}}, None]


@pytest.mark.parametrize(("status", "detail", "refused"), [
    (500, "Input should be 'text' or 'json_object' at ('body', 'response_format', 'type')", True),
    (400, "Invalid parameter: 'response_format' of type 'json_schema' is not supported", True),
    (422, "response_format: extra fields not permitted", True),
    (500, "CUDA out of memory", False),
    (503, "response_format is fine, the server is loading", False),
    (429, "rate limited", False),
    (400, None, False),
])
def test_refusals_name_response_format(status: int, detail: str | None, refused: bool) -> None:
    assert refuses_format(status, detail) is refused


def test_llama_cpps_refusal_is_not_retried_as_an_outage() -> None:
    with pytest.raises(FormatRefused) as raised:
        check_status("m", 500, {}, LLAMA_REFUSAL, "http://127.0.0.1:9600/v1")
    assert isinstance(raised.value, LLMError) and not raised.value.retryable
    assert raised.value.status == 500
    assert "response_format" in raised.value.reason


def test_other_server_errors_stay_transient() -> None:
    body = json.dumps({"error": {"message": "model is loading"}}).encode()
    with pytest.raises(Transient):
        check_status("m", 500, {}, body, "http://127.0.0.1:9600/v1")


def test_steps_go_down_one_rung_after_a_refusal_and_to_plain_otherwise() -> None:
    steps = Steps(JSON_SCHEMA)
    asked = []
    for form in steps:
        asked.append(mode(form))  # each refused: the next rung comes
    assert asked == ["json_schema", "json_object", "plain"]

    steps = Steps(JSON_SCHEMA)
    asked = []
    for form in steps:
        asked.append(mode(form))
        steps.to_plain()  # an unusable answer or an outage: plain, once
    assert asked == ["json_schema", "plain"]


def test_the_json_object_rung_allows_only_the_calls_ids_each_once() -> None:
    item = {"type": "object", "properties": {"id": {"type": "string"},
                                             "rating_score": {"type": "number"}}}
    schema = {"type": "object", "properties": {"ratings": {"type": "array", "items": item}}}
    full = {"type": "json_schema", "json_schema": {"name": "r", "schema": schema}}
    top, middle, plain = ladder(full, ["i::a", "i::b"])
    assert top is full and plain is None  # the plugin's own schema is never changed
    assert middle == {"type": "json_object", "schema": {"type": "object", "properties": {
        "ratings": {"type": "array", "minItems": 2, "maxItems": 2, "items": {
            "type": "object", "properties": {
                "id": {"type": "string", "enum": ["i::a", "i::b"]},
                "rating_score": {"type": "number"}}}}}}}
    assert item["properties"]["id"] == {"type": "string"}  # the original is left as it was
    with_values = ladder(full, ["i::a"], {"rating_score": (0, 0.5, 1), "absent": (1,)})[1]
    assert with_values is not None
    assert with_values["schema"]["properties"]["ratings"]["items"]["properties"][
        "rating_score"] == {"type": "number", "enum": [0, 0.5, 1]}  # "absent": no such field
    assert constrained(schema, []) is schema  # no ids: nothing to limit
    assert constrained(SCHEMA, ["a"]) is SCHEMA  # no id field: nothing to limit


def test_the_answer_bound_is_a_token_per_character_of_a_usable_answer() -> None:
    assert answer_bound("") == 256  # room for a short answer with some prose
    assert answer_bound("x" * 663) == 727  # ten ratings of ESCI ids: SmolLM2 needs 388
