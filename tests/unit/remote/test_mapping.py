"""responseTemplate mapping (workbench/remote/mapping.py): paths, presets, the generic form,
ids and scores coerced; expected hits worked out by hand from the answers below."""

from __future__ import annotations

from typing import Any

import pytest

from workbench.remote.mapping import (
    PRESETS,
    MappingError,
    Unmappable,
    coerce_id,
    coerce_score,
    normalise,
    parse,
    parse_path,
    resolve,
    show,
)

OPENSEARCH_ANSWER: dict[str, Any] = {
    "took": 3, "timed_out": False,
    "hits": {"total": {"value": 3, "relation": "eq"}, "max_score": 2.5, "hits": [
        {"_index": "products", "_id": "p1", "_score": 2.5, "_source": {"title": "red shoe"}},
        {"_index": "products", "_id": "p2", "_score": 1.0, "_source": {"title": "shoe"}},
        {"_index": "products", "_id": "p3", "_score": 0.5, "_source": {"title": "sock"}},
    ]}}
SOLR_ANSWER: dict[str, Any] = {
    "responseHeader": {"status": 0},
    "response": {"numFound": 2, "start": 0, "docs": [
        {"id": "B01", "title": ["red shoe"], "score": 3.25},
        {"id": "B02", "title": ["shoe"], "score": 1.5},
    ]}}
API_ANSWER: dict[str, Any] = {
    "total": 2, "results": [
        {"sku": 1001, "relevance": 7.5, "product": {"title": "Red shoe", "brand": "Acme",
                                                    "tags": ["a", "b"]}},
        {"sku": "X-2", "relevance": "1.25", "product": {"title": "Shoe"}},
    ]}


@pytest.mark.parametrize(("text", "steps"), [
    ("$", ()),
    ("$.hits.hits", ("hits", "hits")),
    ("hits.hits", ("hits", "hits")),
    ("$['hits']['total']", ("hits", "total")),
    ('$["a.b"].c', ("a.b", "c")),
    ("$['it\\'s']", ("it's",)),
    ("$.results[0].sku", ("results", 0, "sku")),
    ("[2]", (2,)),
    ("$.a[10][0]", ("a", 10, 0)),
])
def test_paths(text: str, steps: tuple[Any, ...]) -> None:
    assert parse_path(text) == steps


@pytest.mark.parametrize(("text", "reason"), [
    ("", "responseTemplate.hits: must be a path such as $.hits.hits"),
    ("$..x", "responseTemplate.hits: the path [$..x] has no key after the '.' at character 1"),
    ("$.a[*]", "responseTemplate.hits: the path [$.a[*]] cannot be read at character 3: use "
               "$, .key, ['key'] and [n] steps only"),
    ("$.a[?(@.x)]", "responseTemplate.hits: the path [$.a[?(@.x)]] cannot be read at "
                    "character 3: use $, .key, ['key'] and [n] steps only"),
    ("$['a'", "responseTemplate.hits: the path [$['a'] has a quoted key not closed by ']"),
    ("$.a[-1]", "responseTemplate.hits: the path [$.a[-1]] cannot be read at character 3: "
                "use $, .key, ['key'] and [n] steps only"),
])
def test_bad_paths_name_the_field(text: str, reason: str) -> None:
    with pytest.raises(MappingError) as caught:
        parse_path(text, "responseTemplate.hits")
    assert str(caught.value) == reason


def test_resolve_walks_keys_and_indices_and_reports_a_miss() -> None:
    assert resolve(API_ANSWER, parse_path("$.results[0].product.tags[1]")) == (True, "b")
    assert resolve(API_ANSWER, parse_path("$.results[2]")) == (False, None)
    assert resolve(API_ANSWER, parse_path("$.results.sku")) == (False, None)  # a list, no key
    assert resolve(API_ANSWER, parse_path("$.total[0]")) == (False, None)
    assert resolve({"a": None}, parse_path("$.a")) == (True, None)  # found, and null


