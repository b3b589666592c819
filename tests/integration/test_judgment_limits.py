"""Big judgment lists (up to ``MAX_RATINGS``) stored and used by experiments, lists and ratings
the judgment index cannot hold refused up front, and shard failures that fail the job."""

from __future__ import annotations

import logging
import math
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from opensearchpy import OpenSearch

from tests.integration.test_experiments import by_experiment, wait
from tests.integration.test_judgments import create
from tests.support.api import Api
from tests.support.processes import Worker
from workbench.judgments.limits import MAX_RATINGS
from workbench.store.bootstrap import ensure_index, load_specs

JUDGMENTS = "search-relevance-judgment"
MAPPINGS = Path(__file__).resolve().parents[2] / "index_mappings"
EVALUATIONS = "search-relevance-evaluation-result"
QUERIES, DOCS = 2_000, 100


def rating(query: int, doc: int) -> int:
    return (query * 7 + doc) % 4


def ratings_list(queries: int, docs: int, name: str = "q") -> list[dict[str, Any]]:
    return [{"query": f"{name}{q}", "ratings": [{"docId": f"d{d}", "rating": str(rating(q, d))}
                                                for d in range(docs)]}
            for q in range(queries)]


@pytest.fixture
def small_index(direct: OpenSearch) -> Iterator[str]:
    """Five documents matching every query, in the rank order d3, d0, d1, d4, d2."""
    index = f"test-big-{uuid.uuid4().hex[:6]}"
    for doc, rank in (("d0", 2), ("d1", 3), ("d2", 5), ("d3", 1), ("d4", 4)):
        direct.index(index=index, id=doc, body={"title": "q7 q1234 q1999", "rank": rank})
    direct.indices.refresh(index=index)
    yield index
    direct.indices.delete(index=index, ignore=[404])


def test_200k_ratings_import_and_feed_a_pointwise_experiment(
        api: Api, worker: Worker, direct: OpenSearch, small_index: str) -> None:
    started = time.monotonic()
    judgment_id = create(api, {"type": "IMPORT_JUDGMENT",
                               "judgmentRatings": ratings_list(QUERIES, DOCS)})
    done = wait(api, f"/judgments/{judgment_id}", timeout=300)
    imported = time.monotonic() - started
    assert done["status"] == "COMPLETED", done["metadata"]
    assert sum(len(e["ratings"]) for e in done["judgmentRatings"]) == QUERIES * DOCS

    config = api.srw("PUT", "/search_configurations", {
        "name": "by rank", "index": small_index,
        "query": '{"query":{"match":{"title":"%SearchText%"}},"sort":[{"rank":"asc"}]}'})
    assert config.status == 200, config.data
    queries = [7, 1234, 1999]
    query_set = api.srw("PUT", "/query_sets", {"name": "big", "querySetQueries": [
        {"queryText": f"q{q}"} for q in queries]})
    assert query_set.status == 200, query_set.data
    started = time.monotonic()
    experiment = api.srw("PUT", "/experiments", {
        "type": "POINTWISE_EVALUATION", "querySetId": query_set.json["query_set_id"],
        "searchConfigurationList": [config.json["search_configuration_id"]],
        "judgmentList": [judgment_id], "size": 3})
    assert experiment.status == 200, experiment.data
    experiment_id = experiment.json["experiment_id"]
    finished = wait(api, f"/experiments/{experiment_id}")
    ran = time.monotonic() - started
    assert finished["status"] == "COMPLETED", finished["results"]
    results = {r["searchText"]: r for r in by_experiment(direct, EVALUATIONS, experiment_id)}
    assert set(results) == {f"q{q}" for q in queries}
    for q in queries:
        result = results[f"q{q}"]
        assert result["documentIds"] == ["d3", "d0", "d1"]
        grades = [rating(q, d) for d in (3, 0, 1)]
        dcg = sum((2 ** g - 1) / math.log2(i + 2) for i, g in enumerate(grades))
        metrics = {m["metric"]: m["value"] for m in result["metrics"]}
        assert metrics["DCG@3"] == round(dcg, 2)
        # Relevant: at least max(0.5 * max, P90) of the query's ratings, which is 3 here (each
        # query has 25 ratings of each grade 0-3).
        assert metrics["Precision@3"] == round(sum(g >= 3 for g in grades) / 3, 2)
    print(f"\nimport of {QUERIES * DOCS:,} ratings COMPLETED in {imported:.1f}s; "
          f"POINTWISE experiment over it in {ran:.1f}s")
    assert api.srw("DELETE", f"/experiments/{experiment_id}").status == 200
    assert api.srw("DELETE", f"/judgments/{judgment_id}").status == 200


