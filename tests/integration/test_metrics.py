"""The operator metrics (docs/metrics.md), scraped from the listener of a real API and worker
that share a metrics folder, after real jobs: each counter and histogram must move by exactly
what the jobs did."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
import urllib3
from opensearchpy import OpenSearch
from prometheus_client.parser import text_string_to_metric_families

from tests.conftest import JUDGE_MODEL
from tests.support import waiting
from tests.support.api import Api
from tests.support.processes import Server, Worker, free_port
from tests.support.small_job import item_catalogue
from workbench.bench.llm_server import LLMServer
from workbench.redis_keys import QUEUED_SINCE_KEY, queued_key, queued_member

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]
JUDGMENTS = "/_plugins/_search_relevance/judgments"
PRICES = {"inputPerMillion": 3.0, "outputPerMillion": 15.0}


@pytest.fixture(scope="module")
def stack(env: dict[str, str], tmp_path_factory: pytest.TempPathFactory
          ) -> Iterator[dict[str, Any]]:
    """An API and a worker given the same metrics port and folder, as one host's env file
    would: the API listens, the worker's samples are reported through it."""
    port = free_port()
    metered = dict(env, WORKBENCH_METRICS_PORT=str(port),
                   WORKBENCH_METRICS_DIR=str(tmp_path_factory.mktemp("metrics")),
                   WORKBENCH_QUEUE=f"metrics-{uuid.uuid4().hex[:8]}",
                   WORKBENCH_LOG_FORMAT="json")
    server = Server(metered)
    worker = Worker(metered)
    yield {"api": Api(server.url), "url": f"http://127.0.0.1:{port}/metrics", "server": server,
           "worker": worker, "env": metered}
    worker.stop()
    server.stop()


def scrape(url: str) -> Samples:
    reply = urllib3.request("GET", url, timeout=10)
    assert reply.status == 200
    out: Samples = {}
    for family in text_string_to_metric_families(reply.data.decode()):
        for sample in family.samples:
            out[(sample.name, frozenset(sample.labels.items()))] = sample.value
    return out


def value(samples: Samples, name: str, **labels: str) -> float:
    return samples.get((name, frozenset(labels.items())), 0.0)


def moved(before: Samples, after: Samples, name: str, **labels: str) -> float:
    return value(after, name, **labels) - value(before, name, **labels)


def settle(url: str, name: str, labels: dict[str, str], at_least: float,
           timeout: float = 30) -> Samples:
    """A scrape in which ``name{labels}`` reached ``at_least`` (a job's end is counted just
    after its status is written)."""
    deadline = time.monotonic() + timeout
    while True:
        samples = scrape(url)
        if value(samples, name, **labels) >= at_least or time.monotonic() > deadline:
            return samples
        time.sleep(0.2)


def create(api: Api, body: dict[str, Any]) -> str:
    reply = api.srw("PUT", "/judgments", body)
    assert reply.status == 200, reply.data
    return str(reply.json["judgment_id"])


def ended(samples: Samples, kind: str, ending: str) -> float:
    return value(samples, "workbench_jobs_ended_total", job="judgment", type=kind, ending=ending)


