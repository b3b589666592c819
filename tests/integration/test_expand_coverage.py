"""``expandCoverage`` on an ``LLM_JUDGMENT`` of a ``hybrid`` configuration (judgments/pooling.py),
against the real cluster, worker and the stand-in LLM.

The index is small and hand-made so that the two clauses of the hybrid query (a ``match`` on the
title, a ``match`` on the description) retrieve different documents at ``size`` 2: the pool of
each query is worked out by hand below and checked against the cluster's own answers to each
clause. The test cluster has no neural-search plugin, so the configuration's own hybrid search
fails (today's behaviour: no ratings); the pool needs no plugin.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from opensearchpy import OpenSearch

from tests.support.api import Api, search_configuration
from tests.support.processes import Worker
from tests.support.waiting import finished
from workbench.bench.llm_server import LLMServer
from workbench.store.indices import JUDGMENT_INDEX

PRODUCTS = {
    "d1": ("red running shoes", "footwear for jogging"),
    "d2": ("red shoes for kids", "small footwear"),
    "d3": ("red hat", "warm wool"),
    "d4": ("trail sneakers", "red running shoes for the trail"),
    "d5": ("jogging trainers", "red shoes for running fast"),
    "d6": ("leather wallet", "a wallet"),
    "d7": ("wireless earbuds", "earbuds with charging case"),
    "d8": ("usb cable", "charging cable for wireless earbuds"),
    "d9": ("wireless headphones", "over ear"),
    "d10": ("phone charger", "wireless charging pad"),
}
SHOES, CHARGING = "red running shoes", "wireless charging"
# By hand, at size 2: the title clause finds d1, d2 (shoes) and d7, d9 (charging); the
# description clause d4, d5 and d8, d10. Neither clause alone holds the pool.
TITLE_TOP = {SHOES: {"d1", "d2"}, CHARGING: {"d7", "d9"}}
POOL = {SHOES: {"d1", "d2", "d4", "d5"}, CHARGING: {"d7", "d9", "d8", "d10"}}
HYBRID = ('{"query":{"hybrid":{"queries":[{"match":{"title":"%SearchText%"}},'
          '{"match":{"description":"%SearchText%"}}]}}}')


@pytest.fixture(scope="module")
def setup(api: Api, direct: OpenSearch) -> Iterator[dict[str, Any]]:
    index = f"test-expand-{uuid.uuid4().hex[:8]}"
    direct.indices.create(index=index, body={"settings": {"number_of_shards": 1}})
    for doc_id, (title, description) in PRODUCTS.items():
        direct.index(index=index, id=doc_id, body={"title": title, "description": description})
    direct.indices.refresh(index=index)
    query_set = api.srw("PUT", "/query_sets", {"name": "expand set", "querySetQueries": [
        {"queryText": SHOES}, {"queryText": CHARGING}]}).json["query_set_id"]
    yield {
        "index": index, "querySetId": query_set,
        "hybrid": search_configuration(api, "hybrid", index, HYBRID),
        "titles": search_configuration(api, "titles", index,
                                       '{"query":{"match":{"title":"%SearchText%"}}}'),
        "one_clause": search_configuration(
            api, "one clause", index,
            '{"query":{"hybrid":{"queries":[{"match":{"title":"%SearchText%"}}]}}}'),
    }
    direct.indices.delete(index=index)


def body(setup: dict[str, Any], model: str, **fields: Any) -> dict[str, Any]:
    out = {"name": f"expand-{uuid.uuid4().hex[:8]}", "type": "LLM_JUDGMENT", "modelId": model,
           "querySetId": setup["querySetId"], "searchConfigurationList": [setup["hybrid"]],
           "size": 2, "contextFields": ["title"]}
    out.update(fields)
    return out


def run(api: Api, payload: dict[str, Any]) -> dict[str, Any]:
    reply = api.srw("PUT", "/judgments", payload)
    assert reply.status == 200, reply.data
    done = finished(api, f"/judgments/{reply.json['judgment_id']}", 120)
    assert done["status"] == "COMPLETED", done["metadata"]
    return done


def ratings_of(judgment: dict[str, Any]) -> dict[str, dict[str, str]]:
    return {e["query"]: {r["docId"]: r["rating"] for r in e["ratings"]}
            for e in judgment["judgmentRatings"]}


def asked(llm: LLMServer, since: int = 0) -> list[str]:
    """The document ids the stand-in model was asked about, in the order asked."""
    return [hit["id"].split("::", 1)[1] for request in llm.requests[since:]
            for hit in json.loads(request.user.split("Hits: ", 1)[1])]


def clause_top(direct: OpenSearch, index: str, field: str, text: str) -> list[str]:
    hits = direct.search(index=index, body={"query": {"match": {field: text}}, "size": 2})
    return [hit["_id"] for hit in hits["hits"]["hits"]]


def test_the_pool_is_the_union_of_the_clauses(api: Api, worker: Worker, setup: dict[str, Any],
                                              llm: LLMServer, priced: str,
                                              direct: OpenSearch) -> None:
    done = run(api, body(setup, priced, expandCoverage=True))
    stored = ratings_of(done)
    for text in (SHOES, CHARGING):
        title = clause_top(direct, setup["index"], "title", text)
        description = clause_top(direct, setup["index"], "description", text)
        assert set(title) == TITLE_TOP[text] and set(title + description) == POOL[text]
        # configuration order, then clause order, then rank
        assert list(stored[text]) == title + description
    metadata = done["metadata"]
    assert metadata["expandCoverage"] is True and metadata["pooledDocuments"] == 8
    assert (metadata["totalQueries"], metadata["failedQueries"]) == (2, 0)
    assert metadata["usage"]["llmCalls"] == 2  # one chunk per query
    assert sorted(asked(llm)) == sorted(POOL[SHOES] | POOL[CHARGING])

    # Without the flag, today's behaviour: the configuration's own hybrid search, which this
    # cluster (no neural-search) cannot parse, so the judgment ends ERROR with the cluster's
    # reason, nothing rated.
    calls = llm.calls
    reply = api.srw("PUT", "/judgments", body(setup, priced))
    plain = finished(api, f"/judgments/{reply.json['judgment_id']}", 120)
    assert plain["status"] == "ERROR" and plain["judgmentRatings"] == []
    assert "unknown query [hybrid]" in plain["metadata"]["error"]
    assert "expandCoverage" not in plain["metadata"]
    assert "pooledDocuments" not in plain["metadata"]
    assert llm.calls == calls


def test_pairs_are_rated_once(api: Api, worker: Worker, setup: dict[str, Any], llm: LLMServer,
                              priced: str) -> None:
    titles = run(api, body(setup, priced, searchConfigurationList=[setup["titles"]]))
    first = ratings_of(titles)
    assert {q: set(d) for q, d in first.items()} == TITLE_TOP

    calls = llm.calls
    pooled = run(api, body(setup, priced, expandCoverage=True,
                           existingJudgments=[titles["id"]]))
    usage = pooled["metadata"]["usage"]
    assert usage["reusedRatings"] == 4 and usage["cachedRatings"] == 0
    assert usage["llmCalls"] == 2
    assert sorted(asked(llm, calls)) == ["d10", "d4", "d5", "d8"]  # the reused never asked
    ratings = ratings_of(pooled)
    assert {q: set(d) for q, d in ratings.items()} == POOL
    for text, docs in first.items():
        assert ratings[text].items() >= docs.items()  # the existing ratings kept
    assert pooled["metadata"]["pooledDocuments"] == 8

    # The same judgment again: every pooled pair is in the judgment cache.
    calls = llm.calls
    again = run(api, body(setup, priced, expandCoverage=True))
    usage = again["metadata"]["usage"]
    assert (usage["cachedRatings"], usage["reusedRatings"], usage["llmCalls"]) == (8, 0, 0)
    assert llm.calls == calls
    assert ratings_of(again) == ratings
    assert again["metadata"]["pooledDocuments"] == 8


def test_retry_of_a_pooled_judgment(api: Api, worker: Worker, setup: dict[str, Any],
                                    llm: LLMServer, priced: str, direct: OpenSearch) -> None:
    llm.partial(ids=["d5", "d10"], times=2)  # each query's one call leaves one pooled doc out
    done = run(api, body(setup, priced, expandCoverage=True))
    failures = {e["query"]: [f["docId"] for f in e["failures"]] for e in done["judgmentRatings"]}
    assert failures == {SHOES: ["d5"], CHARGING: ["d10"]}
    assert api.srw("POST", f"/judgments/{done['id']}/_retry").status == 200
    retried = finished(api, f"/judgments/{done['id']}", 60, running=("PROCESSING", "RETRYING"))
    assert retried["status"] == "COMPLETED"
    assert {q: set(d) for q, d in ratings_of(retried).items()} == POOL
    assert retried["metadata"]["failedQueries"] == 0
    assert (retried["metadata"]["expandCoverage"], retried["metadata"]["pooledDocuments"]) == (
        True, 8)

    # A judgment whose run left a query out (before failed queries were kept): the retry
    # searches it again, and pools it.
    kept = {SHOES: ratings_of(retried)[SHOES]}
    left = str(uuid.uuid4())
    metadata = {**retried["metadata"], "totalQueries": 2, "successfulQueries": 1,
                "failedQueries": 1, "pooledDocuments": 4}
    direct.index(index=JUDGMENT_INDEX, id=left, refresh=True, body={
        "id": left, "timestamp": "2026-11-26T00:00:00.000Z", "name": "left out",
        "status": "COMPLETED", "type": "LLM_JUDGMENT", "metadata": metadata,
        "judgmentRatings": [{"query": SHOES, "ratings": [
            {"docId": d, "rating": r} for d, r in kept[SHOES].items()]}]})
    assert api.srw("POST", f"/judgments/{left}/_retry").status == 200
    again = finished(api, f"/judgments/{left}", 60, running=("PROCESSING", "RETRYING"))
    assert again["status"] == "COMPLETED", again["metadata"]
    assert {q: set(d) for q, d in ratings_of(again).items()} == POOL
    assert again["metadata"]["pooledDocuments"] == 8
    assert (again["metadata"]["successfulQueries"], again["metadata"]["failedQueries"]) == (2, 0)


def test_estimate_counts_the_pool(api: Api, worker: Worker, setup: dict[str, Any],
                                  llm: LLMServer, priced: str) -> None:
    payload = body(setup, priced, expandCoverage=True)
    reply = api.srw("POST", "/judgments/_estimate", payload)
    assert reply.status == 200, reply.data
    before = reply.json
    assert (before["queries"], before["failedSearches"], before["pairs"]) == (2, 0, 8)
    assert (before["cachedPairs"], before["reusedPairs"], before["pairsToRate"]) == (0, 0, 8)
    assert before["calls"] == 2 and llm.calls == 0
    done = run(api, payload)
    assert done["metadata"]["pooledDocuments"] == before["pairs"]
    assert done["metadata"]["usage"]["llmCalls"] == before["calls"]
    after = api.srw("POST", "/judgments/_estimate", payload).json
    assert (after["pairs"], after["cachedPairs"], after["pairsToRate"], after["calls"]) == (
        8, 8, 0, 0)
    plain = api.srw("POST", "/judgments/_estimate", body(setup, priced))
    assert plain.status == 400 and "unknown query [hybrid]" in plain.reason  # no neural-search


def stored_names(direct: OpenSearch, name: str) -> int:
    direct.indices.refresh(index=JUDGMENT_INDEX)
    found = direct.search(index=JUDGMENT_INDEX, body={
        "query": {"term": {"name": name}}, "size": 0, "track_total_hits": True})
    return int(found["hits"]["total"]["value"])


def test_errors(api: Api, worker: Worker, setup: dict[str, Any], llm: LLMServer, priced: str,
                direct: OpenSearch) -> None:
    for value in ("yes", 1, [True], {}):
        payload = body(setup, priced, expandCoverage=value)
        for path in ("/judgments", "/judgments/_estimate"):
            api.srw("PUT" if path == "/judgments" else "POST", path, payload).error(
                400, "expandCoverage must be true or false")
    hybrid, titles, one = setup["hybrid"], setup["titles"], setup["one_clause"]
    refused = {
        titles: f"expandCoverage requires a hybrid search configuration: search configuration "
                f"[{titles}] has a [match] query, not [hybrid]",
        one: f"expandCoverage requires a hybrid search configuration: search configuration "
             f"[{one}] has a [hybrid] query with [1] sub-queries; pooling needs at least two",
    }
    for config, reason in refused.items():
        payload = body(setup, priced, expandCoverage=True,
                       searchConfigurationList=[hybrid, config])
        api.srw("PUT", "/judgments", payload).error(400, reason)
        api.srw("POST", "/judgments/_estimate", payload).error(400, reason)
        assert stored_names(direct, payload["name"]) == 0  # nothing stored
    assert llm.calls == 0
    # null is false; false changes nothing in the stored shape
    for value in (None, False):
        reply = api.srw("PUT", "/judgments", body(
            setup, priced, expandCoverage=value, searchConfigurationList=[titles]))
        assert reply.status == 200, reply.data
        doc = finished(api, f"/judgments/{reply.json['judgment_id']}", 120)
        assert "expandCoverage" not in doc["metadata"]
        assert "pooledDocuments" not in doc["metadata"]
    # Other types ignore it, as they ignore every LLM-only field.
    imported = api.srw("PUT", "/judgments", {"name": "imp", "type": "IMPORT_JUDGMENT",
                                             "expandCoverage": "yes", "judgmentRatings": []})
    assert imported.status == 200, imported.data
    doc = finished(api, f"/judgments/{imported.json['judgment_id']}", 60)
    assert "expandCoverage" not in json.dumps(doc)
