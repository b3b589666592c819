"""Search configurations over HTTP against the real cluster."""

from __future__ import annotations

import json
import uuid
from typing import Any

import pytest
from opensearchpy import OpenSearch

from tests.support.api import Api
from workbench.store.search_render import render

INDEX = "search-relevance-search-config"
QUERY = '{"query":{"match":{"title":"%SearchText%"}},"_source":["title"]}'


@pytest.fixture(scope="module")
def products(direct: OpenSearch) -> Any:
    name = f"test-products-{uuid.uuid4().hex[:8]}"
    direct.indices.create(index=name)
    for i, title in enumerate(["red running shoes", "blue shoes", "red hat", "green sock"]):
        direct.index(index=name, id=f"p{i}", body={"title": title, "price": 10 * i})
    direct.indices.refresh(index=name)
    yield name
    direct.indices.delete(index=name)


def create(api: Api, products: str, **fields: Any) -> Any:
    body = {"name": f"sc-{uuid.uuid4().hex[:8]}", "index": products, "query": QUERY, **fields}
    return api.srw("PUT", "/search_configurations", body)


def test_create_stores_the_query_verbatim(api: Api, products: str) -> None:
    query = '  {"query": {"match": {"title": "%SearchText%"}},  "size": 3}  '
    reply = create(api, products, query=query, description="baseline title match",
                   searchPipeline="")
    assert reply.status == 200
    assert set(reply.json) == {"search_configuration_id", "search_configuration_result"}
    assert reply.json["search_configuration_result"] == "CREATED"
    sc_id = reply.json["search_configuration_id"]
    got = api.srw("GET", f"/search_configurations/{sc_id}").json
    (hit,) = got["hits"]["hits"]
    assert hit["_id"] == sc_id and hit["_index"] == INDEX
    source = hit["_source"]
    assert source["id"] == sc_id
    assert source["query"] == query.strip()  # the text as given, only trimmed
    assert source["index"] == products
    assert source["searchPipeline"] == ""
    assert source["description"] == "baseline title match"
    assert set(source) == {"id", "name", "timestamp", "index", "query", "searchPipeline",
                           "description"}


def test_list_search_and_delete(api: Api, products: str) -> None:
    ids = [create(api, products).json["search_configuration_id"] for _ in range(2)]
    listed = api.srw("GET", "/search_configurations").json["hits"]["hits"]
    assert [h["_id"] for h in listed[:2]] == ids[::-1]
    found = api.srw("POST", "/search_configurations/_search",
                    {"query": {"ids": {"values": ids}}}).json
    assert sorted(h["_id"] for h in found["hits"]["hits"]) == sorted(ids)
    deleted = api.srw("DELETE", f"/search_configurations/{ids[0]}")
    assert deleted.status == 200 and deleted.json["result"] == "deleted"
    api.srw("GET", f"/search_configurations/{ids[0]}").error(
        404, f"Document not found: {ids[0]}")


def test_delete_is_refused_while_an_experiment_uses_it(api: Api, products: str,
                                                       direct: OpenSearch) -> None:
    sc_id = create(api, products).json["search_configuration_id"]
    exp_id = str(uuid.uuid4())
    direct.index(index=".plugins-search-relevance-experiment", id=exp_id, refresh=True,
                 body={"id": exp_id, "querySetId": "x", "searchConfigurationList": ["y", sc_id]})
    try:
        api.srw("DELETE", f"/search_configurations/{sc_id}").error(
            409, "search configuration cannot be deleted as it is currently used by experiments "
                 f"with ids {exp_id}", "search_relevance_exception")
    finally:
        direct.delete(index=".plugins-search-relevance-experiment", id=exp_id, refresh=True)


