"""The fuzz stage: schemathesis against the workbench's OpenAPI document and a running workbench.

Starts what it needs as the tests do (OpenSearch and Redis from ``OPENSEARCH_URL``/``REDIS_URL``,
else the project's scripts; the stand-in LLM server; ``workbench serve`` and a worker on a queue
of its own), seeds a few entities so that generated requests can reach past "does not exist"
(``scripts/fuzz_hooks.py`` swaps their ids into some of the generated requests), then runs
``schemathesis run`` on ``GET /_plugins/_search_relevance/_openapi`` with a fixed seed and a
bounded number of examples per operation, under a wall-clock cap.

Fails (exit status 1) on any 5xx and on any answer the document does not describe (status code,
content type or body); schemathesis prints each failure with a curl line that reproduces it.
Afterwards it deletes the SRW entities created during the run and restores the
``plugins.search_relevance.*`` settings, so point it at a cluster nobody else is writing SRW
entities to at the same time (CI runs it before the test suite), or pass ``--keep``.

    scripts/fuzz.sh [--max-examples 30] [--seed N] [--max-seconds 600] [--keep]
                    [-- <extra schemathesis options>]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from opensearchpy import OpenSearch

from tests.support import services
from tests.support.api import Api
from tests.support.processes import REPO, Server, Worker, base_env
from workbench.bench.llm_server import LLMServer
from workbench.bench.paths import output
from workbench.store import indices
from workbench.store.repository import now_iso

OPENAPI_PATH = "/_plugins/_search_relevance/_openapi"
CHECKS = ("not_a_server_error", "status_code_conformance", "content_type_conformance",
          "response_schema_conformance")
MODEL_ID = "fuzz-judge"
SEED_INDEX = "fuzz-products"
ENTITY_INDICES = (indices.QUERY_SET_INDEX, indices.SEARCH_CONFIG_INDEX, indices.JUDGMENT_INDEX,
                  indices.EXPERIMENT_INDEX, indices.VARIANT_INDEX, indices.EVALUATION_INDEX,
                  indices.JOBS_INDEX, indices.HISTORY_INDEX, indices.CACHE_INDEX,
                  indices.MODELS_INDEX, indices.REMOTE_CONFIG_INDEX)
SETTINGS_PREFIX = "plugins.search_relevance."


def parse_args(argv: list[str]) -> tuple[argparse.Namespace, list[str]]:
    extra: list[str] = []
    if "--" in argv:
        at = argv.index("--")
        argv, extra = argv[:at], argv[at + 1:]
    parser = argparse.ArgumentParser(prog="scripts/fuzz.sh", description=__doc__.split("\n")[0])
    # 30: with the 84 operations of the fill and monitor routes, 80 ran 551 s on the CI
    # machine (over the cap) and 50 ran 551 s on a busy 2-core machine; the coverage phase
    # (115-165 s) does not shrink with it, so fewer examples keep the stage near 6 minutes.
    parser.add_argument("--max-examples", type=int, default=30,
                        help="test cases per operation and phase (default 30)")
    parser.add_argument("--seed", type=int, default=20261123, help="schemathesis seed")
    parser.add_argument("--max-seconds", type=float, default=600,
                        help="wall-clock cap of the schemathesis run; over it the stage fails")
    parser.add_argument("--workers", type=int, default=2, help="schemathesis workers (default 2)")
    parser.add_argument("--report-dir", default=str(output("fuzz-report")),
                        help="where the JUnit report and the workbench's logs go")
    parser.add_argument("--keep", action="store_true",
                        help="keep the entities the run created and the settings it changed")
    return parser.parse_args(argv), extra


def wait_for(what: str, predicate: Callable[[], bool], timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.3)
    raise RuntimeError(f"fuzz: {what} did not happen in {timeout:.0f} s")


def seed_remote_url(opensearch_url: str) -> str:
    """The one URL the fuzz stage's remote search configurations may search."""
    return f"{opensearch_url}/{SEED_INDEX}/_search"


