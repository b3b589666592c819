"""Creates are no stricter than the plugin: what can only be known later is checked by the job.

A configuration without the query text, a search pipeline that does not exist yet, an experiment
whose judgment list is still being generated: each is accepted, and each later outcome (runs,
ends ERROR with a reason, waits and then runs) is checked here with a real worker.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from opensearchpy import OpenSearch

from tests.support.api import Api, search_configuration
from tests.support.processes import Server, Worker, stop_together
from tests.support.small_job import SmallJob, small_job
from tests.support.waiting import finished
from workbench.bench.llm_server import LLMServer

CONFIGS = "search-relevance-search-config"
EVALUATIONS = "search-relevance-evaluation-result"


@pytest.fixture(scope="module")
def job(api: Api, direct: OpenSearch, worker: Worker) -> Iterator[SmallJob]:
    """Five products ``p0``..``p4`` (titles from ``small_job``), three queries, one
    title-match configuration."""
    world = small_job(direct, api, f"test-lenient-{uuid.uuid4().hex[:6]}")
    yield world
    direct.indices.delete(index=world.index)


@pytest.fixture(scope="module")
def imported(api: Api, job: SmallJob) -> str:
    judgment_id = api.srw("PUT", "/judgments", {
        "name": "imported", "type": "IMPORT_JUDGMENT", "judgmentRatings": [
            {"query": "red shoes", "ratings": [{"docId": "p0", "rating": "3"},
                                               {"docId": "p2", "rating": "1"}]},
            {"query": "usb cable", "ratings": [{"docId": "p3", "rating": "2"}]}]}).json[
        "judgment_id"]
    assert wait(api, f"/judgments/{judgment_id}")["status"] == "COMPLETED"
    return str(judgment_id)


def source(api: Api, path: str) -> dict[str, Any]:
    return api.srw("GET", path).json["hits"]["hits"][0]["_source"]  # type: ignore[no-any-return]


def wait(api: Api, path: str, timeout: float = 120) -> dict[str, Any]:
    return finished(api, path, timeout)


def config(api: Api, index: str, query: str, **extra: Any) -> str:
    return search_configuration(api, f"sc-{uuid.uuid4().hex[:6]}", index, query, **extra)


def experiment(api: Api, job: SmallJob, config: str, judgment: str) -> str:
    """A pointwise experiment over the job's query set, one configuration and one judgment."""
    reply = api.srw("PUT", "/experiments", {
        "type": "POINTWISE_EVALUATION", "size": 5, "querySetId": job.query_set_id,
        "searchConfigurationList": [config], "judgmentList": [judgment]})
    assert reply.status == 200, reply.data
    return str(reply.json["experiment_id"])


def evaluations(direct: OpenSearch, experiment_id: str) -> dict[tuple[str, str], Any]:
    """(query, configuration) -> (document ids, metrics) of an experiment's evaluations."""
    direct.indices.refresh(index=EVALUATIONS)
    hits = direct.search(index=EVALUATIONS, body={
        "query": {"term": {"experimentId": experiment_id}}, "size": 1000})["hits"]["hits"]
    return {(h["_source"]["searchText"], h["_source"]["searchConfigurationId"]):
            (h["_source"]["documentIds"], h["_source"]["metrics"]) for h in hits}


def test_a_query_without_the_query_text_is_stored_as_given_and_runs(
        api: Api, direct: OpenSearch, job: SmallJob, imported: str) -> None:
    query = '{"query":{"match_all":{}},"sort":[{"_id":"asc"}]}'
    baseline = config(api, job.index, query)
    assert direct.get(index=CONFIGS, id=baseline)["_source"]["query"] == query
    experiment_id = experiment(api, job, baseline, imported)
    done = wait(api, f"/experiments/{experiment_id}")
    assert done["status"] == "COMPLETED", done["results"]
    found = evaluations(direct, experiment_id)
    assert {q for q, _ in found} == {"red shoes", "usb cable", "earbuds"}
    assert all(ids == ["p0", "p1", "p2", "p3", "p4"] for ids, _ in found.values())
    metrics = {m["metric"]: m["value"] for m in found[("red shoes", baseline)][1]}
    assert metrics["Precision@5"] == 0.2  # p0 (3) is relevant, p2 (1) is below the threshold


def test_a_pipeline_that_does_not_exist_yet_is_accepted_and_named_when_a_job_runs(
        api: Api, direct: OpenSearch, job: SmallJob, imported: str, llm: LLMServer) -> None:
    pipeline = f"later-{uuid.uuid4().hex[:6]}"
    piped = config(api, job.index, '{"query":{"match":{"title":"%SearchText%"}}}',
                   searchPipeline=pipeline)
    assert direct.get(index=CONFIGS, id=piped)["_source"]["searchPipeline"] == pipeline
    reason = (f"Search pipeline [{pipeline}] of search configuration [{piped}] does not exist "
              "in the cluster")

    experiment_id = experiment(api, job, piped, imported)
    failed = wait(api, f"/experiments/{experiment_id}")
    assert (failed["status"], failed["results"]) == ("ERROR", [{"error": reason}])
    assert evaluations(direct, experiment_id) == {}

    judgment = SmallJob(job.index, job.query_set_id, piped).start(api, "piped")
    failed = wait(api, f"/judgments/{judgment}")
    assert failed["status"] == "ERROR" and failed["metadata"]["error"] == reason
    assert llm.calls == 0

    direct.transport.perform_request("PUT", f"/_search/pipeline/{pipeline}", body={
        "request_processors": [{"filter_query": {"query": {"ids": {"values": ["p0"]}}}}]})
    try:
        experiment_id = experiment(api, job, piped, imported)
        done = wait(api, f"/experiments/{experiment_id}")
        assert done["status"] == "COMPLETED", done["results"]
        assert [ids for ids, _ in evaluations(direct, experiment_id).values()] == [["p0"]]
    finally:
        direct.transport.perform_request("DELETE", f"/_search/pipeline/{pipeline}")