def test_a_named_search_pipeline_need_not_exist_yet(api: Api, products: str,
                                                   direct: OpenSearch) -> None:
    """Stored as given, as by the plugin; a job that runs it while the pipeline is still
    missing ends ERROR naming it (tests/integration/test_lenient_creates.py)."""
    pipeline = f"p-{uuid.uuid4().hex[:6]}"
    reply = create(api, products, searchPipeline=pipeline)
    assert reply.status == 200
    stored = direct.get(index=INDEX, id=reply.json["search_configuration_id"])["_source"]
    assert stored["searchPipeline"] == pipeline
    direct.transport.perform_request("PUT", f"/_search/pipeline/{pipeline}", body={
        "request_processors": [{"filter_query": {"query": {"range": {"price": {"lt": 15}}}}}]})
    try:
        reply = create(api, products, searchPipeline=pipeline)
        assert reply.status == 200
        stored = direct.get(index=INDEX, id=reply.json["search_configuration_id"])["_source"]
        assert stored["searchPipeline"] == pipeline
    finally:
        direct.transport.perform_request("DELETE", f"/_search/pipeline/{pipeline}")


def test_an_alias_or_a_pattern_is_a_target_index(api: Api, products: str,
                                                direct: OpenSearch) -> None:
    """The workbench's extension (docs/differences.md): the plugin takes concrete names only
    since its #360; an alias or a pattern that resolves to indices is stored as given and
    searched as the cluster resolves it."""
    direct.indices.put_alias(index=products, name=f"{products}-alias")
    for name in (f"{products}-alias", f"{products[:-3]}*"):
        reply = create(api, products, index=name)
        assert reply.status == 200, reply.data
        config = direct.get(index=INDEX, id=reply.json["search_configuration_id"])["_source"]
        assert config["index"] == name
        search = render(config, "red", size=10)
        hits = direct.search(index=search.index, body=search.body)["hits"]["hits"]
        assert sorted(h["_id"] for h in hits) == ["p0", "p2"]


@pytest.mark.parametrize("fields, reason", [
    ({"name": None}, "Invalid name: Text cannot be null"),
    ({"name": "x" * 51}, "Invalid name: Text exceeds maximum length of 50 characters"),
    ({"name": "<script>"}, "Invalid name: Text contains invalid characters (quotes, "
                           "backslashes, or HTML tags are not allowed)"),
    ({"description": "d" * 251},
     "Invalid description: Text exceeds maximum length of 250 characters"),
    ({"index": None}, "index is required"),
    ({"index": 12}, "Field 'index' must be a string"),
    # plugin #360's message, also for a pattern that matches no index
    ({"index": "no-such-index-anywhere"},
     "Index [no-such-index-anywhere] does not exist in the cluster"),
    ({"index": "no-such-index-*"}, "Index [no-such-index-*] does not exist in the cluster"),
    ({"query": None}, "query is required"),
    ({"query": {"query": {"match_all": {}}}},
     "query must be a string holding the search body as JSON"),
    ({"query": '{"query":{"match":{"title":"%SearchText%"}}'},
     "query is not valid JSON: Expecting ',' delimiter: line 1 column 44 (char 43)"),
    ({"query": '["%SearchText%"]'}, "query must be a JSON object (the search request body)"),
    ({"query": "   "}, "query cannot be empty"),
    ({"searchPipeline": 3}, "Field 'searchPipeline' must be a string"),
])
def test_bad_input(api: Api, products: str, direct: OpenSearch, fields: dict[str, Any],
                   reason: str) -> None:
    before = direct.count(index=INDEX)["count"]
    create(api, products, **fields).error(400, reason)
    assert direct.count(index=INDEX)["count"] == before