def test_show_spells_paths_canonically() -> None:
    assert show(parse_path("hits['hits'][0]['a b']")) == "$.hits.hits[0]['a b']"
    assert show(()) == "$"


def test_the_opensearch_preset_keeps_the_hits_as_answered() -> None:
    hits = PRESETS["opensearch"].map(OPENSEARCH_ANSWER, 2)
    assert hits == OPENSEARCH_ANSWER["hits"]["hits"][:2]
    assert PRESETS["elasticsearch"].map(OPENSEARCH_ANSWER, 10) == \
        OPENSEARCH_ANSWER["hits"]["hits"]


def test_the_opensearch_preset_fills_in_what_a_hit_lacks() -> None:
    answer = {"hits": {"hits": [{"_id": 7, "_score": None}]}}
    assert PRESETS["opensearch"].map(answer, 5) == [{"_id": "7", "_score": None, "_source": {}}]


def test_the_solr_preset() -> None:
    assert PRESETS["solr"].map(SOLR_ANSWER, 10) == [
        {"_id": "B01", "_score": 3.25, "_source": {"id": "B01", "title": ["red shoe"],
                                                   "score": 3.25}},
        {"_id": "B02", "_score": 1.5, "_source": {"id": "B02", "title": ["shoe"],
                                                  "score": 1.5}},
    ]


def test_a_generic_mapping_with_fields() -> None:
    mapping = parse({"hits": "$.results", "id": "$.sku", "score": "$.relevance",
                     "fields": {"title": "$.product.title", "brand": "product['brand']",
                                "first_tag": "$.product.tags[0]"}})
    assert mapping.map(API_ANSWER, 10) == [
        {"_id": "1001", "_score": 7.5,
         "_source": {"title": "Red shoe", "brand": "Acme", "first_tag": "a"}},
        {"_id": "X-2", "_score": 1.25, "_source": {"title": "Shoe"}},  # missing: absent
    ]


def test_a_generic_mapping_with_a_source_path_or_none() -> None:
    with_source = parse({"hits": "results", "id": "sku", "source": "product"})
    assert with_source.map(API_ANSWER, 1) == [
        {"_id": "1001", "_score": None, "_source": API_ANSWER["results"][0]["product"]}]
    whole = parse({"hits": "results", "id": "sku"})
    assert whole.map(API_ANSWER, 1) == [
        {"_id": "1001", "_score": None, "_source": API_ANSWER["results"][0]}]


def test_a_preset_with_overrides() -> None:
    mapping = parse({"preset": "solr", "fields": {"title": "$.title[0]"}})
    assert mapping.map(SOLR_ANSWER, 1) == [
        {"_id": "B01", "_score": 3.25, "_source": {"title": "red shoe"}}]
    renamed = parse({"preset": "opensearch", "id": "$._source.title"})
    assert renamed.map(OPENSEARCH_ANSWER, 1) == [
        {"_id": "red shoe", "_score": 2.5, "_source": {"title": "red shoe"}}]


def test_at_most_size_hits_in_the_engines_order() -> None:
    assert [h["_id"] for h in PRESETS["opensearch"].map(OPENSEARCH_ANSWER, 2)] == ["p1", "p2"]
    assert PRESETS["opensearch"].map(OPENSEARCH_ANSWER, 0) == []


@pytest.mark.parametrize(("answer", "reason"), [
    ({"hits": {}}, "the hits path [$.hits.hits] matches nothing in the answer"),
    ({"hits": {"hits": {"a": 1}}}, "the hits path [$.hits.hits] matches an object, not a list"),
    ({"hits": {"hits": [{"_source": {}}]}},
     "hit 0: the id path [$._id] matches nothing; an id must be a non-empty string or a number"),
    ({"hits": {"hits": [{"_id": "a"}, {"_id": True}]}},
     "hit 1: the id path [$._id] is a boolean; an id must be a non-empty string or a number"),
    ({"hits": {"hits": [{"_id": ""}]}},
     "hit 0: the id path [$._id] is an empty string; an id must be a non-empty string or a "
     "number"),
    ([1, 2], "the hits path [$.hits.hits] matches nothing in the answer"),
])
def test_answers_that_do_not_map(answer: Any, reason: str) -> None:
    with pytest.raises(Unmappable) as caught:
        PRESETS["opensearch"].map(answer, 10)
    assert str(caught.value) == reason


