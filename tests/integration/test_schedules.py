"""Scheduled experiments: the routes, cron validation, the scheduler firing runs, history."""

from __future__ import annotations

import signal
import sys
import time
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from opensearchpy import OpenSearch

from tests.support.api import Api
from tests.support.processes import Proc, Worker
from tests.support.scheduling import JOBS, scheduled
from tests.support.waiting import settled
from workbench.config import Config
from workbench.experiments.scheduling import PARSE_ERROR, Scheduler
from workbench.services import Services

HISTORY = ".search-relevance-scheduled-experiment-history"
EVALUATIONS = "search-relevance-evaluation-result"
WB = "plugins.search_relevance."


@pytest.fixture(scope="module")
def experiment(api: Api, direct: OpenSearch, worker: Worker) -> Iterator[str]:
    index = f"test-sched-{uuid.uuid4().hex[:6]}"
    direct.index(index=index, id="d1", body={"title": "red shoes"}, refresh=True)
    config = api.srw("PUT", "/search_configurations", {
        "name": "c", "index": index,
        "query": '{"query":{"match":{"title":"%SearchText%"}}}'}).json["search_configuration_id"]
    query_set = api.srw("PUT", "/query_sets", {"name": "q", "querySetQueries": [
        {"queryText": "red shoes"}]}).json["query_set_id"]
    judgment = api.srw("PUT", "/judgments", {"name": "j", "type": "IMPORT_JUDGMENT",
                                             "judgmentRatings": [{"query": "red shoes",
                                                                  "ratings": [{"docId": "d1",
                                                                               "rating": "1"}]}]}
                       ).json["judgment_id"]
    time.sleep(1)
    experiment_id = api.srw("PUT", "/experiments", {
        "type": "POINTWISE_EVALUATION", "querySetId": query_set,
        "searchConfigurationList": [config], "judgmentList": [judgment], "size": 5,
    }).json["experiment_id"]
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        doc = direct.get(index=".plugins-search-relevance-experiment", id=experiment_id)
        if doc["_source"]["status"] == "COMPLETED":
            break
        time.sleep(0.2)
    yield experiment_id
    direct.indices.delete(index=index)


def test_schedule_routes(api: Api, experiment: str, direct: OpenSearch) -> None:
    created = api.srw("POST", "/experiments/schedule",
                      {"experimentId": experiment, "cronExpression": " 0 1 * * * "})
    assert created.status == 200
    assert created.json == {"job_id": experiment, "job_result": "CREATED"}
    try:
        job = api.srw("GET", f"/experiments/schedule/{experiment}").json["hits"]["hits"][0]
        assert job["_id"] == experiment
        source = job["_source"]
        assert source["id"] == experiment and source["enabled"] is True
        assert source["schedule"] == {"cron": {"expression": "0 1 * * *", "timezone": "UTC"}}
        assert isinstance(source["enabledTime"], int) and isinstance(source["lastUpdateTime"], int)
        listed = api.srw("GET", "/experiments/schedule").json["hits"]["hits"]
        assert experiment in [h["_id"] for h in listed]
        exp = api.srw("GET", f"/experiments/{experiment}").json["hits"]["hits"][0]["_source"]
        assert (exp["isScheduled"], exp["scheduledExperimentJobId"]) == (True, experiment)
        again = api.srw("POST", "/experiments/schedule",
                        {"experimentId": experiment, "cronExpression": "0 2 * * *"})
        assert again.status == 409
    finally:
        deleted = api.srw("DELETE", f"/experiments/schedule/{experiment}")
    assert deleted.status == 200 and deleted.json["result"] == "deleted"
    exp = api.srw("GET", f"/experiments/{experiment}").json["hits"]["hits"][0]["_source"]
    assert (exp["isScheduled"], exp["scheduledExperimentJobId"]) == (False, None)
    api.srw("GET", f"/experiments/schedule/{experiment}").error(
        404, f"Document not found: {experiment}")


