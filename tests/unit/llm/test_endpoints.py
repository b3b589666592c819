"""The endpoint rules of models registered through the API (``llm.endpoints``) and what of an
endpoint's answer may be shown (``llm.base``): docs/model-endpoints.md."""

from __future__ import annotations

import ipaddress
import json
import re
from pathlib import Path

import pytest

from workbench.config import Config, ConfigError
from workbench.llm.base import (
    OPENAI_ERROR,
    OPENSEARCH_ERROR,
    LLMError,
    Transient,
    check_status,
    error_detail,
    parse_json_body,
)
from workbench.llm.endpoints import DEFAULT_TRUSTED, EndpointPolicy, EndpointRefused, address_kind

REPO = Path(__file__).resolve().parents[3]
DOC = REPO / "docs" / "model-endpoints.md"


@pytest.mark.parametrize(("address", "kind"), [
    ("127.0.0.1", "a loopback address"), ("127.9.9.9", "a loopback address"),
    ("::1", "a loopback address"), ("10.0.0.5", "a private address"),
    ("172.16.0.1", "a private address"), ("172.31.255.255", "a private address"),
    ("192.168.1.1", "a private address"), ("169.254.169.254", "a link-local address"),
    ("fe80::1", "a link-local address"), ("fd00::1", "a private address"),
    ("100.64.0.1", "a non-public address"), ("0.0.0.0", "an unspecified address"),
    ("::", "an unspecified address"), ("224.0.0.1", "a multicast address"),
    ("203.0.113.7", "a private address"), ("240.0.0.1", "a reserved address"),
    ("::ffff:127.0.0.1", "a loopback address"), ("::ffff:10.1.2.3", "a private address"),
    ("64:ff9b::a01:203", "a private address"), ("2002:7f00:1::", "a loopback address"),
    ("8.8.8.8", None), ("104.18.6.192", None), ("2606:4700::6810:6c0", None),
    ("172.32.0.1", None),
])
def test_address_kinds(address: str, kind: str | None) -> None:
    assert address_kind(ipaddress.ip_address(address)) == kind


DEFAULT = EndpointPolicy.of(DEFAULT_TRUSTED, allow_private=False)


@pytest.mark.parametrize("url", [
    "https://api.openai.com/v1", "https://api.openai.com", "https://my-res.openai.azure.com",
    "https://my-res.cognitiveservices.azure.com/openai", "https://api.mistral.ai/v1",
    "https://api.groq.com/openai/v1", "https://openrouter.ai/api/v1",
    "https://generativelanguage.googleapis.com/v1beta/openai",
])
def test_the_default_list_trusts_the_hosted_apis(url: str) -> None:
    DEFAULT.check_url(url)


@pytest.mark.parametrize("url", [
    "http://api.openai.com/v1",  # not https
    "https://api.openai.com.evil.example/v1", "https://evil.example/?https://api.openai.com",
    "https://api-openai.com/v1", "https://x.openai.azure.com.evil.example",
    "http://127.0.0.1:8080/v1", "http://localhost:11434/v1",
])
def test_the_default_list_trusts_nothing_else(url: str) -> None:
    with pytest.raises(EndpointRefused, match="matches none of the patterns of "
                                              "WORKBENCH_MODEL_ENDPOINTS"):
        DEFAULT.check_url(url)


def test_the_local_set_up_of_the_docs_admits_its_server_and_nothing_else_local() -> None:
    text = DOC.read_text()
    settings = dict(re.findall(r"^export (WORKBENCH_MODEL_\w+)='?(.*?)'?$", text, re.M))
    assert set(settings) == {"WORKBENCH_MODEL_ENDPOINTS", "WORKBENCH_MODEL_PRIVATE_ENDPOINTS"}
    # The shell leaves '...' alone: what the workbench reads is the text between the quotes.
    policy = EndpointPolicy.from_config(Config.from_env(settings))
    policy.check_registered("http://127.0.0.1:9600/v1")
    policy.check_registered("https://api.openai.com/v1")
    with pytest.raises(EndpointRefused, match="matches none"):
        policy.check_registered("http://127.0.0.1:9200/v1")  # the cluster's port: not trusted
    assert "http://10.1.2.3:8000/v1" in text  # the page shows another endpoint refused


