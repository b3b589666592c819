"""Vector fields stay out of LLM prompts when a judgment names no ``contextFields`` (the plugin's
rule since 3.9, its pull request #565; docs/algorithms.md, "Prompt").

Against a real OpenSearch with the k-NN and neural-search plugins (``knn_vector``,
``sparse_vector``; ``rank_features`` is core's) with an API and a worker of its own
(``vector_stack``), and llama.cpp's server behind a recording forwarder: the test reads the
exact prompts the model server received, and the server counts the tokens they cost.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from tests.support import services, waiting
from tests.support.api import Api
from tests.support.relay import RecordingForwarder

INDEX = "vec-products"
#: an embedding long enough to dominate a document, as a real one does
EMBEDDING = [round(0.001 * (7 * i % 997) - 0.5, 4) for i in range(96)]
DOCS = {
    "v1": {"title": "red running shoes", "price": 40,
           "embedding": EMBEDDING, "tags": {"shoe": 1.5, "red": 0.7},
           "sparse": {"1017": 0.61, "2231": 0.33, "4095": 1.2},
           "passage": {"text": "light shoes for road running",
                       "passage_embedding": EMBEDDING[:16]},
           "chunks": [{"text": "breathable mesh", "chunk_embedding": EMBEDDING[:8]},
                      {"text": "cushioned sole", "chunk_embedding": EMBEDDING[8:16]}]},
    "v2": {"title": "red wool hat", "price": 15,
           "embedding": EMBEDDING[::-1], "tags": {"hat": 2.0},
           "sparse": {"17": 0.9},
           "passage": {"text": "a warm hat", "passage_embedding": EMBEDDING[16:32]},
           "chunks": [{"text": "merino wool", "chunk_embedding": EMBEDDING[:8]}]},
}
#: each document as a prompt shows it by default, written out by hand: every knn_vector,
#: rank_features and sparse_vector field gone, at any depth, the rest in its order
WITHOUT_VECTORS = {
    "v1": {"title": "red running shoes", "price": 40,
           "passage": {"text": "light shoes for road running"},
           "chunks": [{"text": "breathable mesh"}, {"text": "cushioned sole"}]},
    "v2": {"title": "red wool hat", "price": 15, "passage": {"text": "a warm hat"},
           "chunks": [{"text": "merino wool"}]},
}
MAPPING = {
    "settings": {"index.sparse": True},  # sparse_vector fields need it
    "mappings": {"properties": {
        "title": {"type": "text"},
        "price": {"type": "integer"},
        # unindexed (no "index.knn"): Maven Central's k-NN has no native engines, and the
        # mapping type is what counts
        "embedding": {"type": "knn_vector", "dimension": len(EMBEDDING)},
        "tags": {"type": "rank_features"},
        "sparse": {"type": "sparse_vector", "method": {"name": "seismic", "parameters": {}}},
        "passage": {"properties": {
            "text": {"type": "text"},
            "passage_embedding": {"type": "knn_vector", "dimension": 16}}},
        "chunks": {"type": "nested", "properties": {
            "text": {"type": "text"},
            "chunk_embedding": {"type": "knn_vector", "dimension": 8}}},
    }},
}


@pytest.fixture(scope="module")
def vector(vector_stack: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """The index on the vector node, a query set, a configuration, and the forwarder in front
    of llama.cpp's server."""
    client, api = vector_stack["client"], vector_stack["api"]
    if client.indices.exists(index=INDEX):
        client.indices.delete(index=INDEX)
    client.indices.create(index=INDEX, body=MAPPING)
    for doc_id, doc in DOCS.items():
        client.index(index=INDEX, id=doc_id, body=doc)
    client.indices.refresh(index=INDEX)
    forwarder = RecordingForwarder(services.llama_url())
    query_set = api.srw("PUT", "/query_sets", {"name": "red things", "querySetQueries": [
        {"queryText": "red"}]}).json["query_set_id"]
    config = api.srw("PUT", "/search_configurations", {
        "name": "by title", "index": INDEX,
        "query": '{"query":{"match":{"title":"%SearchText%"}},"sort":["price"]}'})
    assert config.status == 200, config.data
    try:
        yield {"api": api, "forwarder": forwarder, "endpoint": forwarder.start(),
               "querySetId": query_set, "config": config.json["search_configuration_id"]}
    finally:
        forwarder.stop()
        client.indices.delete(index=INDEX)