@pytest.mark.parametrize("query, reason", [
    # the search-configuration table's old mistake: a bare clause where the body belongs
    ('{"match":{"title":"%SearchText%"}}', "Unknown key for a START_OBJECT in [match]."),
    ('{"query":{"mach":{"title":"%SearchText%"}}}', "unknown query [mach] did you mean [match]?"),
    ('{"query":{"match":{"title":"%SearchText%","x":1}}}',
     "[match] query doesn't support multiple fields, found [title] and [x]"),
])
def test_a_query_the_cluster_cannot_parse_is_refused_at_creation(
        api: Api, products: str, direct: OpenSearch, query: str, reason: str) -> None:
    """The plugin stores these and the first experiment that runs one ends ERROR with
    ``parsing_exception``; the workbench asks the cluster once and refuses them."""
    before = direct.count(index=INDEX)["count"]
    create(api, products, query=query).error(
        400, f"query cannot be parsed as a search request on [{products}]: {reason} (query is "
             'the whole search body, as {"query": {"match": {"title": "%SearchText%"}}})')
    assert direct.count(index=INDEX)["count"] == before


def test_a_hybrid_query_is_checked_clause_by_clause(api: Api, products: str) -> None:
    """Without the neural-search plugin the cluster parses no ``hybrid`` query, and the
    workbench runs its clauses itself: each clause is what must parse."""
    good = ('{"query":{"hybrid":{"queries":[{"match":{"title":"%SearchText%"}},'
            '{"match_all":{}}]}},"_source":["title"]}')
    assert create(api, products, query=good).status == 200
    bad = '{"query":{"hybrid":{"queries":[{"match":{"title":"%SearchText%"}},{"mach":{}}]}}}'
    create(api, products, query=bad).error(
        400, f"query cannot be parsed as a search request on [{products}]: unknown query "
             '[mach] did you mean [match]? (query is the whole search body, as {"query": '
             '{"match": {"title": "%SearchText%"}}})')


def test_a_query_that_fails_only_for_some_texts_is_accepted(api: Api, products: str) -> None:
    """Words against a number field fail for the sample text, not for every query text (a
    query set of prices would run): only parse failures are refused."""
    assert create(api, products, query='{"query":{"term":{"price":"%SearchText%"}}}'
                  ).status == 200


def test_placeholders_and_mustache_are_accepted(api: Api, products: str) -> None:
    for query in (
        '{"query":{"match":{"title":"%queryText%"}}}',
        '{"query":{"bool":{"must":[{"match":{"title":"{{query_string}}"}}],'
        '"filter":[{"term":{"category_filter":"{{category_filter}}"}}]}}}',
    ):
        assert create(api, products, query=query).status == 200


def test_a_query_without_the_query_text_is_stored_as_given(api: Api, products: str,
                                                           direct: OpenSearch) -> None:
    """A ``match_all`` baseline does not use the query text; the plugin stores it, so do we
    (it still has to be a JSON object: see test_bad_input)."""
    query = '{"query":{"match_all":{}}}'
    reply = create(api, products, query=query)
    assert reply.status == 200
    assert direct.get(index=INDEX, id=reply.json["search_configuration_id"])["_source"][
        "query"] == query


def test_the_shared_renderer_runs_a_configuration_on_the_cluster(
    api: Api, products: str, direct: OpenSearch
) -> None:
    sc_id = create(api, products).json["search_configuration_id"]
    config = direct.get(index=INDEX, id=sc_id)["_source"]
    search = render(config, "red shoes", size=2)
    assert search.index == products and search.pipeline is None
    assert search.body == {"query": {"match": {"title": "red shoes"}}, "_source": ["title"],
                           "size": 2}
    hits = direct.search(index=search.index, body=search.body)["hits"]["hits"]
    assert [h["_id"] for h in hits] == ["p0", "p1"]


def test_mustache_parameters_are_json_escaped() -> None:
    config = {"index": "i", "searchPipeline": "p",
              "query": '{"query":{"match":{"title":"{{queryText}}"}},'
                       '"post_filter":{"term":{"c":"{{category}}"}},"size":50}'}
    search = render(config, 'a "quoted" \\ text', 5, {"category": "tv & audio"})
    assert search.body == {"query": {"match": {"title": 'a "quoted" \\ text'}},
                           "post_filter": {"term": {"c": "tv & audio"}}, "size": 5}
    assert search.params() == {"search_pipeline": "p"}
    assert json.loads(json.dumps(search.body)) == search.body
