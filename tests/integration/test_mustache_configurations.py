"""Mustache search configurations (plugin pull request #342; docs/contract.md, "Rendering"):
the query text bound as ``{{query_string}}`` (the plugin's newest name) and ``{{queryText}}``,
custom fields by their names, values JSON-escaped, a missing variable empty, partials refused,
in experiments and in judgments, against the real cluster and worker.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from opensearchpy import OpenSearch

from tests.conftest import JUDGE_MODEL
from tests.support.api import Api
from tests.support.processes import Worker
from tests.support.waiting import finished

DOCS = {"m1": ("red shoes", "acme"), "m2": ("red shoes", "zeta"), "m3": ("blue hat", "acme"),
        "m4": ("the red edition", "zeta")}
#: the query text bound under the plugin's newest name, a custom field filtering
BY_BRAND = ('{"query":{"bool":{"must":[{"match":{"title":{"query":"{{query_string}}",'
            '"operator":"and"}}}],"filter":[{"term":{"brand":"{{brand}}"}}]}},"sort":["price"]}')
#: the query text under its first name
BY_TITLE = ('{"query":{"match":{"title":{"query":"{{queryText}}","operator":"and"}}},'
            '"sort":["price"]}')
PARTIAL = '{"query":{"match":{"title":"{{>/etc/passwd}}"}}}'
#: a quote can reach a query text from a set sampled from user queries (the text rules refuse
#: one in a set created by hand); the set is stored as a sampled one is
QUERIES = [("red shoes", {"brand": "acme"}), ("red", {}), ('red "shoes"', {"brand": "zeta"})]


@pytest.fixture(scope="module")
def world(api: Api, direct: OpenSearch, worker: Worker) -> Iterator[dict[str, Any]]:
    index = f"test-mustache-{uuid.uuid4().hex[:6]}"
    direct.indices.create(index=index, body={"mappings": {"properties": {
        "title": {"type": "text"}, "brand": {"type": "keyword"}, "price": {"type": "integer"}}}})
    for price, (doc_id, (title, brand)) in enumerate(DOCS.items()):
        direct.index(index=index, id=doc_id, body={"title": title, "brand": brand,
                                                   "price": price})
    direct.indices.refresh(index=index)
    query_set = str(uuid.uuid4())
    direct.index(index="search-relevance-queryset", id=query_set, refresh=True, body={
        "id": query_set, "name": "sampled", "description": "", "sampling": "random",
        "timestamp": "2026-11-26T00:00:00.000Z",
        "querySetQueries": [{"queryText": text, "customFields": custom}
                            for text, custom in QUERIES]})
    configs = {}
    for name, query in (("by_brand", BY_BRAND), ("by_title", BY_TITLE)):
        reply = api.srw("PUT", "/search_configurations", {"name": name, "index": index,
                                                           "query": query})
        assert reply.status == 200, reply.data
        configs[name] = reply.json["search_configuration_id"]
    yield {"index": index, "querySetId": query_set, **configs}
    direct.indices.delete(index=index)


def test_the_pairwise_snapshots_show_each_rendering(api: Api, world: dict[str, Any]) -> None:
    reply = api.srw("PUT", "/experiments", {
        "type": "PAIRWISE_COMPARISON", "querySetId": world["querySetId"], "size": 10,
        "searchConfigurationList": [world["by_brand"], world["by_title"]]})
    assert reply.status == 200, reply.data
    done = finished(api, f"/experiments/{reply.json['experiment_id']}", 120)
    assert done["status"] == "COMPLETED", done
    shown = {r["query_text"]: [s["docIds"] for s in r["snapshots"]] for r in done["results"]}
    assert shown == {
        # {{query_string}} and {{brand}} filled; {{queryText}} filled
        "red shoes": [["m1"], ["m1", "m2"]],
        # no brand: {{brand}} renders "" and the filter matches nothing
        "red": [[], ["m1", "m2", "m4"]],
        # the quotes JSON-escaped: the text reaches the match query whole
        'red "shoes"': [["m2"], ["m1", "m2"]],
    }


def test_an_llm_judgment_rates_what_each_rendering_found(
        api: Api, world: dict[str, Any]) -> None:
    reply = api.srw("PUT", "/judgments", {
        "name": f"mustache-{uuid.uuid4().hex[:6]}", "type": "LLM_JUDGMENT",
        "modelId": JUDGE_MODEL, "querySetId": world["querySetId"], "size": 10,
        "searchConfigurationList": [world["by_brand"]], "contextFields": ["title"],
        "overwriteCache": True})
    assert reply.status == 200, reply.data
    done = finished(api, f"/judgments/{reply.json['judgment_id']}", 120)
    assert done["status"] == "COMPLETED", done["metadata"]
    rated = {e["query"]: [r["docId"] for r in e["ratings"]] for e in done["judgmentRatings"]}
    assert rated == {'red shoes#{"brand":"acme"}': ["m1"], "red": [],
                     'red "shoes"#{"brand":"zeta"}': ["m2"]}
    assert done["metadata"]["failedQueries"] == 0


def test_a_partial_is_refused_when_created(api: Api, world: dict[str, Any]) -> None:
    api.srw("PUT", "/search_configurations", {
        "name": "partial", "index": world["index"], "query": PARTIAL}).error(
        400, "query uses a Mustache partial: Partial templates are not supported")
    # after a change of delimiters too, and inside a section
    for query in ('{{=<% %>=}}{"query":{"match":{"title":"<%>x%>"}}}',
                  '{"query":{"match":{"title":"{{#brand}}{{>x}}{{/brand}}"}}}'):
        api.srw("PUT", "/search_configurations", {
            "name": "partial", "index": world["index"], "query": query}).error(
            400, "query uses a Mustache partial: Partial templates are not supported")


def test_a_stored_partial_fails_every_search_with_the_plugins_message(
        api: Api, world: dict[str, Any], direct: OpenSearch) -> None:
    """A configuration stored before the check (or by another tool) is not rendered."""
    config = str(uuid.uuid4())
    direct.index(index="search-relevance-search-config", id=config, refresh=True, body={
        "id": config, "name": "old partial", "index": world["index"], "query": PARTIAL,
        "searchPipeline": "", "timestamp": "2026-11-26T00:00:00.000Z", "description": ""})
    reply = api.srw("PUT", "/experiments", {
        "type": "PAIRWISE_COMPARISON", "querySetId": world["querySetId"], "size": 10,
        "searchConfigurationList": [config, world["by_title"]]})
    assert reply.status == 200, reply.data
    done = finished(api, f"/experiments/{reply.json['experiment_id']}", 120)
    assert done["status"] == "ERROR"
    assert done["results"] == [{"error": "query uses a Mustache partial: Partial templates are "
                                         f"not supported for query [red shoes] with search "
                                         f"configuration [{config}]"}]