def judgment(vector: dict[str, Any], model: str, **fields: Any) -> dict[str, Any]:
    return {"name": f"vec-{uuid.uuid4().hex[:8]}", "type": "LLM_JUDGMENT", "modelId": model,
            "querySetId": vector["querySetId"], "searchConfigurationList": [vector["config"]],
            "size": 2, "tokenLimit": 4000, **fields}


def run(api: Api, body: dict[str, Any]) -> dict[str, Any]:
    reply = api.srw("PUT", "/judgments", body)
    assert reply.status == 200, reply.data
    done = waiting.finished(api, f"/judgments/{reply.json['judgment_id']}", 300)
    assert done["status"] == "COMPLETED", done["metadata"]
    return done


def sent_sources(forwarder: RecordingForwarder, since: int) -> list[dict[str, Any]]:
    """The document contexts of every chat call answered since ``since`` requests, in order:
    the ``source`` strings of the hits JSON in the user message (docs/algorithms.md)."""
    out = []
    for request in forwarder.requests[since:]:
        if not request.target.endswith("/chat/completions"):
            continue
        body = json.loads(request.body)
        if "json_schema" in json.dumps(body.get("response_format")):
            continue  # the format the server refuses, asked once per model
        user = next(m["content"] for m in body["messages"] if m["role"] == "user")
        hits = json.loads(user[user.index("Hits: ") + len("Hits: "):])  # the default template
        out += [{"id": h["id"], "source": json.loads(h["source"])} for h in hits]
    return out


@pytest.fixture
def model(vector: dict[str, Any]) -> Iterator[str]:
    """A model on the forwarder, new for the test (nothing cached for it)."""
    model_id = f"llama-vec-{uuid.uuid4().hex[:8]}"
    created = vector["api"].srw("PUT", "/models", {
        "id": model_id, "provider": "openai", "endpoint": vector["endpoint"],
        "model": "smollm2", "options": {"max_tokens": 24}})
    assert created.status == 200, created.data
    yield model_id
    vector["api"].srw("DELETE", f"/models/{model_id}")


def test_without_context_fields_the_model_gets_no_vector_field(
        vector: dict[str, Any], model: str) -> None:
    api, forwarder = vector["api"], vector["forwarder"]
    since = len(forwarder.requests)
    run(api, judgment(vector, model))
    assert sent_sources(forwarder, since) == [
        {"id": f"{INDEX}::v2", "source": WITHOUT_VECTORS["v2"]},
        {"id": f"{INDEX}::v1", "source": WITHOUT_VECTORS["v1"]}]


def test_a_vector_field_named_in_context_fields_is_sent(
        vector: dict[str, Any], model: str) -> None:
    api, forwarder = vector["api"], vector["forwarder"]
    since = len(forwarder.requests)
    run(api, judgment(vector, model, contextFields=["title", "embedding"]))
    assert sent_sources(forwarder, since) == [
        {"id": f"{INDEX}::v2", "source": {"title": "red wool hat",
                                          "embedding": EMBEDDING[::-1]}},
        {"id": f"{INDEX}::v1", "source": {"title": "red running shoes",
                                          "embedding": EMBEDDING}}]


def test_the_vectors_left_out_are_the_tokens_saved(vector: dict[str, Any], model: str) -> None:
    """The server's own counts: the default prompt costs what the estimate (counted with the
    server's tokenizer) says, and sending every field, vectors included, costs the vectors'
    tokens more; the same call count (one per query), so the same chat framing."""
    api = vector["api"]
    every_field = list(DOCS["v1"])
    default, whole = judgment(vector, model), judgment(vector, model, contextFields=every_field)
    estimated = [api.srw("POST", "/judgments/_estimate", b).json for b in (default, whole)]
    lean = run(api, default)["metadata"]["usage"]
    full = run(api, whole)["metadata"]["usage"]
    print("estimated input tokens", [e["inputTokens"] for e in estimated],
          "server-counted", lean["inputTokens"], full["inputTokens"])
    assert [e["calls"] for e in estimated] == [1, 1]
    assert full["inputTokens"] > 4 * lean["inputTokens"]
    saved = full["inputTokens"] - lean["inputTokens"]
    assert saved == estimated[1]["inputTokens"] - estimated[0]["inputTokens"]
