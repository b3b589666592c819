"""Deadlines of the routes answered while the caller waits (``llm/deadline.py``): a model that
never answers gets the caller a 504 within ``WORKBENCH_SYNC_DEADLINE``, and neither it nor a
caller that hung up is called again."""

from __future__ import annotations

import json
import socket
import time
import uuid
from collections.abc import Iterator
from urllib.parse import urlsplit

import pytest

from tests.conftest import JUDGE_MODEL
from tests.support.api import Api
from tests.support.processes import Server
from workbench.bench.llm_server import LLMServer

DEADLINE = 3
HITS = [{"id": "r1", "title": "red running shoes"}, {"id": "r2", "title": "leather wallet"}]
# Query texts of this run only, so that no grade comes from the judgment cache.
RUN = uuid.uuid4().hex[:8]
EVALUATE = {"queryText": f"red shoes {RUN}", "hits": HITS, "judge": "llm",
            "modelId": JUDGE_MODEL}


@pytest.fixture(scope="module")
def late(env: dict[str, str]) -> Iterator[Api]:
    """A server whose synchronous routes have 3 seconds (and each LLM call up to 60)."""
    server = Server(dict(env, WORKBENCH_SYNC_DEADLINE=str(DEADLINE), WORKBENCH_LLM_TIMEOUT="60"),
                    workers=1)
    try:
        yield Api(server.url)
    finally:
        server.stop()


def reason(route: str, answered: int = 0, progress: str = "") -> str:
    calls = f"{answered} call{'' if answered == 1 else 's'}"
    text = (f"{route} stopped calling model [{JUDGE_MODEL}]: it did not finish within its "
            f"deadline of {DEADLINE}s (WORKBENCH_SYNC_DEADLINE); the model had answered {calls}")
    return text + (f"; {progress}" if progress else "")


def quiet_after(llm: LLMServer, since: float, calls: int) -> None:
    """The model received ``calls`` calls in all, none of them after ``since`` (monotonic)."""
    time.sleep(DEADLINE + 1)  # room for any call still to come
    assert len(llm.requests) == calls, [r.received - since for r in llm.requests]
    assert all(r.received <= since for r in llm.requests)


def test_evaluate_with_a_model_that_never_answers_is_a_504_within_the_deadline(
        late: Api, llm: LLMServer) -> None:
    llm.slow(600, times=20)
    started = time.monotonic()
    reply = late.srw("POST", "/_evaluate", EVALUATE)
    answered_at = time.monotonic()
    assert answered_at - started < DEADLINE + 1.5
    reply.error(504, reason("_evaluate"), "timeout_exception")
    quiet_after(llm, answered_at, 1)  # the one call in flight; no retry, no other rung


def test_predict_and_a_batch_stop_at_the_deadline_too(late: Api, llm: LLMServer) -> None:
    llm.slow(600, times=20)
    started = time.monotonic()
    reply = late.call("POST", f"/_plugins/_ml/models/{JUDGE_MODEL}/_predict", {
        "parameters": {"messages": [{"role": "user", "content": "hello"}]}})
    assert time.monotonic() - started < DEADLINE + 1.5
    reply.error(504, reason("_predict"), "timeout_exception")

    llm.reset()
    # Once the model's structured-output mode is known, no call waits for another's probe
    # (llm/structured.py): the batch's two calls go out together.
    assert late.srw("POST", "/_evaluate", {**EVALUATE, "queryText": f"primer {RUN}"}).status == 200
    llm.reset()
    llm.latency = 0.2
    llm.slow(600, times=1)  # the first entry's call hangs; the second's answers
    second = {**EVALUATE, "queryText": f"wallet {RUN}"}
    started = time.monotonic()
    reply = late.srw("POST", "/_evaluate/_batch", {"queries": [EVALUATE, second]})
    answered_at = time.monotonic()
    assert answered_at - started < DEADLINE + 1.5
    # Which entry got the hanging call depends on which call came first.
    assert reply.status == 504, reply.data
    assert reply.json["error"]["reason"] == reason(
        "_evaluate/_batch", 1, "1 of 2 evaluations were complete")
    quiet_after(llm, answered_at, 2)


def test_a_caller_that_hangs_up_is_not_called_for_again(late: Api, llm: LLMServer) -> None:
    """Every call waits 1 s and fails with a 503 that would be retried 4 times; the caller
    hangs up during the first, so the first is the only one the model receives."""
    llm.latency = 1.0
    llm.fail(503, times=10)
    address = urlsplit(late.base)
    body = json.dumps(EVALUATE).encode()
    with socket.create_connection((address.hostname, address.port)) as client:
        client.sendall(b"POST /_plugins/_search_relevance/_evaluate HTTP/1.1\r\n"
                       b"Host: workbench\r\nContent-Type: application/json\r\n"
                       b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body)
        time.sleep(0.5)
    hung_up = time.monotonic()
    time.sleep(DEADLINE + 2)
    assert len(llm.requests) == 1, [r.received - hung_up for r in llm.requests]
