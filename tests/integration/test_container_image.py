"""The container image, built and run as operators run it (issue 48; docs/deployment.md, "The
container image"): built by ``scripts/image.sh`` on a Debian base made from Debian's packages,
the API (``serve``) and workers (``worker``) in real containers on the host's network against the
test session's OpenSearch, Redis and stand-in LLM.

* the usual path through the container API: a query set, an imported judgment, a pointwise
  experiment and its ``_summary``, whose values are the hand-worked ones of
  test_condensed_metrics and equal to the summary of the same experiment run by the session's
  own API and worker;
* a worker container stopped with SIGTERM (``podman stop``) in the middle of a job: a second
  worker container completes it, each prompt answered once;
* ``workbench config`` in the image masks secrets exactly as on the host;
* no process of the image runs as root, and its HEALTHCHECK reports the API and a worker healthy.
* ``workbench bench --only metrics --quick`` runs in the image, with no network: the benchmarks
  are installed code.
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
import redis
from opensearchpy import OpenSearch

from tests.integration.test_condensed_metrics import DOCS, FULL, IDCG, LOG2_3, K
from tests.integration.test_experiments import create, wait
from tests.support.api import Api, search_configuration
from tests.support.containers import Container, build_image, image_env, podman, settings_of
from tests.support.processes import free_port
from tests.support.small_job import GENERATE, QUERIES, SmallJob, small_job
from tests.support.waiting import settled
from workbench.bench.llm_server import LLMServer
from workbench.jobs import leases

pytestmark = pytest.mark.timeout(1500)  # the first test builds the image when it is missing

#: the lease of the containers' jobs, short so that a killed worker's job moves on soon
LEASE = "3"
#: the image's non-root user (the Dockerfile)
UID = "10001"


@pytest.fixture(scope="module")
def image() -> str:
    return build_image()


@pytest.fixture(scope="module")
def containers() -> Iterator[list[Container]]:
    """The module's containers (the API), removed at its end whatever happened."""
    started: list[Container] = []
    yield started
    for container in started:
        container.remove()


@pytest.fixture
def workers() -> Iterator[list[Container]]:
    """A test's worker containers, removed at its end whatever happened (a worker left running
    would take the next test's jobs from the queue)."""
    started: list[Container] = []
    yield started
    for container in started:
        container.remove()


@pytest.fixture(scope="module")
def cenv(env: dict[str, str]) -> dict[str, str]:
    """The containers' environment: the session's settings (cluster, Redis, the stand-in model
    and its key), a queue of their own, one job at a time and a short lease."""
    return dict(settings_of(env, "TEST_LLM_KEY"),
                WORKBENCH_QUEUE=f"image-{uuid.uuid4().hex[:8]}",
                WORKBENCH_WORKER_CONCURRENCY="1", WORKBENCH_LEASE_SECONDS=LEASE)


@pytest.fixture(scope="module")
def api_container(image: str, cenv: dict[str, str],
                  containers: list[Container]) -> Container:
    port = free_port()
    container = Container(image, ["serve"], dict(cenv, WORKBENCH_PORT=str(port),
                                                 WORKBENCH_WEB_WORKERS="2"))
    containers.append(container)
    container.wait_http(container.url + "/")
    return container


@pytest.fixture(scope="module")
def capi(api_container: Container) -> Api:
    return Api(api_container.url)


def start_worker(image: str, cenv: dict[str, str], containers: list[Container]) -> Container:
    container = Container(image, ["worker"], cenv)
    containers.append(container)
    container.wait_worker(cenv)
    return container


