"""The unmodified opensearch-py ``plugins.search_relevance`` client against the workbench."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from opensearchpy import OpenSearch
from opensearchpy.exceptions import NotFoundError, RequestError, TransportError


@pytest.fixture(scope="module")
def catalogue(direct: OpenSearch) -> Any:
    name = f"test-compat-{uuid.uuid4().hex[:8]}"
    direct.indices.create(index=name)
    direct.index(index=name, id="1", body={"title": "red shoes"}, refresh=True)
    yield name
    direct.indices.delete(index=name)


def test_query_set_round_trip(srw_client: Any) -> None:
    created = srw_client.put_query_sets(body={
        "name": "compat set", "description": "via opensearch-py", "sampling": "manual",
        "querySetQueries": [{"queryText": "red shoes", "referenceAnswer": "shoes that are red"}],
    })
    assert created["query_set_result"] == "CREATED"
    qs_id = created["query_set_id"]

    one = srw_client.get_query_sets(query_set_id=qs_id)
    (hit,) = one["hits"]["hits"]
    assert hit["_id"] == hit["_source"]["id"] == qs_id
    assert hit["_source"]["querySetQueries"] == [
        {"queryText": "red shoes", "customFields": {"referenceAnswer": "shoes that are red"}}]

    listed = srw_client.get_query_sets()
    assert qs_id in [h["_id"] for h in listed["hits"]["hits"]]
    filtered = srw_client.get_query_sets(query_set_id=qs_id,
                                         params={"filter_path": "hits.hits._source.name"})
    assert filtered == {"hits": {"hits": [{"_source": {"name": "compat set"}}]}}

    deleted = srw_client.delete_query_sets(query_set_id=qs_id)
    assert deleted["result"] == "deleted"
    with pytest.raises(NotFoundError) as missing:
        srw_client.get_query_sets(query_set_id=qs_id)
    assert missing.value.error == "resource_not_found_exception"
    assert missing.value.info["error"]["reason"] == f"Document not found: {qs_id}"


def test_sampled_query_set(srw_client: Any, ubi_data: None, direct: OpenSearch) -> None:
    created = srw_client.post_query_sets(body={"name": "top five", "sampling": "topn",
                                               "querySetSize": 5})
    source = direct.get(index="search-relevance-queryset",
                        id=created["query_set_id"])["_source"]
    assert [q["queryText"] for q in source["querySetQueries"]][:2] == ["gold",
                                                                       "wireless earbuds"]
    assert len(source["querySetQueries"]) == 5


def test_validation_errors_reach_the_client(srw_client: Any) -> None:
    with pytest.raises(RequestError) as bad:
        srw_client.put_query_sets(body={"name": "x", "querySetQueries": [{"queryText": ""}]})
    assert bad.value.status_code == 400
    assert bad.value.info["error"]["reason"] == "Invalid queryText: Text cannot be empty"
    with pytest.raises(TransportError) as limit:
        srw_client.post_query_sets(body={"name": "x", "sampling": "topn",
                                         "querySetSize": 5000})
    assert limit.value.status_code == 403


def test_search_configuration_round_trip(srw_client: Any, catalogue: str) -> None:
    created = srw_client.put_search_configurations(body={
        "name": "baseline", "index": catalogue,
        "query": '{"query":{"match":{"title":"%SearchText%"}}}',
    })
    assert created["search_configuration_result"] == "CREATED"
    sc_id = created["search_configuration_id"]
    source = srw_client.get_search_configurations(
        search_configuration_id=sc_id)["hits"]["hits"][0]["_source"]
    assert source["query"] == '{"query":{"match":{"title":"%SearchText%"}}}'
    assert source["index"] == catalogue and source["searchPipeline"] == ""
    assert sc_id in [h["_id"] for h in srw_client.get_search_configurations()["hits"]["hits"]]
    assert srw_client.delete_search_configurations(
        search_configuration_id=sc_id)["result"] == "deleted"


def test_stats_through_the_client(srw_client: Any) -> None:
    stats = srw_client.get_stats()
    assert set(stats) == {"_nodes", "cluster_name", "info", "all_nodes", "nodes"}
    node_id = next(iter(stats["nodes"]))
    flat = srw_client.get_node_stats(node_id=node_id, stat="experiment_executions",
                                     params={"flat_stat_paths": "true"})
    assert list(flat["nodes"][node_id]) == ["experiments.experiment_executions"]
    only = srw_client.get_stats(stat="cluster_version")
    assert set(only["info"]) == {"cluster_version"}
