"""The ``_predict`` body of a workbench model (issue 21): ``parameters`` holding ``messages`` (a
list, or a JSON string of one) or ``prompt``, with the workbench's exact reasons, loaded as the
system and user prompts, without any service."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.support.bodies import reason as refused
from workbench.schemas.body import load
from workbench.schemas.ml_predict import PredictSchema, Prompt

NOT_AN_OBJECT = "parameters must be an object holding messages or prompt"
NOT_JSON = "parameters.messages must be a list of {role, content}"
NOT_MESSAGES = "parameters.messages must be a non-empty list of {role, content}"


def prompt(body: dict[str, Any]) -> Prompt:
    result: Prompt = load(PredictSchema(), body)["parameters"]
    return result


def reason(body: dict[str, Any]) -> str:
    return refused(PredictSchema(), body)


def test_messages_as_dashboards_sends_them() -> None:
    """tests/integration/test_fuzz_regressions.py and test_security_model.py send this body."""
    assert prompt({"parameters": {"messages": [{"role": "user", "content": "hi"}]}}) == \
        Prompt("", "hi")


def test_system_messages_become_the_system_prompt() -> None:
    messages = [{"role": "system", "content": "be brief"}, {"role": "user", "content": "a"},
                {"role": "system", "content": "be kind"}, {"content": "b"},
                {"role": "assistant", "content": "c"}]
    assert prompt({"parameters": {"messages": messages}}) == \
        Prompt("be brief\n\nbe kind", "a\n\nb\n\nc")


def test_messages_as_a_json_string_as_connectors_send_them() -> None:
    messages = json.dumps([{"role": "system", "content": "s"}, {"role": "user", "content": "u"}])
    assert prompt({"parameters": {"messages": messages}}) == Prompt("s", "u")


def test_a_prompt_is_one_user_message_unless_messages_are_given() -> None:
    assert prompt({"parameters": {"prompt": "hello"}}) == Prompt("", "hello")
    assert prompt({"parameters": {"prompt": "p", "messages": [{"content": "m"}]}}) == \
        Prompt("", "m")
    assert reason({"parameters": {"prompt": "p", "messages": []}}) == NOT_MESSAGES


@pytest.mark.parametrize("parameters", [None, "x", ["messages"], 5, True])
def test_parameters_must_be_an_object(parameters: Any) -> None:
    assert reason({"parameters": parameters}) == NOT_AN_OBJECT
    assert reason({}) == NOT_AN_OBJECT


def test_a_string_of_messages_must_be_json() -> None:
    assert reason({"parameters": {"messages": "not json"}}) == NOT_JSON


@pytest.mark.parametrize("parameters", [
    {}, {"prompt": 5}, {"prompt": None}, {"messages": []}, {"messages": "[]"}, {"messages": "{}"},
    {"messages": {"content": "x"}}, {"messages": ["hi"]}, {"messages": [{"role": "user"}]},
    {"messages": [{"content": "a"}, {"content": 5}]}, {"messages": '"text"'},
])
def test_messages_must_be_a_non_empty_list_of_contents(parameters: dict[str, Any]) -> None:
    assert reason({"parameters": parameters}) == NOT_MESSAGES
