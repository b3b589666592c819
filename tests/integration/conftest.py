"""Tests here run against the real OpenSearch and Redis (``tests/conftest.py``): every session
starts from the default SRW settings and zeroed counters."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from opensearchpy import OpenSearch

from tests.support import services
from tests.support.api import Api
from tests.support.processes import Server, Worker, base_env
from workbench.bench.llm_server import LLMServer


@pytest.fixture(scope="session", autouse=True)
def _clean_plugin_state(_default_plugin_settings: None) -> None:
    return None


@pytest.fixture(scope="session")
def vector_stack(redis_url: str) -> Iterator[dict[str, Any]]:
    """A second cluster: the OpenSearch node with the k-NN and neural-search plugins
    (``services.vector_opensearch_url``, started on first use), with an API server and a worker
    of its own on it. Its cluster has no UBI indices. ``client`` talks to the node directly."""
    url = services.vector_opensearch_url()
    env = base_env(url, redis_url, WORKBENCH_QUEUE=f"test-vec-{uuid.uuid4().hex[:8]}",
                   WORKBENCH_LLM_CONCURRENCY="1")
    server, worker = Server(env, workers=1), Worker(env)
    try:
        yield {"api": Api(server.url), "client": OpenSearch(url, timeout=60), "url": url}
    finally:
        worker.stop()
        server.stop()


#: the prices of the ``priced`` model (per million tokens)
PRICES = {"inputPerMillion": 2.5, "outputPerMillion": 10.0}


@pytest.fixture
def priced(api: Api, llm: LLMServer) -> Iterator[str]:
    """A model with prices served by the stand-in, under an id no cache entry has yet."""
    model_id = f"priced-{uuid.uuid4().hex[:8]}"
    reply = api.srw("PUT", "/models", {
        "id": model_id, "provider": "openai", "endpoint": llm.openai_base_url,
        "model": "judge-1", "apiKeyEnv": "TEST_LLM_KEY", "pricing": PRICES})
    assert reply.status == 200, reply.data
    yield model_id
    api.srw("DELETE", f"/models/{model_id}")