@pytest.mark.parametrize("body, status, reason", [
    ({"cronExpression": "0 * * * *"}, 400, "Invalid or missing experiment Id"),
    ({"experimentId": "", "cronExpression": "0 * * * *"}, 400, "Invalid or missing experiment Id"),
    ({"experimentId": "X"}, 400, "cron expression cannot be null or empty"),
    ({"experimentId": "X", "cronExpression": "  "}, 400, "cron expression cannot be null or empty"),
    ({"experimentId": "X", "cronExpression": "every hour"}, 400, PARSE_ERROR),
    ({"experimentId": "X", "cronExpression": "61 * * * *"}, 400, PARSE_ERROR),
    ({"experimentId": "X", "cronExpression": "* * * * * *"}, 400, PARSE_ERROR),
    ({"experimentId": "no-such-experiment", "cronExpression": "0 * * * *"}, 404,
     "Experiment not found: no-such-experiment"),
])
def test_schedule_bad_input(api: Api, experiment: str, body: dict[str, Any], status: int,
                            reason: str) -> None:
    body = {k: (experiment if v == "X" else v) for k, v in body.items()}
    api.srw("POST", "/experiments/schedule", body).error(status, reason)


def test_minimum_interval_and_the_gate(api: Api, experiment: str) -> None:
    try:
        api.call("PUT", "/_cluster/settings", {"persistent": {
            WB + "scheduled_experiments_minimum_interval": "2h"}})
        api.srw("POST", "/experiments/schedule", {"experimentId": experiment,
                                                  "cronExpression": "0 * * * *"}).error(
            400, "The interval between scheduled experiment runs is too short.")
        api.call("PUT", "/_cluster/settings", {"persistent": {
            WB + "scheduled_experiments_enabled": False}})
        for method, path in (("POST", "/experiments/schedule"), ("GET", "/experiments/schedule"),
                             ("GET", f"/experiments/schedule/{experiment}"),
                             ("DELETE", f"/experiments/schedule/{experiment}")):
            reply = api.srw(method, path, {"experimentId": experiment})
            assert reply.status == 403 and reply.text == "Scheduled experiments is disabled"
    finally:
        api.call("PUT", "/_cluster/settings", {"persistent": {WB + "*": None}})


def wait_history(direct: OpenSearch, history_id: str, timeout: float = 60) -> dict[str, Any]:
    return settled(direct, HISTORY, history_id, timeout, running=("PROCESSING",))


def test_due_jobs_fire_once_and_runs_tag_their_results(api: Api, experiment: str,
                                                       env: dict[str, str],
                                                       direct: OpenSearch) -> None:
    try:
        scheduler, enabled = scheduled(api, direct, env, experiment, "*/5 * * * *")
        next_fire = (enabled + timedelta(minutes=5)).replace(second=0, microsecond=0)
        next_fire -= timedelta(minutes=next_fire.minute % 5)
        if next_fire <= enabled:
            next_fire += timedelta(minutes=5)
        assert scheduler.tick(now=next_fire - timedelta(seconds=1)) == []  # not yet due
        started = scheduler.tick(now=next_fire + timedelta(seconds=2))
        assert len(started) == 1
        assert scheduler.tick(now=next_fire + timedelta(seconds=30)) == []  # fired once only
        other = Scheduler(Services(Config.from_env(env)))  # a second scheduler process
        assert other.tick(now=next_fire + timedelta(seconds=40)) == []

        history = wait_history(direct, started[0])
        assert history["status"] == "COMPLETED", history
        assert (history["experimentId"], history["jobId"], history["jobIndexName"]) == (
            experiment, experiment, JOBS)
        assert history["results"][0]["queryText"] == "red shoes"
        direct.indices.refresh(index=EVALUATIONS)
        tagged = direct.search(index=EVALUATIONS, body={
            "query": {"term": {"scheduledRunId": started[0]}}})["hits"]["hits"]
        assert len(tagged) == 1 and tagged[0]["_source"]["experimentId"] == experiment
        # Several fire times missed while no scheduler ran start one run, not a backlog.
        later = scheduler.tick(now=next_fire + timedelta(minutes=17))
        assert len(later) == 1
        wait_history(direct, later[0])
    finally:
        api.srw("DELETE", f"/experiments/schedule/{experiment}")


