"""A job past ``WORKBENCH_JOB_TIMEOUT`` ends: ``ERROR`` with a reason naming the setting, the
usage and progress of what it did, one WARNING line and no traceback; unsplit and split over
two workers. A timeout below the minimum is refused at start.

The stack runs with the minimum timeout, 60 s: a job stops itself after 30 s of work. The
stand-in LLM answers in 5 s, two calls at a time per worker, so each judgment here needs about
50 s of work.
"""

from __future__ import annotations

import re
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from opensearchpy import OpenSearch

from tests.conftest import JUDGE_MODEL
from tests.support.api import Api
from tests.support.job_tasks import ENTITY_INDEX
from tests.support.processes import REPO, Server, Worker, logs_since
from tests.support.small_job import item_catalogue
from tests.support.waiting import finished, settled
from workbench.bench.llm_server import LLMServer
from workbench.jobs.celery_app import celery_app

TIMEOUT = 60
REASON = ("the job ran past its time limit: stopped after 30 s of work "
          "(WORKBENCH_JOB_TIMEOUT=60 s, less 30 s to end it)")
SPLIT_AT = 30  # WORKBENCH_SPLIT_QUERIES: the 40-query judgment is split, the 20-query one not
LATENCY = 5.0
PARENT_DONE = re.compile(r"Task workbench\.judgments\.generate\[[^\]]+\] succeeded")


@pytest.fixture(scope="module")
def stack(env: dict[str, str], direct: OpenSearch) -> Iterator[dict[str, Any]]:
    """An API server and two workers (one job at a time each) on a queue of their own, with
    the minimum WORKBENCH_JOB_TIMEOUT; an index of 40 items and query sets of 40 and 20."""
    stack_env = dict(env, WORKBENCH_QUEUE=f"limits-{uuid.uuid4().hex[:8]}",
                     WORKBENCH_JOB_TIMEOUT=str(TIMEOUT), WORKBENCH_SPLIT_QUERIES=str(SPLIT_AT),
                     WORKBENCH_LLM_CONCURRENCY="2")
    server = Server(stack_env)
    workers = [Worker(stack_env, extra=["--concurrency", "1"]) for _ in range(2)]
    api = Api(server.url)
    index = f"test-limits-{uuid.uuid4().hex[:6]}"
    items = item_catalogue(direct, api, index, 40, 2)
    twenty = api.srw("PUT", "/query_sets", {"name": f"twenty {index}", "querySetQueries": [
        {"queryText": f"item{q} red shoe"} for q in range(20)]}).json["query_set_id"]
    yield {"api": api, "workers": workers, "config": items["config"],
           "forty": items["querySetId"], "twenty": twenty}
    for worker in workers:
        worker.stop()
    server.stop()
    direct.indices.delete(index=index)


def run_past_the_limit(stack: dict[str, Any], llm: LLMServer, query_set: str,
                       ) -> tuple[str, dict[str, Any], float, int, list[str]]:
    """Start an LLM judgment over ``query_set`` with a slow model; the judgment's id, its
    final document, seconds from creation to its end, the calls the model answered and what
    each worker logged meanwhile."""
    api: Api = stack["api"]
    workers: list[Worker] = stack["workers"]
    llm.latency = LATENCY
    before = [w.log() for w in workers]
    calls_before = llm.calls
    try:
        started = time.monotonic()
        reply = api.srw("PUT", "/judgments", {
            "name": f"limit-{uuid.uuid4().hex[:8]}", "type": "LLM_JUDGMENT",
            "modelId": JUDGE_MODEL, "querySetId": query_set,
            "searchConfigurationList": [stack["config"]], "size": 2,
            "contextFields": ["title"], "overwriteCache": True})
        assert reply.status == 200, reply.data
        judgment_id = str(reply.json["judgment_id"])
        doc = finished(api, f"/judgments/{judgment_id}", 90, interval=0.25)
        seconds = time.monotonic() - started
        logs = logs_since(workers, before, PARENT_DONE)
        time.sleep(LATENCY + 1)  # any call still made would show by now
        calls = llm.calls - calls_before
    finally:
        llm.latency = 0.0
    return judgment_id, doc, seconds, calls, logs


