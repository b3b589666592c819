"""The document sample query generation starts from (``querygen/documents.py``), against the
real OpenSearch: seeded and reproducible, the count honoured, vector fields left out, context
fields (dotted paths too) kept, a stratified draw covering every value, long texts cut, and the
errors a client reads for a missing index or missing context fields."""

from __future__ import annotations

import uuid
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest
from opensearchpy import OpenSearch, helpers

from workbench.llm.tokens import count_tokens
from workbench.querygen.documents import check_context_fields, sample_documents
from workbench.querygen.errors import UnknownContextFields, UnknownIndex

#: 60 documents over four brands of 30, 15, 10 and 5
BRANDS = ["acme"] * 30 + ["bolt"] * 15 + ["core"] * 10 + ["dune"] * 5
COLORS = ("red", "blue", "green")
#: documents whose only text is punctuation: skipped when the context is their title
NO_TEXT = {"d00", "d01", "d02"}
LONG = "lorem ipsum dolor sit amet consectetur " * 200  # about 1,400 tokens


def _doc(number: int, vector_type: str) -> dict[str, Any]:
    doc_id = f"d{number:02d}"
    source: dict[str, Any] = {
        "title": "---" if doc_id in NO_TEXT else f"{BRANDS[number]} trail shoe {number}",
        "brand": BRANDS[number],
        "attributes": {"color": COLORS[number % 3], "material": "mesh"},
        "embedding": ([0.1 * (number % 7), 0.2, 0.3, 0.4] if vector_type == "knn_vector"
                      else {"trail": 1.0 + number, "shoe": 0.5}),
    }
    if number % 10 == 5:
        source["notes"] = LONG
    return {"_index": None, "_id": doc_id, "_source": source}


@pytest.fixture(scope="module")
def products(direct: OpenSearch) -> Iterator[tuple[str, dict[str, dict[str, Any]]]]:
    """The index (two shards) and its documents by id; deleted afterwards."""
    plugins = {row["component"] for row in direct.cat.plugins(format="json")}
    # k-NN's knn_vector where the cluster has it; core's rank_features (a vector type for
    # store/vector_fields.py too) where it has not
    vector_type = "knn_vector" if "opensearch-knn" in plugins else "rank_features"
    vector = {"type": vector_type, **({"dimension": 4} if vector_type == "knn_vector" else {})}
    name = f"test-querygen-{uuid.uuid4().hex[:10]}"
    direct.indices.create(index=name, body={
        "settings": {"number_of_shards": 2, "number_of_replicas": 0},
        "mappings": {"properties": {
            "title": {"type": "text", "fields": {"keyword": {"type": "keyword"}}},
            "brand": {"type": "keyword"},
            "attributes": {"properties": {"color": {"type": "keyword"},
                                          "material": {"type": "keyword"}}},
            "embedding": vector,
            "notes": {"type": "text"},
        }}})
    try:
        actions = [_doc(number, vector_type) for number in range(len(BRANDS))]
        for action in actions:
            action["_index"] = name
        helpers.bulk(direct, actions, refresh=True)
        yield name, {action["_id"]: action["_source"] for action in actions}
    finally:
        direct.indices.delete(index=name, ignore=[404])


def ids(docs: list[Any]) -> list[str]:
    return [doc.id for doc in docs]


def test_the_same_seed_draws_the_same_documents_in_the_same_order(direct, products) -> None:
    index, _ = products
    first = sample_documents(direct, index, 12, seed=7)
    assert len(first) == 12 and len(set(ids(first))) == 12
    assert sample_documents(direct, index, 12, seed=7) == first
    assert ids(sample_documents(direct, index, 12, seed=8)) != ids(first)


def test_the_count_is_honoured_and_documents_without_text_are_skipped(direct, products) -> None:
    index, docs = products
    assert len(sample_documents(direct, index, 1, seed=3)) == 1
    # the brand is text: every document is usable with its whole source
    assert sorted(ids(sample_documents(direct, index, 100, seed=3))) == sorted(docs)
    titles = sample_documents(direct, index, 100, seed=3, context_fields=["title"])
    assert sorted(ids(titles)) == sorted(set(docs) - NO_TEXT)
    assert sample_documents(direct, index, 0, seed=3) == []
    # 6 documents of 60 have notes: the first page of 22 holds all six only by rare chance
    # (about 1 in 400; the order depends on the index name), so the draw pages on
    notes = sample_documents(direct, index, 6, seed=3, context_fields=["notes"], max_tokens=5)
    assert sorted(ids(notes)) == sorted(doc_id for doc_id, source in docs.items()
                                        if "notes" in source)