def shoes_world(api: Api, direct: OpenSearch, index: str) -> dict[str, str]:
    """test_condensed_metrics' six shoes, its two configurations, one query and the full
    judgment list, created through ``api``."""
    direct.indices.create(index=index, body={"mappings": {"properties": {
        "title": {"type": "text"}, "rank": {"type": "integer"}}}})
    for doc, rank in DOCS:
        direct.index(index=index, id=doc, body={"title": f"shoe {doc}", "rank": rank})
    direct.indices.refresh(index=index)
    asc = search_configuration(api, "by rank asc", index,
                               '{"query":{"match":{"title":"%SearchText%"}},'
                               '"sort":[{"rank":"asc"}]}')
    desc = search_configuration(api, "by rank desc", index,
                                '{"query":{"match":{"title":"%SearchText%"}},'
                                '"sort":[{"rank":"desc"}]}')
    reply = api.srw("PUT", "/query_sets", {"name": f"shoes {index}",
                                           "querySetQueries": [{"queryText": "shoe"}]})
    assert reply.status == 200, reply.data
    query_set = str(reply.json["query_set_id"])
    reply = api.srw("PUT", "/judgments", {
        "name": f"shoes {index}", "type": "IMPORT_JUDGMENT", "judgmentRatings": [
            {"query": "shoe", "ratings": [{"docId": d, "rating": str(r)}
                                          for d, r in FULL.items()]}]})
    assert reply.status == 200, reply.data
    judgment = str(reply.json["judgment_id"])
    assert wait(api, f"/judgments/{judgment}")["status"] == "COMPLETED"
    return {"asc": asc, "desc": desc, "querySetId": query_set, "judgment": judgment}


def experiment(api: Api, world: dict[str, str]) -> tuple[str, dict[str, Any]]:
    """A pointwise experiment of both configurations, run to the end; its id and summary."""
    experiment_id = create(api, {"type": "POINTWISE_EVALUATION",
                                 "querySetId": world["querySetId"],
                                 "searchConfigurationList": [world["asc"], world["desc"]],
                                 "judgmentList": [world["judgment"]], "size": K})
    assert wait(api, f"/experiments/{experiment_id}")["status"] == "COMPLETED"
    reply = api.srw("GET", f"/experiments/{experiment_id}/_summary")
    assert reply.status == 200, reply.data
    return experiment_id, reply.json


def without_ids(value: Any, ids: set[str]) -> Any:
    """``value`` with the given ids (an experiment's) and timestamps replaced, for comparing
    two runs of one experiment."""
    if isinstance(value, dict):
        return {without_ids(k, ids): without_ids(v, ids) for k, v in value.items()
                if k not in ("timestamp", "createdAt", "updatedAt")}
    if isinstance(value, list):
        return [without_ids(v, ids) for v in value]
    if isinstance(value, str):
        for one in ids:
            value = value.replace(one, "<experiment>")
    return value


def test_the_usual_path_through_the_container_api(
        image: str, cenv: dict[str, str], workers: list[Container], capi: Api,
        api: Api, worker: Any, direct: OpenSearch) -> None:
    start_worker(image, cenv, workers)
    index = f"test-image-{uuid.uuid4().hex[:6]}"
    try:
        world = shoes_world(capi, direct, index)
        in_container, summary = experiment(capi, world)
        # the same experiment, run by the session's own API and worker (no container)
        on_host, reference = experiment(api, world)
    finally:
        direct.indices.delete(index=index, ignore=[404])
    ids = {in_container, on_host}
    assert without_ids(summary, ids) == without_ids(reference, ids)
    # Worked by hand (test_condensed_metrics, the full list): "by rank asc" finds a, b, c rated
    # 2, 1, 0, DCG@3 = 3 + 1/log2(3), and not d, the one relevant shoe (MAP@3 = Precision@3 =
    # 0); "by rank desc" finds f, e, d rated 0, 0, 3, DCG@3 = 7/2, d at rank 3 (MAP@3 =
    # Precision@3 = 1/3).
    assert summary["status"] == "COMPLETED"
    rows = {row["searchConfigurationId"]: row["metrics"] for row in summary["configurations"]}
    expected = {world["asc"]: {"NDCG@3": (3 + 1 / LOG2_3) / IDCG, "MAP@3": 0.0,
                               "Precision@3": 0.0},
                world["desc"]: {"NDCG@3": 3.5 / IDCG, "MAP@3": 1 / 3, "Precision@3": 1 / 3}}
    for config, values in expected.items():
        assert {name: rows[config][name]["mean"] for name in values} == pytest.approx(
            values, rel=1e-12, abs=1e-12)
    first = summary["comparisons"][0]
    assert (first["metric"], first["baseline"], first["candidate"]) == (
        "NDCG@3", world["asc"], world["desc"])
    assert first["meanDelta"] == pytest.approx((3.5 - 3 - 1 / LOG2_3) / IDCG, abs=1e-9)


