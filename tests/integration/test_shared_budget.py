"""``SharedBudget`` on the real Redis makes the decisions the in-process ``Budget`` makes, and two
of them on one key (two worker processes of one split judgment) share one limit."""

from __future__ import annotations

import random
import uuid

import pytest
import redis

from workbench.judgments.llm.cost import Budget, Reservation, SharedBudget
from workbench.llm.pricing import Pricing

PRICING = Pricing(2.5, 10.0)


@pytest.fixture
def r(redis_url: str) -> redis.Redis:
    return redis.Redis.from_url(redis_url)


def key() -> str:
    return f"wb:budget:test:{uuid.uuid4().hex}"


@pytest.mark.parametrize("limits", [(5_000, None), (None, 0.02), (8_000, 0.015)],
                         ids=["maxTokens", "maxCost", "both"])
def test_the_same_calls_get_the_same_answers(r: redis.Redis,
                                             limits: tuple[int | None, float | None]) -> None:
    rng = random.Random(20261124)
    local = Budget(*limits, PRICING)
    shared = SharedBudget(r, key(), *limits, PRICING)
    held: list[tuple[Reservation, Reservation]] = []
    for _ in range(200):
        if held and rng.random() < 0.5:
            mine, theirs = held.pop(rng.randrange(len(held)))
            spent_in, spent_out = rng.randint(0, 600), rng.randint(0, 150)
            local.settle(mine, spent_in, spent_out)
            shared.settle(theirs, spent_in, spent_out)
            continue
        wanted = (rng.randint(100, 700), rng.randint(10, 120))
        mine_or_none, theirs_or_none = local.reserve(*wanted), shared.reserve(*wanted)
        assert (mine_or_none is None) == (theirs_or_none is None)
        if mine_or_none is not None and theirs_or_none is not None:
            held.append((mine_or_none, theirs_or_none))
    assert local.reached and shared.reached
    assert shared.reason == local.reason


def test_a_cost_exactly_at_the_limit_is_allowed_as_in_process(r: redis.Redis) -> None:
    limit = PRICING.cost(400, 100)  # 0.002
    assert Budget(None, limit, PRICING).reserve(400, 100) is not None
    assert SharedBudget(r, key(), None, limit, PRICING).reserve(400, 100) is not None
    assert SharedBudget(r, key(), None, limit, PRICING).reserve(400, 101) is None
    assert SharedBudget(r, key(), None, limit, None).reserve(1, 0) is None  # no prices: refused


def test_two_processes_share_one_limit(r: redis.Redis) -> None:
    name = key()
    one = SharedBudget(r, name, 1_000, None, None)
    other = SharedBudget(r, name, 1_000, None, None)
    first = one.reserve(400, 100)
    assert first is not None and other.reserve(400, 100) is not None  # 1,000 held in all
    assert one.reserve(1, 0) is None  # the first refusal closes it for both
    assert other.reserve(1, 0) is None and other.reached
    assert other.reason == "budget reached: maxTokens [1000]"
    one.settle(first, 300, 50)
    stored = {str(k, "utf-8") if isinstance(k, bytes) else k: v
              for k, v in r.hgetall(name).items()}
    assert stored.pop("closed") == b"maxTokens"
    assert {k: int(v) for k, v in stored.items()} == {
        "heldIn": 400, "heldOut": 100, "spentIn": 300, "spentOut": 50}
    assert 0 < r.ttl(name) <= 24 * 3600