def seed(api: Api, client: OpenSearch, opensearch_url: str) -> dict[str, Any]:
    """Entities the hooks may substitute for generated ids: a query set with reference answers,
    two search configurations on a small index, a remote search configuration on the same
    index, two imported and one LLM judgment (COMPLETED), a COMPLETED pointwise experiment,
    scheduled once a year. Returns their ids."""
    if not client.indices.exists(index=SEED_INDEX):
        client.indices.create(index=SEED_INDEX, body={"settings": {"number_of_shards": 1}})
    docs = [("p1", "red running shoes"), ("p2", "blue running shoes"), ("p3", "red wool hat"),
            ("p4", "television 55 inch"), ("p5", "garden hose")]
    for doc_id, title in docs:
        client.index(index=SEED_INDEX, id=doc_id, body={"title": title})
    client.indices.refresh(index=SEED_INDEX)

    def ok(reply: Any) -> Any:
        if reply.status != 200:
            raise RuntimeError(f"fuzz: seeding failed: {reply.status} {reply.data[:500]!r}")
        return reply.json

    query_set = ok(api.srw("PUT", "/query_sets", {
        "name": "fuzz seed", "querySetQueries": [
            {"queryText": "red shoes", "referenceAnswer": "red running shoes"},
            {"queryText": "tv", "referenceAnswer": "television"}]}))["query_set_id"]
    configs = [ok(api.srw("PUT", "/search_configurations", {
        "name": f"fuzz seed {n}", "index": SEED_INDEX,
        "query": json.dumps({"query": {"match": {"title": "%SearchText%"}}})}))[
        "search_configuration_id"] for n in (1, 2)]
    remote = ok(api.srw("PUT", "/remote_search_configurations", {
        "name": "fuzz seed remote", "connectionUrl": seed_remote_url(opensearch_url),
        "queryTemplate": json.dumps({"query": {"match": {"title": "%SearchText%"}}}),
        "maxRequestsPerSecond": 1000}))["remote_search_configuration_id"]
    judgments = []
    for scale in ("1", "0.5"):
        judgments.append(ok(api.srw("PUT", "/judgments", {
            "name": "fuzz seed", "type": "IMPORT_JUDGMENT", "judgmentRatings": [
                {"query": "red shoes", "ratings": [{"docId": "p1", "rating": scale},
                                                   {"docId": "p2", "rating": "0"}]},
                {"query": "tv", "ratings": [{"docId": "p4", "rating": scale}]}]}))["judgment_id"])

    def status(path: str) -> str:
        reply = api.srw("GET", path)
        hits = reply.json["hits"]["hits"] if reply.status == 200 else []
        return str(hits[0]["_source"].get("status")) if hits else ""

    llm_judgment = ok(api.srw("PUT", "/judgments", {
        "name": "fuzz seed llm", "type": "LLM_JUDGMENT", "modelId": MODEL_ID,
        "querySetId": query_set, "searchConfigurationList": configs[:1], "size": 3}))[
        "judgment_id"]
    for judgment in [*judgments, llm_judgment]:
        def completed(path: str = f"/judgments/{judgment}") -> bool:
            return status(path) == "COMPLETED"

        wait_for(f"judgment {judgment} COMPLETED", completed)
    experiment = ok(api.srw("PUT", "/experiments", {
        "type": "POINTWISE_EVALUATION", "querySetId": query_set,
        "searchConfigurationList": configs[:1], "judgmentList": judgments[:1], "size": 5}))[
        "experiment_id"]
    wait_for(f"experiment {experiment} COMPLETED",
             lambda: status(f"/experiments/{experiment}") == "COMPLETED")
    ok(api.srw("POST", "/experiments/schedule",
               {"experimentId": experiment, "cronExpression": "0 0 1 1 *"}))
    return {"querySetId": query_set, "searchConfigurationIds": configs,
            "remoteConfigurationIds": [remote], "judgmentIds": judgments,
            "llmJudgmentIds": [llm_judgment], "experimentId": experiment, "index": SEED_INDEX,
            "modelId": MODEL_ID}


