"""A remote search configuration's limits, held across every API process and worker through
Redis: ``maxRequestsPerSecond`` (the rate limiter the LLM calls share, ``llm.rate_limit``, under
the id ``remote:<configId>``) and ``maxConcurrentRequests`` (``Slots``, below).

The slots are a sorted set per configuration: each search in flight is a member whose score is
when its lease ends. One Lua script drops the expired members and adds one while fewer than the
limit remain, so a process that died mid-search gives its slot back when its lease ends (the
read timeout plus ``LEASE_MARGIN``), and a slot is released in ``finally`` otherwise.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress

import redis

from workbench.config import Config
from workbench.llm.rate_limit import Limits, RateLimiter, shared_redis
from workbench.redis_keys import remote_slots_key

#: seconds a slot's lease outlives the read timeout
LEASE_MARGIN = 10.0
#: seconds between two tries for a slot while every one is taken
POLL = 0.02

# KEYS: the slots. ARGV: member, lease seconds, limit. Answers 1 when the member took a slot.
_TAKE = """
local now_parts = redis.call('TIME')
local now = tonumber(now_parts[1]) + tonumber(now_parts[2]) / 1000000
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
if redis.call('ZCARD', KEYS[1]) < tonumber(ARGV[3]) then
  redis.call('ZADD', KEYS[1], now + tonumber(ARGV[2]), ARGV[1])
  redis.call('PEXPIRE', KEYS[1], math.ceil(tonumber(ARGV[2]) * 1000) + 1000)
  return 1
end
return 0
"""


def rate_limiter(config: Config, config_id: str, per_second: float) -> RateLimiter:
    """The shared rate limit of a configuration (``per_second`` may be a fraction)."""
    return RateLimiter(shared_redis(config), f"remote:{config_id}",
                       Limits(requests_per_minute=per_second * 60.0))


class Slots:
    """``limit`` searches of one configuration at once, across every process."""

    def __init__(self, client: redis.Redis, config_id: str, limit: int, lease: float,
                 sleep: Callable[[float], None] = time.sleep) -> None:
        self.client, self.key, self.limit, self.lease = client, remote_slots_key(config_id), \
            limit, lease
        self._take = client.register_script(_TAKE)
        self._sleep = sleep

    @contextmanager
    def slot(self) -> Iterator[None]:
        """Waits for a free slot and holds it for the block."""
        member = uuid.uuid4().hex
        while not int(self._take(keys=[self.key], args=[member, self.lease, self.limit])):
            self._sleep(POLL)
        try:
            yield
        finally:
            with suppress(redis.RedisError):  # else the lease ends it
                self.client.zrem(self.key, member)


def slots(config: Config, config_id: str, limit: int) -> Slots:
    return Slots(shared_redis(config), config_id, limit, config.remote_timeout + LEASE_MARGIN)
