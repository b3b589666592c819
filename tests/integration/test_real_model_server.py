"""The LLM paths against a real OpenAI-compatible server that no one here wrote: llama.cpp's
server (``scripts/llama.sh``) serving SmolLM2-135M-Instruct. The stand-in
(``workbench/bench/llm_server.py``) stays for faults a real server does not produce on demand.

A 135M model rates poorly and not always on the scale, so these tests check what the workbench
promises whatever the model says: every hit ends rated on the scale or listed in ``failures``
with a reason, the format is found once and remembered, tokens are counted by the server.
"""

from __future__ import annotations

import json
import re
import urllib.request
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from opensearchpy import OpenSearch

from tests.support import waiting
from tests.support.api import Api
from tests.support.processes import Server, Worker, helper_units, logs_since
from tests.support.small_job import item_catalogue

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


QUERIES = 4
DOCS = 3
LLAMA_TOKENIZER = "the model server's own (llama.cpp (Python server) /extras/tokenize/count)"


def register(api: Api, llama_url: str, **fields: Any) -> str:
    """A new model id for the server (so nothing is cached or remembered for it yet)."""
    model = f"llama-{uuid.uuid4().hex[:8]}"
    created = api.srw("PUT", "/models", {"id": model, "name": "SmolLM2 on llama.cpp",
                                         "provider": "openai", "endpoint": llama_url,
                                         "model": "smollm2", **fields})
    assert created.status == 200, created.data
    return model


@pytest.fixture(scope="module")
def items(api: Api, direct: OpenSearch) -> Iterator[dict[str, str]]:
    index = f"test-llama-{uuid.uuid4().hex[:6]}"
    yield item_catalogue(direct, api, index, QUERIES, DOCS)
    direct.indices.delete(index=index)


def judgment(items: dict[str, str], model: str, **fields: Any) -> dict[str, Any]:
    return {"name": f"llama-{uuid.uuid4().hex[:8]}", "type": "LLM_JUDGMENT", "modelId": model,
            "querySetId": items["querySetId"], "searchConfigurationList": [items["config"]],
            "size": DOCS, "contextFields": ["title"], **fields}


def run(api: Api, body: dict[str, Any]) -> dict[str, Any]:
    reply = api.srw("PUT", "/judgments", body)
    assert reply.status == 200, reply.data
    return waiting.finished(api, f"/judgments/{reply.json['judgment_id']}", 300)


def check_every_hit_accounted_for(done: dict[str, Any]) -> None:
    """Each query's hits are rated on the 0-1 scale or listed with the reason they are not."""
    assert done["status"] == "COMPLETED", done["metadata"]
    for entry in done["judgmentRatings"]:
        rated = {r["docId"] for r in entry["ratings"]}
        failed = {f["docId"] for f in entry.get("failures", [])}
        assert not rated & failed
        assert len(rated | failed) == DOCS, entry
        assert all(0.0 <= float(r["rating"]) <= 1.0 for r in entry["ratings"]), entry
        assert all(f["reason"] for f in entry.get("failures", [])), entry


def test_an_llm_judgment_estimated_and_run_against_the_real_server(
        api: Api, worker: Worker, llama_url: str, items: dict[str, str]) -> None:
    model = register(api, llama_url)
    try:
        estimate = api.srw("POST", "/judgments/_estimate", judgment(items, model))
        assert estimate.status == 200, estimate.data
        assert estimate.json["tokenizer"] == LLAMA_TOKENIZER
        assert estimate.json["calls"] == QUERIES
        done = run(api, judgment(items, model))
        check_every_hit_accounted_for(done)
        usage = done["metadata"]["usage"]
        # One call per query (the grammar keeps the answer to the hits' ids and to scores 0
        # to 1 in tenths), and one refused json_schema call for the whole job: the chunk that
        # found the format out made it while the others waited.
        assert usage["llmCalls"] == QUERIES + 1
        # Counted by the server's tokenizer, the estimate misses only the chat template's
        # framing beyond OpenAI's 9 tokens a call (ChatML's is 12): measured 1,416 estimated,
        # 1,428 reported.
        assert 0 <= usage["inputTokens"] - estimate.json["inputTokens"] <= 0.02 * usage[
            "inputTokens"]
        learnt = api.srw("GET", f"/models/{model}").json["structuredOutput"]
        assert learnt["mode"] == "json_object"
    finally:
        api.srw("DELETE", f"/models/{model}")