def test_an_import_judgment_counts_its_request_entity_and_job(stack: dict[str, Any]) -> None:
    url, api = stack["url"], stack["api"]
    before = scrape(url)
    judgment_id = create(api, {"name": f"imp-{uuid.uuid4().hex[:6]}", "type": "IMPORT_JUDGMENT",
                               "judgmentRatings": [{"query": "q", "ratings": [
                                   {"docId": "d1", "rating": "1"}]}]})
    assert waiting.finished(api, f"/judgments/{judgment_id}", 60)["status"] == "COMPLETED"
    after = settle(url, "workbench_jobs_ended_total",
                   {"job": "judgment", "type": "IMPORT_JUDGMENT", "ending": "completed"},
                   ended(before, "IMPORT_JUDGMENT", "completed") + 1)
    assert moved(before, after, "workbench_http_requests_total", method="PUT",
                 route=JUDGMENTS, status="200") == 1
    assert moved(before, after, "workbench_http_request_duration_seconds_count", method="PUT",
                 route=JUDGMENTS) == 1
    assert moved(before, after, "workbench_entities_created_total", kind="judgment",
                 type="IMPORT_JUDGMENT") == 1
    assert moved(before, after, "workbench_jobs_created_total", job="judgment",
                 type="IMPORT_JUDGMENT") == 1
    assert moved(before, after, "workbench_jobs_started_total", job="judgment") == 1
    labels = {"job": "judgment", "type": "IMPORT_JUDGMENT", "ending": "completed"}
    assert moved(before, after, "workbench_jobs_ended_total", **labels) == 1
    assert moved(before, after, "workbench_job_duration_seconds_count", **labels) == 1
    assert moved(before, after, "workbench_job_duration_seconds_sum", **labels) > 0
    # The worker's requests to the cluster (read the judgment, write the ratings) are counted.
    assert moved(before, after, "workbench_opensearch_requests_total", via="client",
                 outcome="ok") >= 2
    assert moved(before, after, "workbench_opensearch_request_duration_seconds_count",
                 via="client") >= 2


def test_a_ubi_judgment_and_the_passthrough(stack: dict[str, Any], ubi_data: None) -> None:
    url, api = stack["url"], stack["api"]
    before = scrape(url)
    assert api.call("GET", "/ubi_events/_count").status == 200  # straight to the cluster
    judgment_id = create(api, {"name": f"ubi-{uuid.uuid4().hex[:6]}", "type": "UBI_JUDGMENT",
                               "clickModel": "coec", "maxRank": 20})
    assert waiting.finished(api, f"/judgments/{judgment_id}", 120)["status"] == "COMPLETED"
    after = settle(url, "workbench_jobs_ended_total",
                   {"job": "judgment", "type": "UBI_JUDGMENT", "ending": "completed"},
                   ended(before, "UBI_JUDGMENT", "completed") + 1)
    assert moved(before, after, "workbench_jobs_ended_total", job="judgment",
                 type="UBI_JUDGMENT", ending="completed") == 1
    assert moved(before, after, "workbench_http_requests_total", method="GET",
                 route="passthrough", status="200") == 1
    assert moved(before, after, "workbench_opensearch_requests_total", via="passthrough",
                 outcome="ok") == 1


def test_an_llm_judgment_counts_the_calls_tokens_and_cost_its_usage_reports(
        stack: dict[str, Any], direct: OpenSearch, llama_url: str) -> None:
    url, api = stack["url"], stack["api"]
    index = f"test-metrics-{uuid.uuid4().hex[:6]}"
    items = item_catalogue(direct, api, index, 2, 2)
    model = f"llama-{uuid.uuid4().hex[:8]}"
    assert api.srw("PUT", "/models", {
        "id": model, "name": "SmolLM2", "provider": "openai", "endpoint": llama_url,
        "model": "smollm2", "options": {"max_tokens": 24}, "pricing": PRICES}).status == 200
    try:
        before = scrape(url)
        judgment_id = create(api, {
            "name": f"llm-{uuid.uuid4().hex[:6]}", "type": "LLM_JUDGMENT", "modelId": model,
            "querySetId": items["querySetId"], "searchConfigurationList": [items["config"]],
            "size": 2, "contextFields": ["title"]})
        done = waiting.finished(api, f"/judgments/{judgment_id}", 300)
        assert done["status"] == "COMPLETED", done["metadata"]
        after = settle(url, "workbench_jobs_ended_total",
                       {"job": "judgment", "type": "LLM_JUDGMENT", "ending": "completed"},
                       ended(before, "LLM_JUDGMENT", "completed") + 1)
    finally:
        api.srw("DELETE", f"/models/{model}")
        direct.indices.delete(index=index)
    usage = done["metadata"]["usage"]
    calls = (moved(before, after, "workbench_llm_calls_total", model=model, outcome="ok")
             + moved(before, after, "workbench_llm_calls_total", model=model, outcome="error"))
    assert usage["llmCalls"] >= 4 and calls == usage["llmCalls"]
    assert moved(before, after, "workbench_llm_call_duration_seconds_count",
                 model=model) == usage["llmCalls"]
    assert moved(before, after, "workbench_llm_input_tokens_total",
                 model=model) == usage["inputTokens"]
    assert moved(before, after, "workbench_llm_output_tokens_total",
                 model=model) == usage["outputTokens"]
    assert moved(before, after, "workbench_llm_cost_total", model=model) == pytest.approx(
        usage["cost"], rel=1e-9)
    assert usage["cost"] == pytest.approx(
        (usage["inputTokens"] * 3.0 + usage["outputTokens"] * 15.0) / 1e6)