def test_the_scheduler_process_fires_a_cron_job(api: Api, experiment: str,
                                                env: dict[str, str], direct: OpenSearch) -> None:
    """The real ``workbench scheduler`` process, with an every-minute cron (waits <= 70 s)."""
    if direct.indices.exists(index=HISTORY):  # only runs of this test count
        direct.delete_by_query(index=HISTORY, refresh=True,
                               body={"query": {"term": {"experimentId": experiment}}})
    api.srw("POST", "/experiments/schedule", {"experimentId": experiment,
                                              "cronExpression": "* * * * *"})
    process = Proc([sys.executable, "-m", "workbench.cli", "scheduler"],
                   dict(env, WORKBENCH_SCHEDULER_INTERVAL="1"), "workbench-scheduler")
    try:
        deadline = time.monotonic() + 80
        runs: list[dict[str, Any]] = []
        while time.monotonic() < deadline and not runs:
            time.sleep(1)
            if direct.indices.exists(index=HISTORY):
                direct.indices.refresh(index=HISTORY)
                runs = [h["_source"] for h in direct.search(index=HISTORY, body={
                    "query": {"term": {"experimentId": experiment}},
                    "size": 100})["hits"]["hits"]
                    if h["_source"]["status"] == "COMPLETED"]
        assert runs, process.log()[-3000:]
        # A stop signal ends it between ticks, cleanly (as PID 1 of a container too, where a
        # process without a handler would ignore SIGTERM and be killed after the grace period).
        process.proc.send_signal(signal.SIGTERM)
        assert process.proc.wait(10) == 0, process.log()[-3000:]
        assert "scheduler stopped" in process.log()
    finally:
        process.stop()
        api.srw("DELETE", f"/experiments/schedule/{experiment}")


def test_timed_out_runs_are_marked(env: dict[str, str], direct: OpenSearch) -> None:
    stale = str(uuid.uuid4())
    direct.index(index=HISTORY, id=stale, refresh=True, body={
        "id": stale, "experimentId": "x", "jobId": "x", "jobIndexName": JOBS,
        "timestamp": "2020-01-01T00:00:00.000Z", "status": "PROCESSING"})
    Scheduler(Services(Config.from_env(env))).tick()
    assert direct.get(index=HISTORY, id=stale)["_source"]["status"] == "TIMEOUT"


def test_deleting_the_experiment_removes_its_schedule(api: Api, experiment: str,
                                                      direct: OpenSearch) -> None:
    query_set = api.srw("GET", f"/experiments/{experiment}").json["hits"]["hits"][0]["_source"]
    copy = api.srw("PUT", "/experiments", {
        "type": "POINTWISE_EVALUATION", "querySetId": query_set["querySetId"],
        "searchConfigurationList": query_set["searchConfigurationList"],
        "judgmentList": query_set["judgmentList"], "size": 5}).json["experiment_id"]
    deadline = time.monotonic() + 60
    while direct.get(index=".plugins-search-relevance-experiment", id=copy)["_source"][
            "status"] == "PROCESSING" and time.monotonic() < deadline:
        time.sleep(0.2)
    api.srw("POST", "/experiments/schedule", {"experimentId": copy,
                                              "cronExpression": "0 3 * * *"})
    assert api.srw("DELETE", f"/experiments/{copy}").status == 200
    assert not direct.exists(index=JOBS, id=copy)


def test_a_schedule_that_cannot_fire_does_not_stop_the_others(
        api: Api, experiment: str, env: dict[str, str], direct: OpenSearch) -> None:
    """A schedule stored before crons were checked (one that never fires) is logged and passed
    over; the other schedules still fire."""
    bad = f"never-{experiment}"
    direct.index(index=JOBS, id=bad, refresh=True, body={
        "id": bad, "enabled": True, "enabledTime": 0, "lastUpdateTime": 0,
        "schedule": {"cron": {"expression": "0 0 30 2 *", "timezone": "UTC"}}})
    try:
        scheduler, _ = scheduled(api, direct, env, experiment, "* * * * *")
        started = scheduler.tick(now=datetime.now(UTC) + timedelta(minutes=2))
        assert len(started) == 1
        assert wait_history(direct, started[0])["experimentId"] == experiment
    finally:
        api.srw("DELETE", f"/experiments/schedule/{experiment}")
        direct.delete(index=JOBS, id=bad, refresh=True)
