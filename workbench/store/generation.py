"""One number in Redis that says whether what an API process keeps is still current.

The gate of every SRW request reads the plugin settings, and the interleaved A/B search its test
and two search configurations: reading them from the cluster each time cost more than the rest
of a short request. Each process keeps them instead, with the value of ``CACHE_GENERATION_KEY``
it read them under; every change of them increments the number (after the change is written),
so the next request of every process reads them again. The number is read once per request
(``read``), with a short timeout: Redis down or slow means no number, and then the callers read
the cluster every time, as before. A change made while Redis could not be told is picked up when
the keeper's own age limit passes.
"""

from __future__ import annotations

import logging

import redis

from workbench.redis_keys import CACHE_GENERATION_KEY

log = logging.getLogger(__name__)

#: seconds to wait for Redis when reading or bumping the number: a request never waits longer
TIMEOUT_SECONDS = 0.5


def client(url: str) -> redis.Redis:
    """A Redis client for the number alone, with ``TIMEOUT_SECONDS``."""
    return redis.Redis.from_url(url, socket_timeout=TIMEOUT_SECONDS,
                                socket_connect_timeout=TIMEOUT_SECONDS)


def read(redis_client: redis.Redis) -> bytes | None:
    """The current number, or None when Redis cannot say."""
    try:
        value = redis_client.get(CACHE_GENERATION_KEY)
    except redis.exceptions.RedisError:
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
