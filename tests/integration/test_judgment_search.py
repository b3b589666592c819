"""Judgment lists are searchable by query (``judgmentRatings.query``), and the bootstrap migrates
a judgment index created by an earlier version, whose mapping had that field unindexed."""

from __future__ import annotations

import copy
import threading
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from opensearchpy import OpenSearch

from tests.support.api import Api
from tests.support.processes import Worker
from tests.support.waiting import finished
from workbench.config import REPO_ROOT
from workbench.store.bootstrap import ensure_index, load_specs
from workbench.store.migrate import target_name

JUDGMENTS = "search-relevance-judgment"
SPEC = next(s for s in load_specs(REPO_ROOT / "index_mappings") if s.name == JUDGMENTS)


def by_query(query: str) -> dict[str, Any]:
    """The documented search: a nested ``match_phrase`` on ``judgmentRatings.query``."""
    return {"query": {"nested": {"path": "judgmentRatings", "query": {
        "match_phrase": {"judgmentRatings.query": query}}}}}


def old_body() -> dict[str, Any]:
    """The judgment index as earlier versions created it: ``query`` not indexed."""
    body = copy.deepcopy(SPEC.body)
    body["mappings"]["properties"]["judgmentRatings"]["properties"]["query"] = {
        "type": "text", "index": False}
    return body


def judgment_doc(number: int) -> dict[str, Any]:
    return {"id": f"j{number}", "name": f"list {number}", "status": "COMPLETED",
            "type": "IMPORT_JUDGMENT", "timestamp": "2025-01-01T00:00:00.000Z", "metadata": {},
            "judgmentRatings": [
                {"query": f"red shoes {number}", "ratings": [{"docId": "a", "rating": "1"}]},
                {"query": "blue jeans" if number % 2 else "green hat",
                 "ratings": [{"docId": "b", "rating": "2.5"}]}]}


@pytest.fixture
def old_index(direct: OpenSearch) -> Iterator[str]:
    """An index with the old mapping and 30 judgment lists; removed (with its copy) after."""
    name = f"test-old-judgments-{uuid.uuid4().hex[:6]}"
    direct.indices.create(index=name, body=old_body())
    for number in range(30):
        direct.index(index=name, id=f"j{number}", body=judgment_doc(number))
    direct.indices.refresh(index=name)
    yield name
    direct.indices.delete(index=f"{name}*", ignore=[404])


def assert_migrated(direct: OpenSearch, name: str) -> None:
    """Every document kept, under the same name (now an alias), and searchable by query."""
    target = target_name(name, SPEC.body)
    assert list(direct.indices.get_alias(name=name)) == [target]
    assert direct.count(index=name)["count"] == 30
    for number in range(30):
        assert direct.get(index=name, id=f"j{number}")["_source"] == judgment_doc(number)
    found = direct.search(index=name, body={**by_query("blue jeans"), "size": 100})
    assert sorted(h["_id"] for h in found["hits"]["hits"]) == sorted(
        f"j{n}" for n in range(30) if n % 2)
    exact = direct.search(index=name, body={"query": {"nested": {
        "path": "judgmentRatings", "query": {"term": {"judgmentRatings.query.keyword":
                                                      "red shoes 7"}}}}})
    assert [h["_id"] for h in exact["hits"]["hits"]] == ["j7"]
    direct.index(index=name, id="new", body=judgment_doc(99), refresh=True)  # writable again
    assert direct.count(index=name)["count"] == 31


def test_the_documented_search_by_query_finds_judgment_lists(
        api: Api, worker: Worker) -> None:
    marker = uuid.uuid4().hex[:8]
    reply = api.srw("PUT", "/judgments", {
        "name": "searchable", "type": "IMPORT_JUDGMENT", "judgmentRatings": [
            {"query": f"red dress {marker}", "ratings": [{"docId": "B1", "rating": "3"}]}]})
    judgment_id = reply.json["judgment_id"]
    # the ratings are written by the job
    finished(api, f"/judgments/{judgment_id}", 60, running=("PROCESSING",))
    found = api.srw("POST", "/judgments/_search", by_query(f"red dress {marker}"))
    assert found.status == 200, found.data
    hits = found.json["hits"]["hits"]
    assert [h["_id"] for h in hits] == [judgment_id]
    assert hits[0]["_index"] == JUDGMENTS
    assert api.srw("POST", "/judgments/_search",
                   by_query(f"blue dress {marker}")).json["hits"]["hits"] == []


def test_bootstrap_migrates_an_index_with_the_old_mapping(direct: OpenSearch,
                                                          old_index: str) -> None:
    assert direct.search(index=old_index, body=by_query("blue jeans"),
                         ignore=[400]).get("status") == 400  # not searchable before
    assert ensure_index(direct, SPEC, old_index) is False
    assert_migrated(direct, old_index)
    assert ensure_index(direct, SPEC, old_index) is False  # an alias now: nothing left to do
    assert list(direct.indices.get_alias(name=old_index)) == [target_name(old_index, SPEC.body)]


def test_an_interrupted_migration_is_finished_by_the_next_start(direct: OpenSearch,
                                                                old_index: str) -> None:
    # As left by a process stopped halfway: writes blocked, the copy made with 3 documents.
    direct.indices.put_settings(index=old_index, body={"index.blocks.write": True})
    target = target_name(old_index, SPEC.body)
    direct.indices.create(index=target, body=SPEC.body)
    for number in range(3):
        direct.index(index=target, id=f"j{number}", body=judgment_doc(number))
    assert ensure_index(direct, SPEC, old_index) is False
    assert_migrated(direct, old_index)


def test_processes_starting_at_once_migrate_once(direct: OpenSearch, old_index: str) -> None:
    errors: list[BaseException] = []

    def start() -> None:
        try:
            ensure_index(direct, SPEC, old_index)
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=start) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    assert errors == []
    assert_migrated(direct, old_index)