def check_ending(judgment_id: str, doc: dict[str, Any], seconds: float, calls: int,
                 logs: list[str], queries: int) -> None:
    assert doc["status"] == "ERROR"
    assert doc["metadata"]["error"] == REASON
    assert doc["judgmentRatings"] == []
    # what it did is kept, as a cancel keeps it: every call the model answered, its progress
    usage = doc["metadata"]["usage"]
    assert usage["llmCalls"] == calls > 0, (usage, calls)
    assert usage["inputTokens"] > 0 and usage["totalTokens"] == (
        usage["inputTokens"] + usage["outputTokens"])
    progress = doc["metadata"]["progress"]
    assert progress["total"] == queries and 0 < progress["done"] < queries, progress
    # it stopped at 30 s of work; the calls in flight (5 s) finished
    assert 30 <= seconds < 30 + LATENCY + 8, seconds
    # one WARNING line for the ending, no traceback, no ERROR line, no "raised unexpected"
    joined = "\n".join(logs)
    ending = [line for line in joined.splitlines() if "ended ERROR" in line]
    assert len(ending) == 1 and " WARNING " in ending[0] and ending[0].endswith(
        f"job workbench.judgments.generate for {judgment_id} ended ERROR: {REASON}"), ending
    assert "Traceback" not in joined and "raised unexpected" not in joined
    assert not [line for line in joined.splitlines() if re.search(r" ERROR \[\d+\]", line)]


def test_a_judgment_past_its_time_limit_ends_error_keeping_its_usage(
        stack: dict[str, Any], llm: LLMServer) -> None:
    judgment_id, doc, seconds, calls, logs = run_past_the_limit(stack, llm, stack["twenty"])
    print(f"unsplit: ERROR after {seconds:.1f} s, {calls} calls, "
          f"{doc['metadata']['progress']['done']} of 20 queries")
    check_ending(judgment_id, doc, seconds, calls, logs, 20)
    assert "split into" not in "\n".join(logs)


def test_a_split_judgment_past_its_time_limit_ends_error_keeping_every_workers_usage(
        stack: dict[str, Any], llm: LLMServer) -> None:
    judgment_id, doc, seconds, calls, logs = run_past_the_limit(stack, llm, stack["forty"])
    print(f"split: ERROR after {seconds:.1f} s, {calls} calls, "
          f"{doc['metadata']['progress']['done']} of 40 queries")
    check_ending(judgment_id, doc, seconds, calls, logs, 40)
    assert f"llm_judgment {judgment_id} split into 40 units" in "\n".join(logs)
    assert any("Task workbench.jobs.help[" in log for log in logs)  # the other worker helped


def test_a_job_that_does_not_stop_is_interrupted_and_ends_the_same_way(
        env: dict[str, str], direct: OpenSearch, celery: object) -> None:
    """Code that never looks at its control (a long call): Celery's soft limit, 15 s before the
    timeout, interrupts it; the job ends ERROR keeping what it spent, in one WARNING line."""
    direct.indices.create(index=ENTITY_INDEX, ignore=400)
    worker = Worker(dict(env, WORKBENCH_JOB_TIMEOUT=str(TIMEOUT)), module="tests.support.job_tasks",
                    queue=f"stuck-{uuid.uuid4().hex[:8]}")
    try:
        entity_id = str(uuid.uuid4())
        direct.index(index=ENTITY_INDEX, id=entity_id, refresh=True,
                     body={"status": "PROCESSING", "metadata": {"param": 1}})
        before = len(worker.log())
        started = time.monotonic()
        celery_app.send_task("tests.stuck", args=(entity_id,), queue=worker.queue)
        doc = settled(direct, ENTITY_INDEX, entity_id, 90, running=("PROCESSING",))
        seconds = time.monotonic() - started
        time.sleep(1)  # the task's own lines come after the status write
        new = worker.log()[before:]
    finally:
        worker.stop()
    print(f"interrupted: ERROR after {seconds:.1f} s")
    reason = ("the job ran past its time limit: interrupted after 45 s of work "
              "(WORKBENCH_JOB_TIMEOUT=60 s, less 15 s)")
    assert doc == {"status": "ERROR", "metadata": {"error": reason, "usage": {"llmCalls": 2}}}
    assert 45 <= seconds < 55
    lines = [line for line in new.splitlines() if entity_id in line]
    assert len(lines) == 1, lines
    assert " WARNING " in lines[0] and lines[0].endswith(
        f"job tests.stuck for {entity_id} ended ERROR: {reason}"), lines
    assert "Traceback" not in new and "raised unexpected" not in new
    assert not re.search(r" ERROR \[\d+\]", new)


@pytest.mark.parametrize("command", ["worker", "serve"])
def test_a_timeout_below_the_minimum_is_refused_at_start(env: dict[str, str],
                                                         command: str) -> None:
    done = subprocess.run([sys.executable, "-m", "workbench.cli", command],
                          env=dict(env, WORKBENCH_JOB_TIMEOUT="25"), cwd=REPO,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip() == (
        "workbench: configuration error: WORKBENCH_JOB_TIMEOUT: 25 s is below the minimum of "
        "60 s (a job is stopped 30 s before its timeout to end cleanly, which leaves it 30 s of "
        "work at the minimum)")
