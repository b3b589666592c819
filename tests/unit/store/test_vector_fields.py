"""Which fields a default LLM prompt leaves out (plugin pull request #565): the mapping walk,
the drop at any depth, and an unreadable mapping sending everything."""

from __future__ import annotations

from typing import Any

from opensearchpy.exceptions import NotFoundError

from workbench.judgments.llm.prompt import context_string
from workbench.store.vector_fields import vector_fields, without_fields


class Indices:
    def __init__(self, mappings: dict[str, Any]) -> None:
        self.mappings = mappings
        self.asked: list[str] = []

    def get_mapping(self, index: str) -> dict[str, Any]:
        self.asked.append(index)
        if index not in self.mappings:
            raise NotFoundError(404, "index_not_found_exception", {})
        return {index: {"mappings": self.mappings[index]}}


class Client:
    def __init__(self, mappings: dict[str, Any]) -> None:
        self.indices = Indices(mappings)


PRODUCTS = {"properties": {
    "title": {"type": "text", "fields": {"raw": {"type": "keyword"}}},
    "embedding": {"type": "knn_vector", "dimension": 768},
    "tokens": {"type": "rank_features"},
    "nested": {"properties": {"passage_embedding": {"type": "knn_vector"},
                              "text": {"type": "text"}}},
    "chunks": {"type": "nested", "properties": {"sparse": {"type": "sparse_vector"}}},
}}


def test_every_vector_type_at_any_depth_is_collected_once_per_index() -> None:
    client = Client({"products": PRODUCTS, "other": {"properties": {
        "v": {"type": "knn_vector"}, "title": {"type": "text"}}}})
    found = vector_fields(client, ["products", "other", "products"])  # type: ignore[arg-type]
    assert found == {"embedding", "tokens", "passage_embedding", "sparse", "v"}
    assert client.indices.asked == ["other", "products"]


def test_an_unreadable_mapping_leaves_nothing_out() -> None:
    assert vector_fields(Client({}), ["gone"]) == frozenset()  # type: ignore[arg-type]


def test_fields_are_dropped_by_name_at_any_depth_and_in_lists() -> None:
    source = {"title": "Laptop", "embedding": [0.1, 0.2],
              "nested": {"passage_embedding": [0.3], "text": "body"},
              "chunks": [{"sparse": {"1": 0.5}, "text": "a"}, "plain"]}
    assert without_fields(source, frozenset({"embedding", "passage_embedding", "sparse"})) == {
        "title": "Laptop", "nested": {"text": "body"}, "chunks": [{"text": "a"}, "plain"]}
    assert without_fields(source, frozenset()) is source


def test_the_prompt_context_leaves_vectors_out_only_by_default() -> None:
    source = {"title": "Laptop", "embedding": [0.5, 1.0], "category": "tech"}
    vectors = frozenset({"embedding"})
    assert context_string(source, [], vectors) == '{"title":"Laptop","category":"tech"}'
    # named in contextFields, a vector is sent; what is not named is not
    assert context_string(source, ["title", "embedding"], vectors) == (
        '{"title":"Laptop","embedding":[0.5,1.0]}')
    assert context_string(source, [], frozenset()) == (
        '{"title":"Laptop","embedding":[0.5,1.0],"category":"tech"}')
