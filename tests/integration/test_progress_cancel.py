"""Progress of running jobs and ``POST .../{id}/_cancel`` (and DELETE) of judgments and
experiments, with a real worker and the stand-in LLM slowed down."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from opensearchpy import OpenSearch

from tests.conftest import JUDGE_MODEL
from tests.support.api import Api
from tests.support.processes import Worker
from tests.support.waiting import finished
from workbench.bench.llm_server import LLMServer

QUERIES = 40  # one LLM call each; with the suite's 4 concurrent calls of 2 s: about 20 s


@pytest.fixture(scope="module")
def setup(api: Api, direct: OpenSearch, worker: Worker) -> Iterator[dict[str, Any]]:
    index = f"test-cancel-{uuid.uuid4().hex[:6]}"
    direct.indices.create(index=index)
    for number in range(5):
        direct.index(index=index, id=f"d{number}", body={"title": f"red shoes model {number}"})
    direct.indices.refresh(index=index)
    query_set = api.srw("PUT", "/query_sets", {"name": "many", "querySetQueries": [
        {"queryText": f"red shoes {n}"} for n in range(QUERIES)]}).json["query_set_id"]
    config = api.srw("PUT", "/search_configurations", {
        "name": "titles", "index": index,
        "query": '{"query":{"match":{"title":"%SearchText%"}}}'}).json["search_configuration_id"]
    yield {"index": index, "querySetId": query_set, "config": config}
    direct.indices.delete(index=index)


def start(api: Api, setup: dict[str, Any]) -> str:
    reply = api.srw("PUT", "/judgments", {
        "name": f"slow-{uuid.uuid4().hex[:8]}", "type": "LLM_JUDGMENT", "modelId": JUDGE_MODEL,
        "querySetId": setup["querySetId"], "searchConfigurationList": [setup["config"]],
        "size": 3, "overwriteCache": True})
    assert reply.status == 200, reply.data
    return str(reply.json["judgment_id"])


def judgment(api: Api, judgment_id: str) -> dict[str, Any]:
    return api.srw("GET", f"/judgments/{judgment_id}").json["hits"]["hits"][0]["_source"]  # type: ignore[no-any-return]


def wait_progress(api: Api, judgment_id: str, done: int, timeout: float = 60) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        doc = judgment(api, judgment_id)
        progress = (doc.get("metadata") or {}).get("progress") or {}
        if doc["status"] == "PROCESSING" and progress.get("done", 0) >= done:
            return progress  # type: ignore[no-any-return]
        assert doc["status"] == "PROCESSING", doc["metadata"]
        time.sleep(0.2)
    raise AssertionError("no progress")


def wait_final(api: Api, judgment_id: str, timeout: float = 30) -> dict[str, Any]:
    return finished(api, f"/judgments/{judgment_id}", timeout, interval=0.1, retry_errors=True)


def calls_settle(llm: LLMServer, seconds: float = 5) -> int:
    """LLM calls once the ones in flight have answered (nothing new for ``seconds``)."""
    time.sleep(seconds)
    return llm.calls


def test_progress_then_cancel_stops_llm_calls(api: Api, setup: dict[str, Any],
                                               llm: LLMServer, worker: Worker) -> None:
    llm.latency = 2.0
    log_before = len(worker.log())
    try:
        judgment_id = start(api, setup)
        first = wait_progress(api, judgment_id, 1)
        assert first["unit"] == "queries" and first["total"] == QUERIES
        assert first["phase"] == "rating"
        later = wait_progress(api, judgment_id, first["done"] + 4)
        assert later["done"] > first["done"]
        assert later["usage"]["llmCalls"] >= later["done"]
        assert later["usage"]["inputTokens"] > 0 and later["usage"]["outputTokens"] > 0
        assert later["done"] < QUERIES
        reply = api.srw("POST", f"/judgments/{judgment_id}/_cancel")
        assert reply.status == 200, reply.data
        assert reply.json == {"judgment_id": judgment_id, "status": "CANCELLING",
                              "message": reply.json["message"]}
        cancelled_at, calls_at_cancel = time.monotonic(), llm.calls
        doc = wait_final(api, judgment_id)
        seconds = time.monotonic() - cancelled_at
        settled = calls_settle(llm)
    finally:
        llm.latency = 0.0
    print(f"cancel -> ERROR in {seconds:.1f} s; LLM calls after cancel: "
          f"{settled - calls_at_cancel}")
    assert seconds < 8
    assert doc["status"] == "ERROR"
    assert doc["metadata"]["error"] == "cancelled by the user"
    assert doc["metadata"]["progress"]["done"] < QUERIES
    assert doc["judgmentRatings"] == []
    assert settled - calls_at_cancel <= 4  # at most the calls already in flight (concurrency 4)
    assert settled < QUERIES
    # what the cancelled run paid for is kept: every call the model answered, and its tokens
    usage = doc["metadata"]["usage"]
    assert usage["llmCalls"] == settled and usage["inputTokens"] > 0
    assert usage["totalTokens"] == usage["inputTokens"] + usage["outputTokens"]
    api.srw("POST", f"/judgments/{judgment_id}/_cancel").error(
        409, f"Judgment [{judgment_id}] is ERROR; only a PROCESSING or RETRYING judgment can "
             "be cancelled")
    # a user's cancel is one INFO line in the worker's log: no ERROR, no traceback
    logged = [line for line in worker.log()[log_before:].splitlines() if judgment_id in line]
    assert any(" INFO " in line and line.endswith(
        f"job workbench.judgments.generate for {judgment_id} ended ERROR: cancelled by the "
        "user") for line in logged), logged
    assert not [line for line in logged if " ERROR " in line or "raised unexpected" in line]
    assert "raised unexpected: Cancelled" not in worker.log()[log_before:]


def test_delete_of_a_running_judgment_stops_its_calls(api: Api, setup: dict[str, Any],
                                                      llm: LLMServer) -> None:
    llm.latency = 2.0
    try:
        judgment_id = start(api, setup)
        wait_progress(api, judgment_id, 1)
        assert api.srw("DELETE", f"/judgments/{judgment_id}").status == 200
        calls_at_delete = llm.calls
        settled = calls_settle(llm, 8)
        assert calls_settle(llm, 3) == settled  # nothing more: the job stopped
    finally:
        llm.latency = 0.0
    assert settled - calls_at_delete <= 4
    assert settled < QUERIES
    assert api.srw("GET", f"/judgments/{judgment_id}").status == 404


def test_a_finished_judgment_has_no_progress_and_cannot_be_cancelled(
        api: Api, setup: dict[str, Any], llm: LLMServer) -> None:
    judgment_id = start(api, setup)
    doc = wait_final(api, judgment_id, 120)
    assert doc["status"] == "COMPLETED", doc["metadata"]
    assert "progress" not in doc["metadata"]
    assert doc["metadata"]["usage"]["llmCalls"] == QUERIES
    api.srw("POST", f"/judgments/{judgment_id}/_cancel").error(
        409, f"Judgment [{judgment_id}] is COMPLETED; only a PROCESSING or RETRYING judgment "
             "can be cancelled")
    unknown = str(uuid.uuid4())
    api.srw("POST", f"/judgments/{unknown}/_cancel").error(404, f"Judgment not found: {unknown}")
    api.srw("POST", f"/experiments/{unknown}/_cancel").error(
        404, f"Experiment not found: {unknown}")


def test_cancel_a_running_experiment(api: Api, setup: dict[str, Any], direct: OpenSearch,
                                     llm: LLMServer) -> None:
    imported = api.srw("PUT", "/judgments", {
        "name": f"imp-{uuid.uuid4().hex[:6]}", "type": "IMPORT_JUDGMENT",
        "judgmentRatings": [{"query": f"red shoes {n}", "ratings": [
            {"docId": "d1", "rating": "1"}]} for n in range(QUERIES)]}).json["judgment_id"]
    wait_final(api, imported)
    hybrid = api.srw("PUT", "/search_configurations", {
        "name": "hybrid", "index": setup["index"],
        "query": '{"query":{"hybrid":{"queries":[{"match":{"title":"%SearchText%"}},'
                 '{"match":{"title":"%SearchText%"}}]}}}'}).json["search_configuration_id"]
    many = api.srw("PUT", "/query_sets", {"name": "hybrid many", "querySetQueries": [
        {"queryText": f"red shoes {n}"} for n in range(1000)]}).json["query_set_id"]
    experiment_id = api.srw("PUT", "/experiments", {
        "type": "HYBRID_OPTIMIZER", "querySetId": many, "searchConfigurationList": [hybrid],
        "judgmentList": [imported], "size": 3}).json["experiment_id"]
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        doc = api.srw("GET", f"/experiments/{experiment_id}").json["hits"]["hits"][0]["_source"]
        assert doc["status"] == "PROCESSING"
        if (doc.get("progress") or {}).get("done", 0) > 0:
            break
        time.sleep(0.2)
    progress = doc["progress"]
    assert progress["unit"] == "pairs" and progress["total"] == 1000
    reply = api.srw("POST", f"/experiments/{experiment_id}/_cancel")
    assert reply.status == 200, reply.data
    assert reply.json["experiment_id"] == experiment_id
    cancelled_at = time.monotonic()
    while time.monotonic() < cancelled_at + 30:
        doc = api.srw("GET", f"/experiments/{experiment_id}").json["hits"]["hits"][0]["_source"]
        if doc["status"] != "PROCESSING":
            break
        time.sleep(0.1)
    seconds = time.monotonic() - cancelled_at
    print(f"experiment cancel -> ERROR in {seconds:.1f} s")
    assert doc["status"] == "ERROR"
    assert doc["results"] == [{"error": "cancelled by the user"}]
    assert doc["progress"]["done"] < 1000
    for index in ("search-relevance-evaluation-result", "search-relevance-experiment-variant"):
        direct.indices.refresh(index=index)
        left = direct.count(index=index, body={"query": {"term": {"experimentId": experiment_id}}})
        assert left["count"] == 0, index
    api.srw("POST", f"/experiments/{experiment_id}/_cancel").error(
        409, f"Experiment [{experiment_id}] is ERROR; only a PROCESSING experiment can be "
             "cancelled")