@pytest.fixture
def stand_in(stack: dict[str, Any], llm: LLMServer, direct: OpenSearch
             ) -> Iterator[dict[str, str]]:
    """A judgment of 6 queries x 3 documents over the session's stand-in model."""
    index = f"test-metrics-{uuid.uuid4().hex[:6]}"
    items = item_catalogue(direct, stack["api"], index, 6, 3)
    yield items
    direct.indices.delete(index=index)


def llm_judgment(items: dict[str, str]) -> dict[str, Any]:
    return {"name": f"stand-in-{uuid.uuid4().hex[:6]}", "type": "LLM_JUDGMENT",
            "modelId": JUDGE_MODEL, "querySetId": items["querySetId"],
            "searchConfigurationList": [items["config"]], "size": 3, "overwriteCache": True}


def test_a_cancelled_and_a_failed_judgment_are_counted_as_such(
        stack: dict[str, Any], llm: LLMServer, stand_in: dict[str, str]) -> None:
    url, api = stack["url"], stack["api"]
    before = scrape(url)
    llm.latency = 0.5  # slow enough to cancel mid-way
    cancelled = create(api, llm_judgment(stand_in))
    deadline = time.monotonic() + 30
    while llm.calls == 0 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert api.srw("POST", f"/judgments/{cancelled}/_cancel").status == 200
    assert waiting.finished(api, f"/judgments/{cancelled}", 60)["status"] == "ERROR"
    llm.latency = 0.0
    # A model id the cluster does not know: no query can be rated, the judgment ends ERROR.
    unknown = f"nope-{uuid.uuid4().hex[:6]}"
    failed = create(api, {**llm_judgment(stand_in), "modelId": unknown})
    done = waiting.finished(api, f"/judgments/{failed}", 120)
    assert done["status"] == "ERROR" and "could not be processed" in done["metadata"]["error"]
    after = settle(url, "workbench_jobs_ended_total",
                   {"job": "judgment", "type": "LLM_JUDGMENT", "ending": "error"},
                   ended(before, "LLM_JUDGMENT", "error") + 1)
    for ending in ("cancelled", "error"):
        labels = {"job": "judgment", "type": "LLM_JUDGMENT", "ending": ending}
        assert moved(before, after, "workbench_jobs_ended_total", **labels) == 1, ending
        assert moved(before, after, "workbench_job_duration_seconds_count", **labels) == 1
    assert moved(before, after, "workbench_jobs_ended_total", job="judgment",
                 type="LLM_JUDGMENT", ending="completed") == 0
    # Its calls are errors, counted under "unknown": a mistyped id adds no label.
    assert moved(before, after, "workbench_llm_calls_total", model="unknown",
                 outcome="error") == done["metadata"]["usage"]["llmCalls"] > 0
    assert not any(name == "workbench_llm_calls_total" and ("model", unknown) in labels
                   for name, labels in after)