def lease_holder(r: redis.Redis, judgment_id: str) -> str | None:
    value = r.get(leases.lease_key(GENERATE, judgment_id))
    return None if value is None else value.decode() if isinstance(value, bytes) else str(value)


def test_a_job_stopped_with_its_worker_completes_on_a_second_worker(
        image: str, cenv: dict[str, str], workers: list[Container], capi: Api,
        llm: LLMServer, direct: OpenSearch, redis_url: str) -> None:
    r = redis.Redis.from_url(redis_url)
    job: SmallJob = small_job(direct, capi, f"test-image-job-{uuid.uuid4().hex[:6]}")
    first = start_worker(image, cenv, workers)
    try:
        llm.latency = 60.0  # every call outlasts the stop's grace period
        judgment_id = job.start(capi, f"image-{uuid.uuid4().hex[:8]}")
        deadline = time.monotonic() + 60
        while (lease_holder(r, judgment_id) is None or llm.calls < 1) \
                and time.monotonic() < deadline:
            time.sleep(0.1)
        holder = lease_holder(r, judgment_id)
        assert holder is not None and holder.startswith(first.name + ":"), holder
        assert llm.calls >= 1
        took = first.stop(timeout=5)  # SIGTERM, SIGKILL 5 s later
        assert not first.running()
        stopped_calls = llm.calls
        llm.latency = 1.0
        second = start_worker(image, cenv, workers)
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            holder = lease_holder(r, judgment_id)
            if holder is not None and holder.startswith(second.name + ":"):
                break
            time.sleep(0.1)
        assert holder is not None and holder.startswith(second.name + ":"), holder
        doc = settled(direct, "search-relevance-judgment", judgment_id, timeout=120)
    finally:
        llm.latency = 0.0
        direct.indices.delete(index=job.index, ignore=[404])
    print(f"stopped in {took:.1f} s; {stopped_calls} call(s) before, {llm.calls} in all")
    assert doc["status"] == "COMPLETED", doc.get("metadata")
    assert sorted(e["query"] for e in doc["judgmentRatings"]) == sorted(QUERIES)
    for entry in doc["judgmentRatings"]:
        ids = [rating["docId"] for rating in entry["ratings"]]
        assert ids and len(ids) == len(set(ids)), entry
    # The second worker asked each prompt once: its calls are what the judgment counts.
    after = llm.requests[stopped_calls:]
    prompts = [request.user for request in after]
    assert len(prompts) == len(set(prompts)), prompts
    assert doc["metadata"]["usage"]["llmCalls"] == len(after)
    # ... and the second container's log shows the task it ran.
    assert re.search(rf"Task {re.escape(GENERATE)}\[[^\]]+\] succeeded", second.logs())
    assert not re.search(rf"Task {re.escape(GENERATE)}\[[^\]]+\] succeeded", first.logs())


SECRETS = {
    "WORKBENCH_SECRET_KEY": "k0rZc5bq0N5v1G2yBHlRZ4d8d4QJw3W8Zb1QmEw8Uqs=",
    "OPENSEARCH_PASSWORD": "os-pass-do-not-leak",
    "REDIS_URL": "redis://:redis-pass-do-not-leak@127.0.0.1:6379/0",
    "OPENSEARCH_URL": "http://admin:url-pass-do-not-leak@127.0.0.1:9200",
    "OPENSEARCH_USERNAME": "admin",
}


