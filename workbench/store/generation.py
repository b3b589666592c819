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

import logging
import time

import redis

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
