"""One number in Redis that says whether what an API process keeps is still current.

The gate of every SRW request reads the plugin settings, and the interleaved A/B search its test
and two search configurations: reading them from the cluster each time cost more than the rest
of a short request. Each process keeps them instead, with the value of ``CACHE_GENERATION_KEY``
it read them under; every change of them increments the number (after the change is written),
so the next request of every process reads them again. The number is read once per request
(``read``), with a short timeout: Redis down or slow means no number, and then the callers read
the cluster every time, as before. After a failed read the process does not ask Redis again for
``RETRY_SECONDS``, so a Redis that stopped answering (rather than refusing) costs one timeout per
interval, not one per request. A change made while Redis could not be told is picked up when the
keeper's own age limit passes.
"""

from __future__ import annotations

import asyncio
import logging
import time

import redis
import redis.asyncio

from workbench import redis_client
from workbench.config import Config
from workbench.redis_keys import CACHE_GENERATION_KEY

log = logging.getLogger(__name__)

#: seconds to wait for Redis when reading or bumping the number: a request never waits longer
TIMEOUT_SECONDS = 0.5
#: seconds a process reads without the number after Redis failed to give it
RETRY_SECONDS = 5.0

_retry_at = 0.0  # monotonic time before which ``read`` does not ask Redis


def client(config: Config) -> redis.Redis:
    """A Redis client for the number alone, with ``TIMEOUT_SECONDS``."""
    return redis_client.connect(config, socket_timeout=TIMEOUT_SECONDS,
                                socket_connect_timeout=TIMEOUT_SECONDS)


def read(redis_client: redis.Redis) -> bytes | None:
    """The current number, or None when Redis cannot say (or could not, less than
    ``RETRY_SECONDS`` ago)."""
    global _retry_at
    if time.monotonic() < _retry_at:
        return None
    try:
        value = redis_client.get(CACHE_GENERATION_KEY)
    except redis.exceptions.RedisError:
        _retry_at = time.monotonic() + RETRY_SECONDS
        return None
    return value if isinstance(value, bytes) else b"0"


def bump(redis_client: redis.Redis) -> None:
    """Tell every process that what it keeps changed."""
    try:
        redis_client.incr(CACHE_GENERATION_KEY)
    except redis.exceptions.RedisError as exc:
        log.warning("could not tell the API processes that a setting, A/B test or search "
                    "configuration changed (%s): they see it within their age limit",
                    type(exc).__name__)


class Reader:
    """``read`` for an asyncio loop (the live A/B search): never blocks the loop, and one Redis
    read serves every search that arrived before it was sent. A search waits for a read sent
    after it arrived, so it sees every change made before it, as with ``read``."""

    def __init__(self, client: redis.asyncio.Redis) -> None:
        self.client = client
        self._next: asyncio.Future[bytes | None] | None = None  # the read not yet sent
        self._task: asyncio.Task[None] | None = None
        self._retry_at = 0.0

    async def read(self) -> bytes | None:
        """The current number, or None when Redis cannot say (as ``read``)."""
        if time.monotonic() < self._retry_at:
            return None
        waiting = self._next
        if waiting is None:
            # The task's first step runs after the steps already queued: the searches that
            # arrived with this one join this read before it is sent.
            waiting = self._next = asyncio.get_running_loop().create_future()
            self._task = asyncio.ensure_future(self._get(waiting))
        return await asyncio.shield(waiting)

    async def _get(self, waiting: asyncio.Future[bytes | None]) -> None:
        self._next = None  # a search from now on waits for the next read
        try:
            value = await asyncio.wait_for(self.client.get(CACHE_GENERATION_KEY), TIMEOUT_SECONDS)
        except (redis.exceptions.RedisError, OSError, TimeoutError):
            self._retry_at = time.monotonic() + RETRY_SECONDS
            value = None
        else:
            value = value if isinstance(value, bytes) else b"0"
        if not waiting.done():
            waiting.set_result(value)