def test_an_experiment_waits_for_a_judgment_still_being_generated(
        api: Api, direct: OpenSearch, job: SmallJob, llm: LLMServer) -> None:
    llm.latency = 1.5
    judgment = job.start(api, "slow")
    experiment_id = experiment(api, job, job.config_id, judgment)
    try:
        deadline = time.monotonic() + 30
        while True:
            waiting = source(api, f"/experiments/{experiment_id}")
            if (waiting.get("progress") or {}).get("phase") == "waiting for judgments":
                break
            assert time.monotonic() < deadline, waiting
            time.sleep(0.1)
        assert waiting["status"] == "PROCESSING"
        assert source(api, f"/judgments/{judgment}")["status"] == "PROCESSING"
    finally:
        llm.latency = 0.0
    assert wait(api, f"/judgments/{judgment}")["status"] == "COMPLETED"
    done = wait(api, f"/experiments/{experiment_id}")
    assert done["status"] == "COMPLETED", done["results"]
    assert "progress" not in done

    # The same experiment created now, with the judgment finished, computes the same results.
    again = experiment(api, job, job.config_id, judgment)
    assert wait(api, f"/experiments/{again}")["status"] == "COMPLETED"
    waited, direct_run = evaluations(direct, experiment_id), evaluations(direct, again)
    assert waited == direct_run and len(waited) == 3
    assert any(m["value"] > 0 for _, metrics in waited.values() for m in metrics
               if m["metric"] == "NDCG@5")


def test_a_judgment_that_ends_error_ends_the_waiting_experiment_error(
        api: Api, job: SmallJob, llm: LLMServer) -> None:
    llm.latency = 3.0
    try:
        judgment = job.start(api, "to cancel")
        experiment_id = experiment(api, job, job.config_id, judgment)
        assert api.srw("POST", f"/judgments/{judgment}/_cancel").status == 200
        assert wait(api, f"/judgments/{judgment}")["status"] == "ERROR"
    finally:
        llm.latency = 0.0
    failed = wait(api, f"/experiments/{experiment_id}")
    assert failed["status"] == "ERROR"
    assert failed["results"] == [{"error": f"Judgment [{judgment}] ended ERROR (cancelled by "
                                           "the user); the experiment did not run"}]
    # Known at creation: a judgment list that already ended ERROR is still refused.
    api.srw("PUT", "/experiments", {
        "type": "POINTWISE_EVALUATION", "size": 5, "querySetId": job.query_set_id,
        "searchConfigurationList": [job.config_id], "judgmentList": [judgment]}).error(
        400, f"Judgment [{judgment}] is not COMPLETED (status: ERROR)")


def test_a_waiting_experiment_can_be_cancelled(api: Api, job: SmallJob,
                                              llm: LLMServer) -> None:
    llm.latency = 3.0
    try:
        judgment = job.start(api, "slow for cancel")
        experiment_id = experiment(api, job, job.config_id, judgment)
        assert api.srw("POST", f"/experiments/{experiment_id}/_cancel").status == 200
        failed = wait(api, f"/experiments/{experiment_id}", timeout=30)
        assert (failed["status"], failed["results"]) == (
            "ERROR", [{"error": "cancelled by the user"}])
        api.srw("POST", f"/judgments/{judgment}/_cancel")
    finally:
        llm.latency = 0.0


@pytest.fixture
def impatient(env: dict[str, str]) -> Iterator[Api]:
    """An API and a worker of their own whose experiments wait 2 s for their judgments."""
    short = dict(env, WORKBENCH_QUEUE=f"impatient-{uuid.uuid4().hex[:6]}",
                 WORKBENCH_JUDGMENT_WAIT="2")
    server, worker = Server(short), Worker(short)
    try:
        yield Api(server.url)
    finally:
        stop_together([worker, server])


def test_the_wait_is_bounded(impatient: Api, job: SmallJob, llm: LLMServer) -> None:
    llm.latency = 8.0
    try:
        judgment = job.start(impatient, "too slow")
        started = time.monotonic()
        experiment_id = experiment(impatient, job, job.config_id, judgment)
        failed = wait(impatient, f"/experiments/{experiment_id}", timeout=60)
        assert time.monotonic() - started < 8.0  # ended before the judgment could finish
        assert failed["status"] == "ERROR"
        assert failed["results"] == [{"error": (
            f"Judgment [{judgment}] is still PROCESSING after waiting 2 s "
            "(WORKBENCH_JUDGMENT_WAIT); the experiment did not run")}]
        impatient.srw("POST", f"/judgments/{judgment}/_cancel")
        wait(impatient, f"/judgments/{judgment}", timeout=60)
    finally:
        llm.latency = 0.0
