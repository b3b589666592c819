"""A large judgment split over two real workers (``jobs.fanout``): the same ratings as one worker
gives, both workers doing a share, a unit lost with a killed worker done again by the other, and
a cancel that stops every worker.

The stand-in LLM's default answer is a deterministic word-overlap judge, so the judgment the
session's worker makes unsplit (its threshold is the default 100 queries) is the reference.
"""

from __future__ import annotations

import contextlib
import re
import signal
import time
import uuid
from collections.abc import Iterator
from typing import Any

import psutil
import pytest
import redis
from opensearchpy import OpenSearch

from tests.conftest import JUDGE_MODEL
from tests.support import waiting
from tests.support.api import Api
from tests.support.processes import Server, Worker, helper_units, logs_since
from tests.support.small_job import item_catalogue
from workbench.bench.llm_server import LLMServer

QUERIES = 12
DOCS = 3
PARENT_DONE = re.compile(r"Task workbench\.judgments\.generate\[[^\]]+\] succeeded")


@pytest.fixture(scope="module")
def products(api: Api, direct: OpenSearch) -> Iterator[dict[str, Any]]:
    index = f"test-split-{uuid.uuid4().hex[:6]}"
    yield item_catalogue(direct, api, index, QUERIES, DOCS)
    direct.indices.delete(index=index)


@pytest.fixture(scope="module")
def crew(env: dict[str, str]) -> Iterator[dict[str, Any]]:
    """An API server and two workers (one job at a time each) on a queue of their own, splitting
    any judgment of 4 queries or more; units leased for 3 s."""
    crew_env = dict(env, WORKBENCH_QUEUE=f"split-{uuid.uuid4().hex[:8]}",
                    WORKBENCH_SPLIT_QUERIES="4", WORKBENCH_LEASE_SECONDS="3",
                    WORKBENCH_LLM_CONCURRENCY="2")
    server = Server(crew_env)
    workers = [Worker(crew_env, extra=["--concurrency", "1"]) for _ in range(2)]
    yield {"api": Api(server.url), "workers": workers, "env": crew_env}
    for worker in workers:
        if worker.alive():
            worker.stop()
    server.stop()


def body(products: dict[str, Any], **fields: Any) -> dict[str, Any]:
    return {"name": f"split-{uuid.uuid4().hex[:8]}", "type": "LLM_JUDGMENT",
            "modelId": JUDGE_MODEL, "querySetId": products["querySetId"],
            "searchConfigurationList": [products["config"]], "size": DOCS,
            "contextFields": ["title"], "overwriteCache": True, **fields}


def start(api: Api, payload: dict[str, Any]) -> str:
    reply = api.srw("PUT", "/judgments", payload)
    assert reply.status == 200, reply.data
    return str(reply.json["judgment_id"])


def finished(api: Api, judgment_id: str, timeout: float = 120) -> dict[str, Any]:
    return waiting.finished(api, f"/judgments/{judgment_id}", timeout)


def test_a_split_judgment_equals_the_unsplit_one_and_both_workers_share_it(
        crew: dict[str, Any], api: Api, worker: Worker, products: dict[str, Any],
        llm: LLMServer) -> None:
    llm.latency = 0.2
    reference = finished(api, start(api, body(products)))  # the session's worker: not split
    assert reference["status"] == "COMPLETED", reference
    calls = llm.calls
    logs = [w.log() for w in crew["workers"]]
    done = finished(crew["api"], start(crew["api"], body(products)))
    assert done["status"] == "COMPLETED", done
    assert done["judgmentRatings"] == reference["judgmentRatings"]
    assert len(done["judgmentRatings"]) == QUERIES
    assert llm.calls - calls == QUERIES  # one call per query, none twice
    usage, expected = done["metadata"]["usage"], reference["metadata"]["usage"]
    for field in ("llmCalls", "inputTokens", "outputTokens", "totalTokens"):
        assert usage[field] == expected[field], field
    for field in ("totalQueries", "successfulQueries", "failedQueries"):
        assert done["metadata"][field] == reference["metadata"][field]
    # One worker ran the job (and units), the other a helper that did at least one unit.
    new = logs_since(crew["workers"], logs, PARENT_DONE)
    parents = [bool(PARENT_DONE.search(text)) for text in new]
    helped = [helper_units(text) for text in new]
    assert parents.count(True) == 1, new
    assert helped[parents.index(False)] >= 1, (helped, new)


def _held_by(r: redis.Redis, judgment_id: str, pids: set[int]) -> bool:
    """A unit of the judgment's run is held by one of ``pids`` (the holder is host:pid:token)."""
    for key in r.scan_iter(f"wb:fan:llm_judgment:{judgment_id}:*:taken"):
        for holder in r.hvals(key):
            if int(_text(holder).split(" ")[0].split(":")[-2]) in pids:
                return True
    return False


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value


