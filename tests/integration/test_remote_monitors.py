"""A monitor watching a remote search configuration (docs/engines.md, docs/monitors.md): the
tiny case of test_monitors.py (twelve products, three queries, the ``token_overlap`` judge at
threshold 1.0, k = 3) searched through a remote configuration whose engine is the local cluster
reached by HTTP. Its hand-worked values are those of test_monitors.py's GOOD configuration:
NDCG@3 = 1.5 / (1 + 1/log2(3)) = 0.9197 and Precision@3 = 2/3 for every query. A second run
rates nothing new, and its gold check re-rates the texts the first run's judge read (a remote's
documents cannot be read again by id), so the judge has not drifted."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from opensearchpy import OpenSearch

from tests.integration.test_monitors import (
    GOOD_NDCG,
    GOOD_TOP,
    JUDGE,
    PRODUCTS,
    QUERIES,
    SORTED,
    create,
    run_now,
    values,
)
from tests.support.api import Api, search_configuration
from tests.support.processes import TRUST_LOOPBACK, loopback_node, own_stack


@pytest.fixture(scope="module")
def stack(env: dict[str, str]) -> Iterator[Api]:
    with own_stack(env, "test-remote-mon", **TRUST_LOOPBACK) as api:
        yield api


@pytest.fixture(scope="module")
def case(stack: Api, direct: OpenSearch, opensearch_url: str) -> Iterator[dict[str, str]]:
    index = f"test-remote-mon-{uuid.uuid4().hex[:8]}"
    direct.indices.create(index=index, body={"mappings": {"properties": {
        "title": {"type": "text"}, "rank": {"type": "integer"}}}})
    for doc_id, title, rank in PRODUCTS:
        direct.index(index=index, id=doc_id, body={"title": title, "rank": rank})
    direct.indices.refresh(index=index)
    remote = stack.srw("PUT", "/remote_search_configurations", {
        "name": "good, remote",
        "connectionUrl": f"{loopback_node(opensearch_url)}/{index}/_search",
        "queryTemplate": SORTED % "asc"})
    assert remote.status == 200, remote.data
    local = search_configuration(stack, "good, local", index, SORTED % "asc")
    panel = stack.srw("PUT", "/query_sets", {"name": "panel", "querySetQueries": [
        {"queryText": q, "referenceAnswer": "red leather"} for q in QUERIES]}
                      ).json["query_set_id"]
    yield {"remote": remote.json["remote_search_configuration_id"], "local": local,
           "panel": panel}
    direct.indices.delete(index=index, ignore=[404])


def definition(case: dict[str, str], config: str) -> dict[str, Any]:
    return {"name": f"tiny {config}", "searchConfigurationId": case[config],
            "queries": {"querySetId": case["panel"]}, "judge": JUDGE, "k": 3,
            "metrics": ["NDCG@3", "Precision@3"], "goldPairs": 9}


def test_a_monitor_of_a_remote_configuration_measures_what_a_local_one_does(
        stack: Api, case: dict[str, str], direct: OpenSearch) -> None:
    remote = create(stack, definition(case, "remote"))
    first = run_now(stack, remote)
    assert first["status"] == "COMPLETED", first
    assert {q["query"]: q["docIds"] for q in first["queries"]} == GOOD_TOP
    assert values(first, "NDCG@3") == pytest.approx(dict.fromkeys(QUERIES, GOOD_NDCG))
    assert values(first, "Precision@3") == pytest.approx(dict.fromkeys(QUERIES, 2 / 3))
    assert first["rated"]["new"] == 9 and first["gold"] == {
        "pairs": 9, "changed": 0, "drift": False}
    gold = direct.get(index="search-relevance-monitor", id=remote)["_source"]["gold"]["pairs"]
    titles = {doc_id: title for doc_id, title, _ in PRODUCTS}
    assert [p["docId"] for p in gold] == [d for q in QUERIES for d in GOOD_TOP[q]]
    assert all(titles[p["docId"]] in p["text"] for p in gold), gold

    second = run_now(stack, remote)
    assert second["status"] == "COMPLETED", second
    assert second["rated"]["new"] == 0 and second["rated"]["reused"] == 9
    assert second["gold"] == {"pairs": 9, "changed": 0, "drift": False}
    assert values(second, "NDCG@3") == values(first, "NDCG@3")

    local = run_now(stack, create(stack, definition(case, "local")))
    assert values(local, "NDCG@3") == values(first, "NDCG@3")
    assert values(local, "Precision@3") == values(first, "Precision@3")


def test_a_monitor_of_a_configuration_that_exists_nowhere_is_refused(
        stack: Api, case: dict[str, str]) -> None:
    body = {**definition(case, "remote"), "searchConfigurationId": "no-such-config"}
    reply = stack.srw("PUT", "/monitors", body)
    assert reply.status == 400, reply.data
    assert reply.json["error"]["reason"] == (
        "searchConfigurationId: search configuration [no-such-config] does not exist")
