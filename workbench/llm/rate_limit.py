"""A model's rate limit (requests and tokens per minute), shared by every process through Redis.

Each limit is kept as a theoretical arrival time (GCRA): a call may start once the calls before
it have been paid for, and it then moves the time on by its cost (one request is
``60 / requestsPerMinute`` seconds; a token ``60 / tokensPerMinute``). A call that starts late
(a busy machine wakes a process some milliseconds after its turn) is counted from its turn, up
to one cost late, so waking late does not slow the schedule down; time nobody used is never
saved up. Over any window of W seconds at most ``W / interval + 2`` calls start. Every API
process and worker reads and moves the same times in one Lua script, on Redis's clock, so N
workers together keep to ``requestsPerMinute`` whatever N is.

Tokens: a call reserves the tokens of its prompt (estimated before it is sent) and pays its
answer's tokens, and any difference from the estimate, once the provider has reported them:
later calls wait for that debt. A provider's ``Retry-After`` (a 429 or 503) pauses the model for
every process until that time. Every attempt of a retried call is a request of its own.
"""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

import redis

from workbench import redis_client
from workbench.config import Config
from workbench.llm.base import LLMError, Transient
from workbench.redis_keys import RATE_LIMIT_PREFIX, rate_limit_keys

log = logging.getLogger(__name__)
T = TypeVar("T")

#: the start of every rate-limit key (``workbench.redis_keys.rate_limit_keys``)
PREFIX = RATE_LIMIT_PREFIX
# Waits are taken in slices so a long pause set by another process is re-read, and cut short
# when that process's pause is lifted or shortened.
MAX_SLICE = 1.0

# KEYS: request time, token time, pause-until. ARGV: seconds per request (0: no limit), seconds
# per token (0: no limit), tokens to reserve. Answers the seconds to wait (as a string), "0"
# once reserved. Times are Redis's own clock, shared by every caller.
_ACQUIRE = """
local now_parts = redis.call('TIME')
local now = tonumber(now_parts[1]) + tonumber(now_parts[2]) / 1000000
local per_request = tonumber(ARGV[1])
local per_token = tonumber(ARGV[2])
local tokens = tonumber(ARGV[3])
local wait = 0
local pause = tonumber(redis.call('GET', KEYS[3]) or '0')
if pause > now then wait = pause - now end
local req = tonumber(redis.call('GET', KEYS[1]) or '0')
if per_request > 0 and req - now > wait then wait = req - now end
local tok = tonumber(redis.call('GET', KEYS[2]) or '0')
if per_token > 0 and tok - now > wait then wait = tok - now end
if wait > 0 then return tostring(wait) end
local function after(at, cost)
  -- a start at most one cost after its turn is counted from its turn; later ones (the limit
  -- was idle) from now: idle time is never saved up
  if at > 0 and now - at <= cost then return at + cost end
  return math.max(at, now) + cost
end
if per_request > 0 then
  local next_req = after(req, per_request)
  redis.call('SET', KEYS[1], tostring(next_req), 'PX', math.ceil((next_req - now) * 1000) + 60000)
end
if per_token > 0 and tokens > 0 then
  local next_tok = after(tok, tokens * per_token)
  redis.call('SET', KEYS[2], tostring(next_tok), 'PX', math.ceil((next_tok - now) * 1000) + 60000)
end
return '0'
"""

# KEYS: token time. ARGV: seconds per token, tokens to add (negative: give back). The time is
# not moved back before now: tokens not used by a call that is over are simply not owed.
_SETTLE = """
local now_parts = redis.call('TIME')
local now = tonumber(now_parts[1]) + tonumber(now_parts[2]) / 1000000
local tok = tonumber(redis.call('GET', KEYS[1]) or '0')
local next_tok = math.max(math.max(tok, now) + tonumber(ARGV[2]) * tonumber(ARGV[1]), now)
redis.call('SET', KEYS[1], tostring(next_tok), 'PX', math.ceil((next_tok - now) * 1000) + 60000)
return tostring(next_tok - now)
"""