def test_vector_fields_are_left_out(direct, products) -> None:
    index, docs = products
    for doc in sample_documents(direct, index, 20, seed=1):
        expected = {key: value for key, value in docs[doc.id].items() if key != "embedding"}
        if "notes" in expected:
            expected["notes"] = doc.fields["notes"]  # cut: see the test below
        assert doc.fields == expected


def test_context_fields_keep_only_those_dotted_paths_and_multi_fields_too(
        direct, products) -> None:
    index, docs = products
    drawn = sample_documents(direct, index, 10, seed=2,
                             context_fields=["attributes.color", "title.keyword", "embedding"])
    assert len(drawn) == 10
    for doc in drawn:
        source = docs[doc.id]
        # named fields are kept as named, a vector too (as judgments keep a named one)
        assert doc.fields == {"attributes.color": source["attributes"]["color"],
                              "title.keyword": source["title"],
                              "embedding": source["embedding"]}
        assert list(doc.fields) == ["attributes.color", "title.keyword", "embedding"]


def test_a_stratified_draw_covers_every_value_in_proportion(direct, products) -> None:
    index, docs = products
    drawn = sample_documents(direct, index, 8, seed=5, stratify_field="brand")
    brands = [docs[doc.id]["brand"] for doc in drawn]
    # one each, then 4 shared over 29/14/9/4 left (2.07, 1.0, 0.64, 0.29: 2, 1, 0, 0 and the
    # largest remainder, core's, takes the last); interleaved, the largest value first
    assert Counter(brands) == {"acme": 3, "bolt": 2, "core": 2, "dune": 1}
    assert brands[:4] == ["acme", "bolt", "core", "dune"]
    assert sample_documents(direct, index, 8, seed=5, stratify_field="brand") == drawn
    # with the title as context acme's text-less documents are skipped, and acme still gives 3
    titled = sample_documents(direct, index, 8, seed=5, stratify_field="brand",
                              context_fields=["title"])
    assert Counter(docs[doc.id]["brand"] for doc in titled) == Counter(brands)
    assert not NO_TEXT & set(ids(titled))
    # fewer than the values: the largest values each give one
    assert [docs[doc.id]["brand"] for doc in sample_documents(
        direct, index, 2, seed=5, stratify_field="brand")] == ["acme", "bolt"]


def test_long_text_is_cut_to_max_tokens(direct, products) -> None:
    index, docs = products
    drawn = sample_documents(direct, index, 60, seed=4, max_tokens=50)
    long = [doc for doc in drawn if "notes" in docs[doc.id]]
    assert len(long) == 6
    for doc in long:
        assert count_tokens(doc.fields["notes"]) == 50
        assert LONG.startswith(doc.fields["notes"])
        assert doc.fields["title"] == docs[doc.id]["title"]  # short texts are whole


def test_missing_context_fields_are_named_in_the_order_given(direct, products) -> None:
    index, _ = products
    check_context_fields(direct, index, ["title", "title.keyword", "attributes.color", "brand"])
    with pytest.raises(UnknownContextFields) as raised:
        check_context_fields(direct, index, ["nope", "title", "attributes.size"])
    assert str(raised.value) == \
        "Context fields [nope, attributes.size] do not exist in the index mapping"
    with pytest.raises(UnknownContextFields):
        sample_documents(direct, index, 3, seed=1, context_fields=["attributes.size"])


def test_a_missing_index_is_a_clear_error_and_an_alias_or_pattern_is_fine(
        direct, products) -> None:
    index, _ = products
    missing = f"test-querygen-missing-{uuid.uuid4().hex[:6]}"
    for call in (lambda name: check_context_fields(direct, name, ["title"]),
                 lambda name: sample_documents(direct, name, 3, seed=1)):
        with pytest.raises(UnknownIndex) as raised:
            call(missing)
        assert str(raised.value) == f"index [{missing}] does not exist"
        with pytest.raises(UnknownIndex):
            call(missing + "*")  # a pattern that names no index
    alias = index + "-alias"
    direct.indices.put_alias(index=index, name=alias)
    check_context_fields(direct, alias, ["title"])
    check_context_fields(direct, index[:-3] + "*", ["attributes.color"])
    assert sample_documents(direct, alias, 5, seed=9) == sample_documents(direct, index, 5,
                                                                          seed=9)