def test_queue_depth_and_the_oldest_queued_job(stack: dict[str, Any], redis_url: str) -> None:
    """A job queued 10,000 s ago (older than anything real) is the oldest; once its marker is
    gone (its job started elsewhere, or was failed), it no longer counts."""
    r = redis.Redis.from_url(redis_url)
    entity = f"metrics-{uuid.uuid4().hex}"
    task = "workbench.judgments.generate"
    r.set(queued_key(task, entity), "queued")
    r.zadd(QUEUED_SINCE_KEY, {queued_member(task, entity): time.time() - 10_000})
    try:
        samples = scrape(stack["url"])
        assert 10_000 <= value(samples, "workbench_oldest_queued_job_age_seconds") < 10_060
        assert value(samples, "workbench_jobs_queued") >= 1
    finally:
        r.delete(queued_key(task, entity))
    samples = scrape(stack["url"])
    assert value(samples, "workbench_oldest_queued_job_age_seconds") < 10_000
    assert r.zscore(QUEUED_SINCE_KEY, queued_member(task, entity)) is None


def test_the_metrics_are_not_on_the_api_port(stack: dict[str, Any]) -> None:
    """Every path of the API's port is OpenSearch's: /metrics there is the cluster's answer."""
    reply = stack["api"].call("GET", "/metrics")
    assert reply.status == 404, reply.data
    assert b"no such index [metrics]" in reply.data
    assert b"workbench_" not in reply.data


def test_the_worker_logs_json_lines_with_the_job_fields(stack: dict[str, Any]) -> None:
    """WORKBENCH_LOG_FORMAT=json: every line of the worker's log is one JSON object, and the
    lines of a job carry its kind, entity id and task id."""
    api, worker = stack["api"], stack["worker"]
    before = len(worker.log())
    judgment_id = create(api, {"name": f"imp-{uuid.uuid4().hex[:6]}", "type": "IMPORT_JUDGMENT",
                               "judgmentRatings": [{"query": "q", "ratings": [
                                   {"docId": "d1", "rating": "1"}]}]})
    waiting.finished(api, f"/judgments/{judgment_id}", 60)
    time.sleep(0.5)
    lines = [line for line in worker.log()[before:].splitlines() if line.strip()]
    records = [json.loads(line) for line in lines]
    assert all({"time", "level", "logger", "message"} <= set(r) for r in records), records
    mine = [r for r in records if r.get("entity_id") == judgment_id]
    assert mine, records
    assert all(r["job"] == "judgment"
               and r["task_id"] == f"workbench.judgments.generate:{judgment_id}" for r in mine)


def test_each_command_keeps_its_samples_in_a_folder_of_its_own(stack: dict[str, Any]) -> None:
    folder = Path(stack["env"]["WORKBENCH_METRICS_DIR"])
    owned = sorted(p.name.split("-")[0] for p in folder.iterdir())
    assert owned == ["serve", "worker"], owned


def test_behind_the_haproxy_front_the_serving_process_listens(
        env: dict[str, str], tmp_path: Path) -> None:
    """With the front, ``workbench serve`` runs HAProxy and a gunicorn child: the parent
    listens, the child's samples reach it, and a pass-through HAProxy sends straight to the
    cluster is not the workbench's to count."""
    port = free_port()
    server = Server(dict(env, WORKBENCH_METRICS_PORT=str(port),
                         WORKBENCH_METRICS_DIR=str(tmp_path)), front="haproxy")
    try:
        url = f"http://127.0.0.1:{port}/metrics"
        before = scrape(url)
        api = Api(server.url)
        assert api.srw("GET", "/query_sets").status == 200
        assert api.call("GET", "/_cluster/health").status == 200  # HAProxy to the cluster
        after = scrape(url)
        assert moved(before, after, "workbench_http_requests_total", method="GET",
                     route="/_plugins/_search_relevance/query_sets", status="200") == 1
        assert moved(before, after, "workbench_http_requests_total", method="GET",
                     route="passthrough", status="200") == 0
        assert "in use" not in server.log()  # the child was not given the port
    finally:
        server.stop()