# KEYS: pause-until. ARGV: seconds. Keeps the later of the two pauses.
_PAUSE = """
local now_parts = redis.call('TIME')
local now = tonumber(now_parts[1]) + tonumber(now_parts[2]) / 1000000
local until_ = now + tonumber(ARGV[1])
local current = tonumber(redis.call('GET', KEYS[1]) or '0')
if current < until_ then
  redis.call('SET', KEYS[1], tostring(until_), 'PX', math.ceil(tonumber(ARGV[1]) * 1000) + 1000)
end
return tostring(until_ - now)
"""


def shared_redis(config: Config) -> redis.Redis:
    """One client (and connection pool) per Redis setting in this process (redis-py's pool opens
    new connections in a forked child, so a client made before a fork stays usable)."""
    return _shared_redis(config.redis_url, config.redis_master_name,
                         config.redis_sentinel_password)


@functools.cache
def _shared_redis(url: str, master_name: str | None,
                  sentinel_password: str | None) -> redis.Redis:
    return redis_client.connect_url(url, master_name=master_name,
                                    sentinel_password=sentinel_password, socket_timeout=5,
                                    socket_connect_timeout=5)


@dataclass(frozen=True)
class Limits:
    """A model's ``rateLimit``: either may be None (no limit of that kind)."""

    requests_per_minute: float | None = None  # a float: a remote's 0.1 per second is 6
    tokens_per_minute: int | None = None

    def __bool__(self) -> bool:
        return bool(self.requests_per_minute or self.tokens_per_minute)


class RateLimiter:
    """The shared limits of one model id. Thread- and process-safe: all state is in Redis."""

    def __init__(self, client: redis.Redis, model_id: str, limits: Limits,
                 sleep: Callable[[float], None] = time.sleep) -> None:
        self.client = client
        self.model_id = model_id
        self.limits = limits
        self._sleep = sleep
        self._keys = rate_limit_keys(model_id)
        self._acquire = client.register_script(_ACQUIRE)
        self._settle = client.register_script(_SETTLE)
        self._pause = client.register_script(_PAUSE)
        self._per_request = 60.0 / limits.requests_per_minute if limits.requests_per_minute \
            else 0.0
        self._per_token = 60.0 / limits.tokens_per_minute if limits.tokens_per_minute else 0.0

    def acquire(self, tokens: int) -> float:
        """Waits until one more request of ``tokens`` prompt tokens may start, reserves it, and
        answers the seconds waited. A prompt larger than a minute's tokens still goes, alone."""
        waited = 0.0
        while True:
            wait = float(self._call(self._acquire, self._keys,
                                    [self._per_request, self._per_token, max(0, tokens)]))
            if wait <= 0:
                return waited
            step = min(wait, MAX_SLICE)
            self._sleep(step)
            waited += step

    def settle(self, extra_tokens: int) -> None:
        """Pays tokens the call used beyond what it reserved (or gives back the surplus)."""
        if self._per_token and extra_tokens:
            self._call(self._settle, self._keys[1:2], [self._per_token, extra_tokens])

    def pause(self, seconds: float) -> None:
        """The provider asked to wait (``Retry-After``): every process waits that long."""
        if seconds > 0:
            log.warning("LLM model [%s]: the provider asked to wait %.2fs; every worker pauses",
                        self.model_id, seconds)
            self._call(self._pause, self._keys[2:3], [seconds])

    def _call(self, script: Any, keys: tuple[str, ...], args: list[float | int]) -> Any:
        try:
            return script(keys=list(keys), args=args)
        except redis.RedisError as exc:
            raise LLMError(self.model_id, f"the rate limiter's Redis is unavailable: {exc}",
                           retryable=True) from None


def guarded(limiter: RateLimiter | None, tokens: int,
            attempt: Callable[[], T]) -> Callable[[], T]:
    """``attempt`` that first takes its place under the model's limits, and on a provider's
    Retry-After pauses every process for it. Without a limiter, ``attempt`` itself."""
    if limiter is None:
        return attempt

    def limited() -> T:
        limiter.acquire(tokens)
        try:
            return attempt()
        except Transient as exc:
            if exc.retry_after is not None:
                limiter.pause(exc.retry_after)
            raise
    return limited