def test_the_documented_local_set_up_admits_its_server() -> None:
    line = next(line for line in (REPO / "docs" / "llm-models.md").read_text().splitlines()
                if line.startswith("WORKBENCH_MODEL_ENDPOINTS="))
    settings = dict(re.findall(r"(WORKBENCH_MODEL_\w+)=('[^']*'|\S+)", line))
    settings = {k: v.strip("'") for k, v in settings.items()}
    policy = EndpointPolicy.from_config(Config.from_env(settings))
    policy.check_registered("http://127.0.0.1:9600/v1")
    with pytest.raises(EndpointRefused):
        policy.check_registered("http://127.0.0.1:9601/v1")


def test_private_addresses_need_the_operator() -> None:
    anything = EndpointPolicy.of([".*"], allow_private=False)
    with pytest.raises(EndpointRefused) as refused:
        anything.check_registered("http://[::1]:8080/v1")
    assert str(refused.value) == (
        "is on ::1, a loopback address; endpoints on non-public addresses are refused unless "
        "the operator allows them (WORKBENCH_MODEL_PRIVATE_ENDPOINTS=true)")
    EndpointPolicy.of([".*"], allow_private=True).check_registered("http://[::1]:8080/v1")
    anything.check_registered("https://no-such-host.invalid/v1")  # checked when used


@pytest.mark.parametrize(("raw", "message"), [
    ("[1", "WORKBENCH_MODEL_ENDPOINTS: expected a JSON array of regular expressions"),
    ('"^https://x$"', "WORKBENCH_MODEL_ENDPOINTS: expected a JSON array of regular "
                      "expressions (strings)"),
    ('["ok", "("]', "WORKBENCH_MODEL_ENDPOINTS: pattern 2 is not a regular expression"),
])
def test_a_bad_pattern_list_stops_start_up(raw: str, message: str) -> None:
    with pytest.raises(ConfigError, match=re.escape(message)):
        Config.from_env({"WORKBENCH_MODEL_ENDPOINTS": raw})


SECRET = "INTERNAL-ADMIN-SECRET-42"


@pytest.mark.parametrize(("body", "shape", "shown"), [
    (json.dumps({"error": {"message": "Invalid model", "type": "x"}}), OPENAI_ERROR,
     "Invalid model"),
    (json.dumps({"error": "model not found"}), OPENAI_ERROR, "model not found"),
    (json.dumps({"error": {"reason": "no such model"}}), OPENSEARCH_ERROR, "no such model"),
    (json.dumps({"error": {"reason": "x"}}), OPENAI_ERROR, None),
    (json.dumps({"message": SECRET}), OPENAI_ERROR, None),
    (json.dumps({"detail": SECRET}), OPENAI_ERROR, None),
    (json.dumps([SECRET]), OPENAI_ERROR, None),
    (SECRET, OPENAI_ERROR, None),
    ("\xff\xfe", OPENAI_ERROR, None),
])
def test_only_the_provider_s_error_message_is_shown(body: str, shape: tuple[str, ...],
                                                    shown: str | None) -> None:
    assert error_detail(body.encode("latin-1", "replace") if "\xff" in body else body.encode(),
                        shape) == shown


def test_a_long_provider_message_is_cut() -> None:
    body = json.dumps({"error": {"message": "x" * 1000}}).encode()
    assert error_detail(body, OPENAI_ERROR) == "x" * 300 + "..."


def test_answers_that_are_not_shown_are_described_by_their_size() -> None:
    with pytest.raises(Transient) as transient:
        check_status("m", 500, {}, SECRET.encode(), "http://h/v1/chat/completions")
    assert transient.value.reason == (
        "HTTP 500 from http://h/v1/chat/completions: a 24-byte answer without the provider's "
        "error shape (not shown)")
    with pytest.raises(LLMError) as final:
        check_status("m", 404, {}, json.dumps({"error": {"message": "no"}}).encode(), "w")
    assert final.value.reason == "HTTP 404 from w: no"
    with pytest.raises(LLMError) as redirect:
        check_status("m", 307, {"Location": "http://10.0.0.1/"}, b"", "w")
    assert redirect.value.reason == "HTTP 307 from w: a redirect, which is not followed"
    with pytest.raises(LLMError) as not_json:
        parse_json_body("m", SECRET.encode(), "w")
    assert not_json.value.reason == "answer from w is not JSON (24 bytes, not shown)"