def test_a_source_that_is_no_object_does_not_map() -> None:
    mapping = parse({"hits": "$.results", "id": "$.sku", "source": "$.product.title"})
    with pytest.raises(Unmappable, match=r"^hit 0: the source path \[\$\.product\.title\] "
                                         r"matches a string, not an object$"):
        mapping.map(API_ANSWER, 1)


@pytest.mark.parametrize(("value", "expected"), [
    ("abc", "abc"), (42, "42"), (-3, "-3"), (42.0, "42"), (1.5, "1.5"), (0, "0"),
    ("", None), (True, None), (None, None), ([1], None), ({"a": 1}, None),
    (float("nan"), None),
])
def test_ids_are_coerced_to_strings(value: Any, expected: str | None) -> None:
    assert coerce_id(value) == expected


@pytest.mark.parametrize(("value", "expected"), [
    (2, 2.0), (1.25, 1.25), ("3.5", 3.5), ("high", None), (None, None), (False, None),
    (float("inf"), None), ([1.0], None),
])
def test_scores_are_floats_or_null(value: Any, expected: float | None) -> None:
    assert coerce_score(value) == expected


def test_templates_as_stored() -> None:
    assert normalise(None) == "opensearch"
    assert normalise(" Solr ") == "solr"
    assert normalise('{"hits": "$.results", "id": "$.sku"}') == {"hits": "$.results",
                                                                 "id": "$.sku"}
    given = {"preset": "elasticsearch", "score": "$.s"}
    assert normalise(given) == given


@pytest.mark.parametrize(("template", "reason"), [
    ("lucene", "responseTemplate: unknown preset [lucene]; one of opensearch, elasticsearch, "
               "solr"),
    ({"preset": "vespa"}, "responseTemplate.preset: unknown preset [vespa]; one of opensearch, "
                          "elasticsearch, solr"),
    ({"id": "$.sku"}, "responseTemplate.hits: is required without a preset (a path such as "
                      "$.results)"),
    ({"hits": "$.results"}, "responseTemplate.id: is required without a preset (a path such "
                            "as $.sku)"),
    ({"hits": "$.r", "id": "$.i", "script": "x"},
     "responseTemplate.script: is not a field of responseTemplate; allowed: [preset, hits, id, "
     "score, source, fields]"),
    ({"hits": "$.r", "id": "$.i", "fields": []},
     'responseTemplate.fields: must be an object of field names and paths, such as '
     '{"title": "$.product.title"}'),
    ({"hits": "$.r", "id": "$.i", "fields": {"t": "$.a[x]"}},
     "responseTemplate.fields.t: the path [$.a[x]] cannot be read at character 3: use $, "
     ".key, ['key'] and [n] steps only"),
    ('{"hits": ', "responseTemplate: is not valid JSON: Expecting value at character 8"),
    (["opensearch"], "responseTemplate: must be a preset name (one of opensearch, "
                     "elasticsearch, solr) or an object of paths"),
    ({"hits": 5, "id": "$.i"}, "responseTemplate.hits: must be a path such as $.hits.hits"),
])
def test_bad_templates_name_the_field(template: Any, reason: str) -> None:
    with pytest.raises(MappingError) as caught:
        normalise(template)
    assert str(caught.value) == reason


def test_the_cache_signature_differs_with_what_is_read() -> None:
    assert parse("opensearch").signature() != parse("elasticsearch").signature()
    assert parse({"hits": "a", "id": "b"}).signature() == \
        parse({"hits": "$.a", "id": "$['b']"}).signature()