def test_config_in_the_image_masks_secrets_as_outside(image: str) -> None:
    inside = podman("run", "--rm", "--network=host", "--no-healthcheck",
                    *[arg for key, value in SECRETS.items() for arg in ("-e", f"{key}={value}")],
                    image, "config").stdout.splitlines()
    # the host's command with the same settings and the image's own (where it listens)
    defaults = settings_of(image_env(image))
    host_env = {"PATH": "/usr/bin:/bin", **defaults, **SECRETS}
    host_env.pop("WORKBENCH_INDEX_MAPPINGS_DIR")  # a folder of the image, not of this host
    outside = subprocess.run([sys.executable, "-m", "workbench.cli", "config"], env=host_env,
                             capture_output=True, text=True, timeout=60, check=True
                             ).stdout.splitlines()
    mappings = "WORKBENCH_INDEX_MAPPINGS_DIR="
    assert [line for line in inside if line.startswith(mappings)] == [
        mappings + "/opt/workbench/index_mappings"]
    assert ([line for line in inside if not line.startswith(mappings)]
            == [line for line in outside if not line.startswith(mappings)])
    text = "\n".join(inside)
    for secret in ("k0rZc5bq", "os-pass", "redis-pass", "url-pass"):
        assert secret not in text
    assert "WORKBENCH_SECRET_KEY=****" in inside
    assert "OPENSEARCH_PASSWORD=****" in inside
    assert "OPENSEARCH_URL=http://127.0.0.1:9200" in inside
    assert "WORKBENCH_HOST=0.0.0.0" in inside


def test_nothing_runs_as_root_and_the_healthcheck_passes(
        image: str, cenv: dict[str, str], workers: list[Container],
        api_container: Container) -> None:
    worker = start_worker(image, cenv, workers)
    for container in (api_container, worker):
        rows = container.processes()
        assert rows, container.name
        for user, huser, args in rows:
            assert (user, huser) == ("workbench", UID), (container.name, user, huser, args)
        assert container.exec("id", "-u").stdout.strip() == UID
        status, said = container.health()
        assert (status, said) == (0, "healthy"), (container.name, said)
    # the API's processes: its gunicorn and the HAProxy front, all as the workbench user
    assert any("/usr/sbin/haproxy" in args for _, _, args in api_container.processes())
    # the check asks the API's port: on a port where nothing listens it fails
    refused = api_container.exec("env", "WORKBENCH_PORT=1", "workbench", "healthcheck")
    assert refused.returncode == 1 and "Connection refused" in refused.stderr, refused
    inspected = podman("image", "inspect", "--format",
                       "{{.Config.User}} {{json .Config.Entrypoint}} {{json .Config.Cmd}}",
                       image).stdout.strip()
    assert inspected == f'{UID}:{UID} ["workbench"] ["serve"]'


def test_the_installed_bench_command_runs_in_the_image(image: str) -> None:
    """``workbench bench`` is installed code (workbench/bench): the metrics benchmark, which
    needs no service, runs in the image with no network at all and compares with pytrec_eval."""
    result = podman("run", "--rm", "--network=none", "--no-healthcheck", image,
                    "bench", "--only", "metrics", "--quick", timeout=300, check=False)
    assert result.returncode == 0, (result.stdout[-2000:], result.stderr[-2000:])
    lines = result.stdout.splitlines()
    assert lines[0] == "== metrics"
    assert [re.sub(r":.*", "", line.strip()) for line in lines[1:4]] == [
        "evaluate_many (8 metrics) vs pytrec_eval ndcg_cut",
        "evaluate_many (8 metrics) vs pytrec_eval closest set",
        "NDCG max abs difference vs pytrec_eval (of range 1.0)"]
    difference = float(lines[3].split(": ")[1].split(" vs ")[0])
    assert difference < 1e-9
    assert lines[-1] == "report: /home/workbench/.cache/workbench/output/bench/report.md"
