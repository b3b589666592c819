"""A third-party judge, found through its package's entry point (``workbench.judges``), works in
``_evaluate`` and in a REFERENCE_JUDGMENT job like a built-in one.

The package is ``tests/support/example_judge``: a module and its ``.dist-info`` folder, put on
the API's and the worker's ``PYTHONPATH`` as an installed distribution would be."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from opensearchpy import OpenSearch

from tests.support.api import Api
from tests.support.processes import Server, Worker
from tests.support.waiting import finished

PLUGIN_DIR = Path(__file__).resolve().parents[1] / "support" / "example_judge"
TITLES = {"a": "Red running shoes", "b": "Running shoes, red", "c": "red running shoes XL"}


@pytest.fixture(scope="module")
def plugin_env(env: dict[str, str]) -> dict[str, str]:
    path = os.pathsep.join(p for p in (str(PLUGIN_DIR), env.get("PYTHONPATH", "")) if p)
    return dict(env, PYTHONPATH=path, WORKBENCH_QUEUE=f"plugins-{uuid.uuid4().hex[:8]}")


@pytest.fixture(scope="module")
def plugin_api(plugin_env: dict[str, str]) -> Iterator[Api]:
    server = Server(plugin_env)
    yield Api(server.url)
    server.stop()


@pytest.fixture(scope="module")
def plugin_worker(plugin_env: dict[str, str]) -> Iterator[Worker]:
    worker = Worker(plugin_env)
    yield worker
    worker.stop()


def hits() -> list[dict[str, Any]]:
    return [{"id": doc_id, "title": title, "note": "red running shoes"}
            for doc_id, title in TITLES.items()]


def test_an_installed_judge_rates_in_evaluate(plugin_api: Api) -> None:
    reply = plugin_api.srw("POST", "/_evaluate", {
        "queryText": "red running shoes", "judge": "exact_phrase", "hits": hits(), "k": 3,
        "judgeOptions": {"field": "title"}, "modelId": "ignored by this judge"})
    assert reply.status == 200, reply.data
    answer = reply.json
    assert answer["judge"] == "exact_phrase"
    assert [(h["id"], h["rating"], h["relevant"]) for h in answer["hits"]] == [
        ("a", 1.0, True), ("b", 0.0, False), ("c", 1.0, True)]
    assert answer["hits"][0]["justification"] == "the query appears"
    # Relevant at ranks 1 and 3 of 3: AP = (1/1 + 2/3) / 2, Precision = 2/3.
    assert answer["metrics"]["MAP@3"] == pytest.approx((1 + 2 / 3) / 2)
    assert answer["metrics"]["Precision@3"] == pytest.approx(2 / 3)
    assert answer["usage"]["llmCalls"] == 0
    # Without the field option it reads every field: the note matches every hit.
    everywhere = plugin_api.srw("POST", "/_evaluate", {
        "queryText": "red running shoes", "judge": "exact_phrase", "hits": hits()}).json
    assert [h["relevant"] for h in everywhere["hits"]] == [True, True, True]


def test_an_installed_judges_options_and_failures_are_reported(plugin_api: Api,
                                                                api: Api) -> None:
    plugin_api.srw("POST", "/_evaluate", {
        "queryText": "x", "judge": "exact_phrase", "hits": hits(),
        "judgeOptions": {"colour": "red"}}).error(
        400, "the exact_phrase judge takes no option [colour]")
    listed = "llm, token_overlap, semantic, broken_judge, exact_phrase"
    plugin_api.srw("POST", "/_evaluate", {"queryText": "x", "judge": "nope", "hits": hits()}
                   ).error(400, f"Unknown judge [nope]; use one of: {listed}")
    broken = plugin_api.srw("POST", "/_evaluate", {"queryText": "x", "judge": "broken_judge",
                                                   "hits": hits()})
    assert broken.status == 500 and broken.json["error"]["type"] == "judge_exception"
    assert broken.reason == ("judge [broken_judge] (example_judges_missing:build) could not be "
                             "loaded: ModuleNotFoundError: No module named "
                             "'example_judges_missing'")
    # A server without the package does not know the judge.
    api.srw("POST", "/_evaluate", {"queryText": "x", "judge": "exact_phrase", "hits": hits()}
            ).error(400, "Unknown judge [exact_phrase]; use one of: llm, token_overlap, semantic")


def test_an_installed_judge_builds_a_judgment_list(plugin_api: Api, plugin_worker: Worker,
                                                   direct: OpenSearch) -> None:
    index = f"test-plugin-{uuid.uuid4().hex[:6]}"
    for doc_id, title in TITLES.items():
        direct.index(index=index, id=doc_id, body={"title": title}, refresh=True)
    try:
        config = plugin_api.srw("PUT", "/search_configurations", {
            "name": f"p-{index}", "index": index,
            "query": '{"query":{"match":{"title":"%SearchText%"}}}'}).json[
            "search_configuration_id"]
        query_set = plugin_api.srw("PUT", "/query_sets", {"name": f"p-{index}",
                                                          "querySetQueries": [
            {"queryText": "red running shoes"}]}).json["query_set_id"]
        reply = plugin_api.srw("PUT", "/judgments", {
            "name": "by phrase", "type": "REFERENCE_JUDGMENT", "judge": "exact_phrase",
            "judgeOptions": {"field": "title"}, "querySetId": query_set,
            "searchConfigurationList": [config], "size": 5})
        assert reply.status == 200, reply.data
        doc = finished(plugin_api, f"/judgments/{reply.json['judgment_id']}", 60,
                       running=("PROCESSING",))
        assert doc["status"] == "COMPLETED", doc["metadata"]
        assert doc["metadata"]["judge"] == "exact_phrase"
        assert doc["metadata"]["judgeOptions"] == {"field": "title"}
        (entry,) = doc["judgmentRatings"]
        ratings = {r["docId"]: r["rating"] for r in entry["ratings"]}
        assert ratings == {"a": "1.0", "b": "0.0", "c": "1.0"}
    finally:
        direct.indices.delete(index=index)
