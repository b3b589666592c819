"""``DELETE`` of a judgment or an experiment while its job runs: the job is cancelled and ends
quietly (no ERROR line, no traceback, no "could not record the failure"), and nothing is
written for the deleted entity afterwards. And an answer the workbench expects from the
cluster (a 404) is not a WARNING in its log."""

from __future__ import annotations

import re
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from opensearchpy import OpenSearch

from tests.conftest import JUDGE_MODEL
from tests.support.api import Api
from tests.support.processes import Server, Worker
from tests.support.waiting import finished
from workbench.bench.llm_server import LLMServer
from workbench.store.indices import EXPERIMENT_INDEX, JUDGMENT_INDEX

QUERIES = 40
ERROR_LINE = re.compile(r" ERROR \[\d+\] ")
WARNING_LINE = re.compile(r" WARNING \[\d+\] ")


@pytest.fixture(scope="module")
def setup(api: Api, direct: OpenSearch, worker: Worker) -> Iterator[dict[str, Any]]:
    index = f"test-delete-{uuid.uuid4().hex[:6]}"
    direct.indices.create(index=index)
    for number in range(5):
        direct.index(index=index, id=f"d{number}", body={"title": f"red shoes model {number}"})
    direct.indices.refresh(index=index)
    query_set = api.srw("PUT", "/query_sets", {"name": "delete many", "querySetQueries": [
        {"queryText": f"red shoes {n}"} for n in range(QUERIES)]}).json["query_set_id"]
    config = api.srw("PUT", "/search_configurations", {
        "name": "titles", "index": index,
        "query": '{"query":{"match":{"title":"%SearchText%"}}}'}).json["search_configuration_id"]
    yield {"index": index, "querySetId": query_set, "config": config}
    direct.indices.delete(index=index)


def quiet_ending(log: str, entity_id: str, unrecorded: bool) -> None:
    """The job of the deleted ``entity_id`` ended without an ERROR line, a WARNING or a
    traceback; with ``unrecorded``, it said at INFO that there was nothing to record (the
    document was gone when it ended; an experiment's job may end before its cascade of
    deletes reaches the document)."""
    assert not ERROR_LINE.search(log), [line for line in log.splitlines()
                                        if ERROR_LINE.search(line)]
    assert "Traceback" not in log and "raised unexpected" not in log
    assert "could not record the failure" not in log
    lines = [line for line in log.splitlines() if entity_id in line]
    assert any(" INFO " in line and line.endswith(" ended ERROR: cancelled by the user")
               for line in lines), lines
    if unrecorded:
        assert any(" INFO " in line and line.endswith(
            f"{entity_id} was deleted while its job ran; its ending is not recorded")
            for line in lines), lines
    assert not [line for line in lines if WARNING_LINE.search(line)], lines


def still_gone(api: Api, direct: OpenSearch, path: str, index: str, entity_id: str) -> None:
    for attempt in range(2):  # right away, and once the job could have written anything
        if attempt:
            time.sleep(3)
        assert api.srw("GET", path).status == 404
        direct.indices.refresh(index=index)
        assert not direct.exists(index=index, id=entity_id)


def ended(worker: Worker, before: int, entity_id: str, timeout: float = 30) -> None:
    """Until the worker logged, since ``before``, that the task of ``entity_id``'s job is over
    (Celery's line for it, after everything the job itself logs: ``quiet_ending`` reads it)."""
    deadline = time.monotonic() + timeout
    while not any(f"{entity_id}] succeeded in " in line or
                  (entity_id in line and "raised unexpected" in line)
                  for line in worker.log()[before:].splitlines()):
        assert time.monotonic() < deadline, worker.log()[before:][-3000:]
        time.sleep(0.2)