def plugin_settings(api: Api) -> dict[str, dict[str, Any]]:
    reply = api.call("GET", "/_cluster/settings", params={"flat_settings": "true"})
    body = reply.json
    return {scope: {k: v for k, v in (body.get(scope) or {}).items()
                    if k.startswith(SETTINGS_PREFIX)} for scope in ("persistent", "transient")}


def restore_settings(api: Api, before: dict[str, dict[str, Any]]) -> None:
    reset = {scope: {SETTINGS_PREFIX + "*": None} for scope in before}
    api.call("PUT", "/_cluster/settings", reset)
    if any(before.values()):
        api.call("PUT", "/_cluster/settings", before)


def clean_up(client: OpenSearch, since: str) -> int:
    """Delete the SRW entities written since ``since`` (an ISO timestamp)."""
    deleted = 0
    for index in ENTITY_INDICES:
        with contextlib.suppress(Exception):  # an index the run never created
            answer = client.delete_by_query(
                index=index, body={"query": {"range": {"timestamp": {"gte": since}}}},
                refresh=True, conflicts="proceed", params={"ignore_unavailable": "true"})
            deleted += int(answer.get("deleted", 0))
    return deleted


def schemathesis_command(url: str, args: argparse.Namespace, extra: list[str]) -> list[str]:
    return [
        sys.executable, "-m", "schemathesis.cli", "run", url + OPENAPI_PATH,
        "--checks", ",".join(CHECKS),
        "--max-examples", str(args.max_examples),
        "--seed", str(args.seed),
        "--workers", str(args.workers),
        "--continue-on-failure",
        "--request-timeout", "60",
        "--generation-database", "none",
        "--suppress-health-check", "too_slow,filter_too_much",
        "--report", "junit", "--report-dir", args.report_dir,
        "--no-color",
        *extra,
    ]


def run_schemathesis(command: list[str], env: dict[str, str], cap: float) -> int:
    print("fuzz: " + " ".join(command), flush=True)
    proc = subprocess.Popen(command, env=env, cwd=REPO, start_new_session=True)
    try:
        return proc.wait(timeout=cap)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGTERM)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(15)
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        print(f"fuzz: schemathesis ran over its cap of {cap:.0f} s; failing the stage "
              "(lower --max-examples or raise --max-seconds)", flush=True)
        return 1