def _parent_pid(r: redis.Redis, judgment_id: str) -> int | None:
    """The process holding the judgment job's own lease (``jobs.leases``)."""
    value = r.get(f"workbench:lease:workbench.judgments.generate:{judgment_id}")
    return int(_text(value).split(":")[-2]) if value else None


def _tree(worker: Worker) -> set[int]:
    return {worker.pid} | {c.pid for c in psutil.Process(worker.pid).children(True)}


def _kill(pids: set[int]) -> None:
    for pid in pids:
        with contextlib.suppress(psutil.NoSuchProcess):
            psutil.Process(pid).send_signal(signal.SIGKILL)


def _replace(crew: dict[str, Any], worker: Worker) -> None:
    crew["workers"].remove(worker)
    crew["workers"].append(Worker(crew["env"], extra=["--concurrency", "1"]))


def _all_rated(done: dict[str, Any]) -> bool:
    return done["status"] == "COMPLETED" and len(done["judgmentRatings"]) == QUERIES and all(
        len(e["ratings"]) == DOCS and "failures" not in e for e in done["judgmentRatings"])


def test_units_of_a_killed_helper_are_done_again_by_the_parent(
        crew: dict[str, Any], redis_url: str, products: dict[str, Any],
        llm: LLMServer) -> None:
    """SIGKILL of the helper's worker while it holds units mid-call: after their 3 s lease the
    parent takes them again, and the judgment completes with every query rated."""
    llm.latency = 1.0
    r = redis.Redis.from_url(redis_url)
    judgment_id = start(crew["api"], body(products))
    victim = None
    deadline = time.monotonic() + 30
    while victim is None and time.monotonic() < deadline:
        parent = _parent_pid(r, judgment_id)
        for worker in crew["workers"]:
            tree = _tree(worker)
            if parent is not None and parent not in tree and _held_by(r, judgment_id, tree):
                victim = worker
        time.sleep(0.05)
    assert victim is not None, "no helper took a unit"
    _kill(_tree(victim))
    done = finished(crew["api"], judgment_id, timeout=120)
    assert _all_rated(done), done
    assert done["metadata"]["usage"]["llmCalls"] >= QUERIES
    _replace(crew, victim)


def test_a_killed_parent_is_run_again_and_keeps_the_units_already_done(
        crew: dict[str, Any], redis_url: str, products: dict[str, Any],
        llm: LLMServer) -> None:
    """SIGKILL of the worker running the job itself, once some units are done: the lease
    sweeper queues the job again, the new run finds the same units (the same work names the
    same run) and asks the model only about those not done."""
    llm.latency = 1.5  # a unit takes a while: the kill comes while units remain, not after
    r = redis.Redis.from_url(redis_url)
    calls = llm.calls
    judgment_id = start(crew["api"], body(products))
    deadline = time.monotonic() + 30
    parent = None
    while time.monotonic() < deadline:
        parent = _parent_pid(r, judgment_id)
        done_units = sum(r.hlen(k) for k in
                         r.scan_iter(f"wb:fan:llm_judgment:{judgment_id}:*:done"))
        if parent is not None and done_units >= 4:
            break
        time.sleep(0.05)
    victim = next(w for w in crew["workers"] if parent in _tree(w))
    _kill(_tree(victim))
    llm.latency = 0.0
    # The kill came before the run was merged (its units are still in Redis).
    assert list(r.scan_iter(f"wb:fan:llm_judgment:{judgment_id}:*:units")), done_units
    _replace(crew, victim)
    done = finished(crew["api"], judgment_id, timeout=180)
    assert _all_rated(done), done
    # Units finished before the kill are not asked again (a few in flight may be).
    assert llm.calls - calls < QUERIES + 4


def test_cancel_stops_every_worker(crew: dict[str, Any], products: dict[str, Any],
                                   llm: LLMServer) -> None:
    llm.latency = 1.0
    api = crew["api"]
    before = llm.calls
    judgment_id = start(api, body(products))
    deadline = time.monotonic() + 30
    while llm.calls < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    reply = api.srw("POST", f"/judgments/{judgment_id}/_cancel")
    assert reply.status == 200, reply.data
    done = finished(api, judgment_id)
    assert done["status"] == "ERROR"
    assert done["metadata"]["error"] == "cancelled by the user"
    calls = llm.calls
    assert calls - before < QUERIES  # not every query was asked
    # The units in flight on both workers finished before the job ended: their calls are all
    # in the progress it kept.
    assert done["metadata"]["progress"]["usage"]["llmCalls"] == calls - before
    # ... and in its usage, tokens too: every unit done on either worker was paid for.
    usage = done["metadata"]["usage"]
    assert usage["llmCalls"] == calls - before
    assert usage["inputTokens"] == done["metadata"]["progress"]["usage"]["inputTokens"] > 0
    time.sleep(2.5)
    assert llm.calls == calls  # no worker kept calling