def test_a_list_over_the_limit_is_refused_and_nothing_stored(
        api: Api, direct: OpenSearch) -> None:
    name = f"too-big-{uuid.uuid4().hex[:8]}"
    entries = ratings_list(MAX_RATINGS // DOCS + 1, DOCS)
    reply = api.srw("PUT", "/judgments", {"name": name, "type": "IMPORT_JUDGMENT",
                                          "judgmentRatings": entries})
    assert reply.status == 400, reply.data
    assert f"at most {MAX_RATINGS} are allowed" in reply.json["error"]["reason"]
    direct.indices.refresh(index=JUDGMENTS)
    found = direct.search(index=JUDGMENTS, body={"query": {"term": {"name": name}}})
    assert found["hits"]["total"]["value"] == 0


@pytest.mark.parametrize("value", [1e308, "1e308", -3.5e38, "3.5e38f"])
def test_a_rating_beyond_float_range_is_refused(api: Api, value: Any) -> None:
    reply = api.srw("PUT", "/judgments", {"name": "huge", "type": "IMPORT_JUDGMENT",
                                          "judgmentRatings": [
                                              {"query": "red shoes", "ratings": [
                                                  {"docId": "B1", "rating": "1"},
                                                  {"docId": "B2", "rating": value}]}]})
    assert reply.status == 400, reply.data
    reason = reply.json["error"]["reason"]
    assert "red shoes" in reason and "B2" in reason and "float range" in reason


def test_the_largest_float_is_accepted(api: Api, worker: Worker) -> None:
    judgment_id = create(api, {"type": "IMPORT_JUDGMENT", "judgmentRatings": [
        {"query": "red shoes", "ratings": [{"docId": "B1", "rating": "3.4028235e38"}]}]})
    assert wait(api, f"/judgments/{judgment_id}")["status"] == "COMPLETED"


def test_a_ubi_shard_failure_ends_the_judgment_error(
        api: Api, worker: Worker, ubi_data: None, direct: OpenSearch, index_name: str) -> None:
    # ``user_query`` as text: the composite aggregation over it fails on this index's shard,
    # while ``ubi_events`` answers.
    direct.indices.create(index=index_name, body={"mappings": {"properties": {
        "query_id": {"type": "keyword"}, "action_name": {"type": "keyword"},
        "user_query": {"type": "text"}, "timestamp": {"type": "date"},
        "event_attributes": {"properties": {
            "object": {"properties": {"object_id": {"type": "keyword"}}},
            "position": {"properties": {"ordinal": {"type": "integer"}}}}}}}})
    direct.index(index=index_name, refresh=True, body={
        "query_id": "1", "action_name": "click", "user_query": "shoes",
        "event_attributes": {"object": {"object_id": "B1"}, "position": {"ordinal": 1}}})
    for model in ("coec", "pbm"):
        judgment_id = create(api, {"type": "UBI_JUDGMENT", "clickModel": model, "maxRank": 20,
                                   "ubiEventsIndex": f"ubi_events,{index_name}"})
        done = wait(api, f"/judgments/{judgment_id}", timeout=300)
        assert done["status"] == "ERROR", done["metadata"]
        error = done["metadata"]["error"]
        assert f"index(es) [{index_name}]" in error and "ubi_events," in error, error
        assert "text" in error.lower(), error
        assert done["judgmentRatings"] == []


def test_bootstrap_raises_the_nested_limit_of_an_older_index(
        direct: OpenSearch, index_name: str, caplog: pytest.LogCaptureFixture) -> None:
    spec = next(s for s in load_specs(MAPPINGS) if s.name == JUDGMENTS)
    direct.indices.create(index=index_name, body={"mappings": spec.body["mappings"]})

    def limit() -> int:
        found = direct.indices.get_settings(index=index_name, include_defaults=True,
                                            flat_settings=True)[index_name]
        key = "index.mapping.nested_objects.limit"
        return int({**found["defaults"], **found["settings"]}[key])

    assert limit() == 10_000
    with caplog.at_level(logging.INFO, logger="workbench.store.bootstrap"):
        assert ensure_index(direct, spec, index_name) is False
        assert limit() == 2 * MAX_RATINGS
        assert ensure_index(direct, spec, index_name) is False  # nothing left to raise
    raised = [r for r in caplog.records if "raised settings" in r.getMessage()]
    assert len(raised) == 1 and index_name in raised[0].getMessage()