def main(argv: list[str] | None = None) -> int:
    args, extra = parse_args(sys.argv[1:] if argv is None else argv)
    started_at = time.monotonic()
    opensearch_url, redis_url = services.opensearch_url(), services.redis_url()
    client = OpenSearch(hosts=[opensearch_url], timeout=120)
    llm = LLMServer().start()
    models = [{"id": MODEL_ID, "name": "Fuzz judge", "provider": "openai",
               "base_url": llm.openai_base_url, "model": "judge-1", "api_key_env": "FUZZ_LLM_KEY"}]
    queue = f"fuzz-{uuid.uuid4().hex[:8]}"  # a throwaway queue: no other worker takes its jobs
    env = base_env(opensearch_url, redis_url, WORKBENCH_QUEUE=queue,
                   WORKBENCH_MODELS=json.dumps(models), FUZZ_LLM_KEY="sk-fuzz",
                   WORKBENCH_LOG_LEVEL="WARNING", WORKBENCH_LLM_MAX_RETRIES="1")
    # No provider is reachable from here, so no model may be registered on a usable endpoint
    # (using it would answer 502): plain-http endpoints only are trusted (the documents'
    # hosted https examples are refused), and fuzz_hooks.ENDPOINTS meet the address rule.
    env.update(WORKBENCH_MODEL_ENDPOINTS=json.dumps(["^http://.*"]),
               WORKBENCH_MODEL_PRIVATE_ENDPOINTS="false")
    # Remote search configurations may reach the seed index's _search and nothing else: every
    # generated connectionUrl is refused (400) unless it is exactly that one.
    env.update(WORKBENCH_REMOTE_ENDPOINTS=json.dumps([re.escape(seed_remote_url(opensearch_url))]),
               WORKBENCH_REMOTE_PRIVATE_ENDPOINTS="true")
    server: Server | None = None
    worker: Worker | None = None
    rc = 1
    try:
        server = Server(env, workers=2)
        worker = Worker(env, queue=queue)
        api = Api(server.url)
        since = now_iso()
        before = plugin_settings(api)
        seeds = seed(api, client, opensearch_url)
        print(f"fuzz: workbench at {server.url}, worker queue {queue}, seeds {seeds}", flush=True)
        hooks_env = dict(env, SCHEMATHESIS_HOOKS="scripts.fuzz_hooks",
                         FUZZ_SEEDS=json.dumps(seeds), PYTHONPATH=str(REPO))
        Path(args.report_dir).mkdir(parents=True, exist_ok=True)
        rc = run_schemathesis(schemathesis_command(server.url, args, extra), hooks_env,
                              args.max_seconds)
        if not server.alive() or not worker.alive():
            print("fuzz: the workbench server or worker died during the run", flush=True)
            rc = rc or 1
        worker.stop()
        report = Path(args.report_dir)
        (report / "workbench-api.log").write_text(server.log())
        (report / "workbench-worker.log").write_text(worker.log())
        errors = _server_errors(server.log() + worker.log())
        if errors:
            print("fuzz: errors in the workbench's logs (first 5):\n" + errors, flush=True)
        failed_jobs = _job_failures(worker.log())
        if failed_jobs:
            print("fuzz: reasons of the jobs that ended ERROR (some generated input is "
                  "meant to fail there; not a failure of the stage):\n" + failed_jobs, flush=True)
        if not args.keep:
            restore_settings(api, before)
            deleted = clean_up(client, since)
            with contextlib.suppress(Exception):
                client.indices.delete(index=SEED_INDEX)
            print(f"fuzz: restored the SRW settings, deleted {deleted} SRW documents written "
                  "during the run", flush=True)
    finally:
        for proc in (worker, server):
            if proc is not None:
                with contextlib.suppress(Exception):  # tearing down; keep going
                    proc.stop()
        llm.stop()
        services.stop_all()  # containers it started, if any (local services keep running)
    print(f"fuzz: {'FAILED' if rc else 'passed'} in {time.monotonic() - started_at:.0f} s "
          f"(JUnit report and logs in {args.report_dir})", flush=True)
    return rc


def _server_errors(log: str) -> str:
    """The tracebacks the workbench logged (every 5xx it answered leaves one), first five."""
    lines = log.splitlines()
    record = re.compile(r"^(\d{4}-\d\d-\d\d |\S+ - - \[)")  # a log record or access line
    blocks = []
    for start, line in enumerate(lines):
        if "unexpected error on" not in line:
            continue
        end = start + 1
        while end < len(lines) and end - start < 40 and not record.match(lines[end]):
            end += 1
        blocks.append("\n".join(lines[start:end]))
    return "\n".join(blocks[:5])


def _job_failures(log: str) -> str:
    """Distinct reasons of jobs that failed, with counts (ids and numbers masked)."""
    reasons: dict[str, int] = {}
    for line in log.splitlines():
        if "workbench.jobs.base: job " not in line or " failed: " not in line:
            continue
        reason = line.split(" failed: ", 1)[1]
        reason = re.sub(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}", "<id>",
                        reason)
        reason = re.sub(r"\[[^\]]*\]", "[...]", reason)[:200]
        reasons[reason] = reasons.get(reason, 0) + 1
    return "\n".join(f"  {count:4d} x {reason}" for reason, count in
                     sorted(reasons.items(), key=lambda item: -item[1]))


if __name__ == "__main__":
    sys.exit(main())