def test_a_budget_stops_a_judgment_on_the_servers_own_counts(
        api: Api, worker: Worker, llama_url: str, items: dict[str, str]) -> None:
    model = register(api, llama_url)
    try:
        estimate = api.srw("POST", "/judgments/_estimate", judgment(items, model)).json
        per_call = estimate["totalTokens"] // estimate["calls"]
        limit = per_call + per_call // 2  # room for one call's reservation, not two
        done = run(api, judgment(items, model, maxTokens=limit))
        assert done["status"] == "COMPLETED", done["metadata"]
        assert done["metadata"]["budgetReached"] is True
        reason = f"budget reached: maxTokens [{limit}]"
        unpaid = [f for e in done["judgmentRatings"] for f in e.get("failures", [])
                  if f["reason"] == reason]
        assert len(unpaid) >= DOCS  # at least one query's hits were never asked about
    finally:
        api.srw("DELETE", f"/models/{model}")


@pytest.fixture(scope="module")
def pair(env: dict[str, str]) -> Iterator[dict[str, Any]]:
    """An API server and two workers that split any judgment of 2 queries or more."""
    pair_env = dict(env, WORKBENCH_QUEUE=f"llama-{uuid.uuid4().hex[:8]}",
                    WORKBENCH_SPLIT_QUERIES="2", WORKBENCH_LLM_CONCURRENCY="1")
    server = Server(pair_env)
    workers = [Worker(pair_env, extra=["--concurrency", "1"]) for _ in range(2)]
    yield {"api": Api(server.url), "workers": workers}
    for one in workers:
        one.stop()
    server.stop()


def test_an_llm_judgment_split_over_two_workers(
        pair: dict[str, Any], llama_url: str, items: dict[str, str]) -> None:
    api = pair["api"]
    model = register(api, llama_url)
    logs = [w.log() for w in pair["workers"]]
    try:
        done = run(api, judgment(items, model))
        check_every_hit_accounted_for(done)
        assert done["metadata"]["usage"]["llmCalls"] == QUERIES + 1  # one refusal in all
        new = logs_since(pair["workers"], logs, re.compile(r"judgments\.generate\[.*succeeded"))
        assert sum(1 for text in new if helper_units(text) >= 1) >= 1, new
    finally:
        api.srw("DELETE", f"/models/{model}")


def test_context_sufficiency_and_the_brief_evaluate_shape(api: Api, llama_url: str) -> None:
    model = register(api, llama_url)
    try:
        run_id = uuid.uuid4().hex[:8]
        reply = api.srw("POST", "/_evaluate", {
            "queryText": f"banana colour {run_id}", "judge": "token_overlap",
            "hits": [{"id": "a", "text": "A ripe banana is yellow."}],
            "referenceAnswer": "Ripe bananas are yellow.", "modelId": model,
            "contextSufficiency": True})
        assert reply.status == 200, reply.data
        verdict = reply.json["contextSufficiency"]
        assert isinstance(verdict["sufficient"], bool) and verdict["cached"] is False
        brief = api.srw("POST", "/_evaluate", {
            "query": {"inputs": {"text": "red running shoes"}}, "modelId": model,
            "eval": {"fields": ["text"], "debug": False},
            "hits": [{"id": f"a-{run_id}", "text": "red running shoes"},
                     {"id": f"b-{run_id}", "text": "blue wool hat"}]})
        assert brief.status == 200, brief.data
        assert set(brief.json) == {"metrics", "hits", "usage"}
        for hit in brief.json["hits"]:  # graded on the 1-4 scale, or unrated with a reason
            assert hit["score"] in (1, 2, 3, 4) or hit["score"] is None, hit
    finally:
        api.srw("DELETE", f"/models/{model}")