def test_a_split_reference_judgment_equals_the_unsplit_one(
        crew: dict[str, Any], api: Api, worker: Worker, products: dict[str, Any]) -> None:
    """token_overlap over 12 queries with reference answers, in units of 10 queries on two
    workers: the same entries and counts as one worker's."""
    query_set = api.srw("PUT", "/query_sets", {"name": "split ref", "querySetQueries": [
        {"queryText": f"item{q} red shoe", "referenceAnswer": f"item{q} blue hat {q % 3}"}
        for q in range(QUERIES)]}).json["query_set_id"]
    payload = {"type": "REFERENCE_JUDGMENT", "judge": "token_overlap",
               "querySetId": query_set, "searchConfigurationList": [products["config"]],
               "size": DOCS, "contextFields": ["title"]}
    reference = finished(api, start(api, {**payload, "name": "unsplit"}))
    judgment_id = start(crew["api"], {**payload, "name": "split"})
    done = finished(crew["api"], judgment_id)
    assert done["status"] == reference["status"] == "COMPLETED", done
    assert any(f"reference_judgment {judgment_id} split into 2 units" in w.log()
               for w in crew["workers"])
    assert done["judgmentRatings"] == reference["judgmentRatings"]
    assert len(done["judgmentRatings"]) == QUERIES
    ratings = [r["rating"] for e in done["judgmentRatings"] for r in e["ratings"]]
    assert "1.0" in ratings and "0.0" in ratings  # a comparison that can tell them apart
    for field in ("totalQueries", "successfulQueries", "failedQueries"):
        assert done["metadata"][field] == reference["metadata"][field], field


def test_a_retry_of_many_queries_is_split_too(crew: dict[str, Any], products: dict[str, Any],
                                              llm: LLMServer) -> None:
    """Every query's answer leaves a hit unrated; ``_retry`` asks again about the 12 queries'
    failures split over both workers, and every failure is rated."""
    api = crew["api"]
    llm.partial(ids=[f"q{q}-d2" for q in range(QUERIES)], times=QUERIES)
    judgment_id = start(api, body(products))
    done = finished(api, judgment_id)
    assert done["status"] == "COMPLETED", done
    assert sum(1 for e in done["judgmentRatings"] if "failures" in e) == QUERIES
    # the failures every worker met are counted as the unsplit job counts them
    assert (done["metadata"]["successfulQueries"], done["metadata"]["failedQueries"]) == (
        0, QUERIES)
    assert done["metadata"]["lastFailureReason"] == "the model did not rate this document"
    logs = [w.log() for w in crew["workers"]]
    llm.latency = 0.5
    calls = llm.calls
    assert api.srw("POST", f"/judgments/{judgment_id}/_retry").status == 200
    again = finished(api, judgment_id)
    assert _all_rated(again), again
    assert (again["metadata"]["successfulQueries"], again["metadata"]["failedQueries"]) == (
        QUERIES, 0)
    assert llm.calls - calls == QUERIES
    assert again["metadata"]["usage"]["llmCalls"] == 2 * QUERIES
    new = [w.log()[len(old):] for w, old in zip(crew["workers"], logs, strict=True)]
    assert any(f"llm_judgment {judgment_id} split into {QUERIES} units" in t for t in new), new


def test_a_budget_holds_for_every_worker_of_a_split_judgment(
        crew: dict[str, Any], products: dict[str, Any], llm: LLMServer) -> None:
    """``maxTokens`` at 55 % of the estimate, the judgment split over two workers: the budget
    kept in Redis stops both, what they spent together stays within it (the stand-in reports
    exactly what is reserved), and the unrated pairs carry the budget's reason."""
    api = crew["api"]
    planned = api.srw("POST", "/judgments/_estimate", body(products)).json
    limit = int(planned["totalTokens"] * 0.55)
    llm.latency = 0.5
    logs = [w.log() for w in crew["workers"]]
    calls = llm.calls
    done = finished(api, start(api, body(products, maxTokens=limit)))
    metadata, usage = done["metadata"], done["metadata"]["usage"]
    reason = f"budget reached: maxTokens [{limit}]"
    assert done["status"] == "COMPLETED", metadata
    assert metadata["budgetReached"] is True and metadata["lastFailureReason"] == reason
    assert 0 < usage["llmCalls"] == llm.calls - calls < QUERIES
    assert usage["totalTokens"] <= limit
    rated = {(e["query"], r["docId"]) for e in done["judgmentRatings"] for r in e["ratings"]}
    failed = [(e["query"], f) for e in done["judgmentRatings"] for f in e.get("failures", [])]
    assert len(rated) + len(failed) == QUERIES * DOCS and rated and failed
    assert all(f["reason"] == reason for _, f in failed)
    new = [w.log()[len(old):] for w, old in zip(crew["workers"], logs, strict=True)]
    assert sum(helper_units(text) for text in new) >= 1, new  # the helper spent too
