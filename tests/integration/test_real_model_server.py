"""The LLM paths against a real OpenAI-compatible server that no one here wrote: llama.cpp's
server (``scripts/llama.sh``) serving SmolLM2-135M-Instruct. The stand-in
(``tests/support/llm_server.py``) stays for faults a real server does not produce on demand.

Work in progress (issue 23): what passes against the real server today.
"""

from __future__ import annotations

import json
import urllib.request
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from tests.support.api import Api

MAX_TOKENS = 24


def chat(llama_url: str, body: dict[str, Any]) -> dict[str, Any]:
    """One chat completion sent straight to the server."""
    request = urllib.request.Request(f"{llama_url}/chat/completions", json.dumps(body).encode(),
                                     {"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=120) as reply:
        answer: dict[str, Any] = json.loads(reply.read())
    return answer


@pytest.fixture
def llama_model(api: Api, llama_url: str) -> Iterator[str]:
    model = f"llama-{uuid.uuid4().hex[:8]}"
    created = api.srw("PUT", "/models", {
        "id": model, "name": "SmolLM2 on llama.cpp", "provider": "openai",
        "endpoint": llama_url, "model": "smollm2", "options": {"max_tokens": MAX_TOKENS}})
    assert created.status == 200, created.data
    yield model
    api.srw("DELETE", f"/models/{model}")


def test_predict_relays_what_the_model_said(api: Api, llama_url: str, llama_model: str) -> None:
    messages = [{"role": "system", "content": "You answer in one short sentence."},
                {"role": "user", "content": "What colour is a ripe banana?"}]
    reply = api.call("POST", f"/_plugins/_ml/models/{llama_model}/_predict",
                     {"parameters": {"messages": messages}})
    assert reply.status == 200, reply.data
    (output,) = reply.json["inference_results"][0]["output"]
    # Greedy decoding (the workbench sends temperature 0) makes the server's answer a function
    # of the request: the same request sent straight to it gives the same text.
    direct = chat(llama_url, {"model": "smollm2", "messages": messages, "temperature": 0,
                              "max_tokens": MAX_TOKENS})
    text = direct["choices"][0]["message"]["content"]
    assert text.strip()
    assert output["result"] == text
    assert output["dataAsMap"] == {"response": text}
    assert direct["usage"]["completion_tokens"] <= MAX_TOKENS


def test_evaluate_steps_down_to_the_format_the_server_speaks(api: Api, llama_url: str) -> None:
    """llama.cpp's Python server refuses ``json_schema`` (500 naming ``response_format``) and
    constrains ``json_object`` with the schema: one refused call, not retried, then an answer
    whose grades are all on the rubric's scale."""
    model = f"llama-eval-{uuid.uuid4().hex[:8]}"
    created = api.srw("PUT", "/models", {
        "id": model, "name": "SmolLM2 on llama.cpp", "provider": "openai",
        "endpoint": llama_url, "model": "smollm2", "options": {"max_tokens": 300}})
    assert created.status == 200, created.data
    try:
        reply = api.srw("POST", "/_evaluate", {
            # A fixed prompt: greedy decoding then gives the same answer on every run (the
            # judgment cache is keyed by the model, new for every run).
            "queryText": "red running shoes", "judge": "llm", "modelId": model,
            "fields": ["title"],
            "hits": [{"id": "a", "title": "red running shoes"},
                     {"id": "b", "title": "blue wool hat"}]})
        assert reply.status == 200, reply.data
        assert reply.json["usage"]["llmCalls"] == 2  # the refused json_schema, then json_object
        grades = {hit["id"]: hit["rating"] for hit in reply.json["hits"]}
        assert set(grades) == {"a", "b"}
        assert all(grade in (0.0, 1.0, 2.0, 3.0) for grade in grades.values())
    finally:
        api.srw("DELETE", f"/models/{model}")
