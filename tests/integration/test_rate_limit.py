"""A model's rate limit, shared through the real Redis by separate processes, and honoured by a
model registered with ``rateLimit`` together with the provider's Retry-After."""

from __future__ import annotations

import multiprocessing as mp
import time
import uuid
from typing import Any

import pytest
import redis

from tests.support.api import Api
from workbench.bench.llm_server import LLMServer
from workbench.llm.rate_limit import PREFIX, Limits, RateLimiter

PROCESSES = 4


def _starts(url: str, model: str, limits: Limits, tokens: int, until: float,
            out: Any) -> None:
    """One process: acquire as fast as the limiter allows until ``until``; report start times."""
    limiter = RateLimiter(redis.Redis.from_url(url), model, limits)
    starts = []
    while True:
        limiter.acquire(tokens)
        now = time.time()
        if now >= until:
            break
        starts.append(now)
    out.put(starts)


def run_processes(url: str, limits: Limits, tokens: int, seconds: float) -> list[float]:
    model = f"rl-{uuid.uuid4().hex[:8]}"
    context = mp.get_context("spawn")  # fresh interpreters: nothing shared but Redis
    out = context.Queue()
    until = time.time() + seconds + 2.0  # spawn start-up takes about a second
    procs = [context.Process(target=_starts, args=(url, model, limits, tokens, until, out))
             for _ in range(PROCESSES)]
    for proc in procs:
        proc.start()
    starts = sorted(s for _ in procs for s in out.get(timeout=seconds + 30))
    for proc in procs:
        proc.join(10)
    return starts


def window_count(starts: list[float], seconds: float) -> int:
    """Calls started in the last ``seconds`` of the run (every process is running by then)."""
    end = starts[-1]
    return sum(1 for s in starts if s > end - seconds)


def test_four_processes_share_a_request_limit(redis_url: str) -> None:
    rpm, seconds = 600, 4.0  # 10 a second between all four
    starts = run_processes(redis_url, Limits(requests_per_minute=rpm), 0, seconds)
    count = window_count(starts, seconds)
    allowed = rpm / 60 * seconds
    assert 0.95 * allowed <= count <= allowed + 2, (count, allowed)
    # Evenly spaced: over any second of the run, no more than that second's share (+2).
    for begin in starts[len(starts) // 2:]:
        assert sum(1 for s in starts if begin <= s < begin + 1.0) <= rpm / 60 + 2


def test_four_processes_share_a_token_limit(redis_url: str) -> None:
    tpm, tokens, seconds = 60_000, 100, 3.0  # 1,000 tokens a second: 10 calls of 100
    starts = run_processes(redis_url, Limits(tokens_per_minute=tpm), tokens, seconds)
    count = window_count(starts, seconds)
    allowed = tpm / 60 / tokens * seconds
    assert 0.95 * allowed <= count <= allowed + 2, (count, allowed)


def test_a_pause_holds_every_process_and_debt_delays_the_next_call(redis_url: str) -> None:
    client = redis.Redis.from_url(redis_url)
    model = f"rl-{uuid.uuid4().hex[:8]}"
    one = RateLimiter(client, model, Limits(tokens_per_minute=6000))  # 100 tokens a second
    other = RateLimiter(redis.Redis.from_url(redis_url), model, one.limits)
    one.pause(0.6)
    started = time.monotonic()
    other.acquire(10)
    assert time.monotonic() - started >= 0.55
    one.settle(50)  # the call used 50 tokens more than it reserved: half a second owed
    started = time.monotonic()
    other.acquire(1)
    assert time.monotonic() - started >= 0.45


def test_a_model_with_a_rate_limit_spaces_its_calls_and_honours_retry_after(
        api: Api, llm: LLMServer, redis_url: str) -> None:
    model = f"limited-{uuid.uuid4().hex[:8]}"
    created = api.srw("PUT", "/models", {
        "id": model, "name": "Limited judge", "provider": "openai",
        "endpoint": llm.openai_base_url, "model": "judge-1", "apiKeyEnv": "TEST_LLM_KEY",
        "rateLimit": {"requestsPerMinute": 120}})  # one call every half second
    assert created.status == 200, created.data
    try:
        assert api.srw("GET", f"/models/{model}").json["rateLimit"] == {"requestsPerMinute": 120}

        def evaluate() -> dict[str, Any]:
            reply = api.srw("POST", "/_evaluate", {
                "queryText": "wallet", "judge": "llm", "modelId": model,
                "referenceAnswer": f"run {uuid.uuid4().hex}",  # never from the cache
                "hits": [{"id": "w", "title": "leather wallet"}]})
            assert reply.status == 200, reply.data
            return reply.json  # type: ignore[no-any-return]

        started = time.monotonic()
        for _ in range(3):
            evaluate()
        assert time.monotonic() - started >= 1.0  # the third call waited for its turn
        assert llm.calls == 3

        llm.fail(429, times=1, retry_after=1.5)
        started = time.monotonic()
        answer = evaluate()
        assert answer["usage"]["llmCalls"] == 1
        assert time.monotonic() - started >= 1.5
        # The pause was shared through Redis, for every process using this model.
        assert redis.Redis.from_url(redis_url).exists(PREFIX + model + ":pause")
    finally:
        api.srw("DELETE", f"/models/{model}")


@pytest.mark.parametrize("limit, reason", [
    ({"requestsPerMinute": 0}, 'field "rateLimit.requestsPerMinute" must be an integer from 1 '
                               'to 1000000000'),
    ({"perSecond": 3}, 'field "rateLimit.perSecond" is not a limit (known: '
                       "['requestsPerMinute', 'tokensPerMinute'])"),
    (5, 'field "rateLimit" must be an object such as {"requestsPerMinute": 500, '
        '"tokensPerMinute": 200000}'),
])
def test_a_bad_rate_limit_is_a_400_naming_it(api: Api, llm: LLMServer, limit: Any,
                                            reason: str) -> None:
    reply = api.srw("PUT", "/models", {
        "id": f"bad-{uuid.uuid4().hex[:6]}", "provider": "openai", "model": "m",
        "endpoint": llm.openai_base_url, "rateLimit": limit})
    assert reply.status == 400, reply.data
    assert reason in reply.reason