def test_deleting_a_running_judgment_ends_its_job_quietly(
        api: Api, direct: OpenSearch, setup: dict[str, Any], llm: LLMServer,
        worker: Worker) -> None:
    llm.latency = 2.0
    before = len(worker.log())
    try:
        judgment_id = str(api.srw("PUT", "/judgments", {
            "name": f"deleted-{uuid.uuid4().hex[:8]}", "type": "LLM_JUDGMENT",
            "modelId": JUDGE_MODEL, "querySetId": setup["querySetId"],
            "searchConfigurationList": [setup["config"]], "size": 3,
            "overwriteCache": True}).json["judgment_id"])
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:  # running, with progress written
            doc = api.srw("GET", f"/judgments/{judgment_id}").json["hits"]["hits"][0]["_source"]
            if (doc["metadata"].get("progress") or {}).get("done", 0) > 0:
                break
            time.sleep(0.2)
        assert doc["status"] == "PROCESSING"
        assert api.srw("DELETE", f"/judgments/{judgment_id}").status == 200
        ended(worker, before, judgment_id)  # the calls in flight (2 s) answer, the job ends
    finally:
        llm.latency = 0.0
    still_gone(api, direct, f"/judgments/{judgment_id}", JUDGMENT_INDEX, judgment_id)
    quiet_ending(worker.log()[before:], judgment_id, unrecorded=True)


def test_deleting_a_running_experiment_ends_its_job_quietly(
        api: Api, direct: OpenSearch, setup: dict[str, Any], worker: Worker,
        server: Server) -> None:
    imported = api.srw("PUT", "/judgments", {
        "name": f"imp-{uuid.uuid4().hex[:6]}", "type": "IMPORT_JUDGMENT",
        "judgmentRatings": [{"query": f"red shoes {n}", "ratings": [
            {"docId": "d1", "rating": "1"}]} for n in range(QUERIES)]}).json["judgment_id"]
    finished(api, f"/judgments/{imported}", 30)
    hybrid = api.srw("PUT", "/search_configurations", {
        "name": "hybrid", "index": setup["index"],
        "query": '{"query":{"hybrid":{"queries":[{"match":{"title":"%SearchText%"}},'
                 '{"match":{"title":"%SearchText%"}}]}}}'}).json["search_configuration_id"]
    many = api.srw("PUT", "/query_sets", {"name": "hybrid many", "querySetQueries": [
        {"queryText": f"red shoes {n}"} for n in range(1000)]}).json["query_set_id"]
    before, api_before = len(worker.log()), len(server.log())
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
    assert api.srw("DELETE", f"/experiments/{experiment_id}").status == 200
    time.sleep(5)
    still_gone(api, direct, f"/experiments/{experiment_id}", EXPERIMENT_INDEX, experiment_id)
    for index in ("search-relevance-evaluation-result", "search-relevance-experiment-variant"):
        direct.indices.refresh(index=index)
        left = direct.count(index=index, body={"query": {"term": {"experimentId": experiment_id}}})
        assert left["count"] == 0, index
    quiet_ending(worker.log()[before:], experiment_id, unrecorded=False)
    # the delete looked for a schedule the experiment does not have: not a warning
    assert not WARNING_LINE.search(server.log()[api_before:]), server.log()[api_before:]


def test_a_404_from_the_cluster_is_not_a_warning_in_the_api_log(api: Api, server: Server,
                                                                 direct: OpenSearch) -> None:
    """Dashboards reads the schedule of every experiment it shows, most of which have none;
    opensearch-py logs a WARNING for each 404 (other failures still log: unit-tested in
    tests/unit/telemetry/test_expected_lines.py)."""
    before = len(server.log())
    missing = str(uuid.uuid4())
    assert api.srw("GET", f"/experiments/schedule/{missing}").status == 404
    assert api.srw("GET", f"/judgments/{missing}").status == 404
    assert api.srw("DELETE", f"/experiments/{missing}").status == 404
    time.sleep(0.5)
    new = server.log()[before:]
    assert not WARNING_LINE.search(new), new
