"""``_evaluate``'s usage: tokens, calls, cache hits, latency, and the cost of a model with
prices, checked against the stand-in's own token counts."""

from __future__ import annotations

import uuid

import pytest

from tests.support.api import Api
from workbench.bench.llm_server import LLMServer, prompt_tokens

IN_PRICE, OUT_PRICE = 2.5, 10.0  # per million tokens


def test_a_priced_model_reports_what_the_evaluation_cost(api: Api, llm: LLMServer) -> None:
    model = f"priced-{uuid.uuid4().hex[:8]}"
    created = api.srw("PUT", "/models", {
        "id": model, "name": "Priced judge", "provider": "openai",
        "endpoint": llm.openai_base_url, "model": "judge-1", "apiKeyEnv": "TEST_LLM_KEY",
        "pricing": {"inputPerMillion": IN_PRICE, "outputPerMillion": OUT_PRICE}})
    assert created.status == 200, created.data
    try:
        body = {"queryText": "red running shoes", "judge": "llm", "modelId": model,
                "referenceAnswer": f"run {uuid.uuid4().hex}", "fields": ["title"],
                "hits": [{"id": f"h{i}", "title": title} for i, title in enumerate(
                    ["red running shoes", "red hat", "running shoes", "wallet"])]}
        reply = api.srw("POST", "/_evaluate", body)
        assert reply.status == 200, reply.data
        usage = reply.json["usage"]
        (request,) = llm.requests
        # The stand-in answers with OpenAI's usage block; the workbench adds it up and prices it.
        assert usage["inputTokens"] == prompt_tokens(request.system, request.user)
        assert usage["outputTokens"] > 0
        assert usage["totalTokens"] == usage["inputTokens"] + usage["outputTokens"]
        assert usage["llmCalls"] == 1 and usage["cacheHits"] == 0
        want = (usage["inputTokens"] * IN_PRICE + usage["outputTokens"] * OUT_PRICE) / 1e6
        assert usage["cost"] == pytest.approx(want, rel=1e-9)
        assert usage["latencyMs"] > 0

        again = api.srw("POST", "/_evaluate", body).json["usage"]
        assert again["llmCalls"] == 0 and again["cacheHits"] == 4
        assert again["cost"] == 0.0  # a priced model, nothing spent: cached grades are free
    finally:
        api.srw("DELETE", f"/models/{model}")
