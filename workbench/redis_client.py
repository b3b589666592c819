"""Every Redis client of the workbench is made here, from ``REDIS_URL``.

``REDIS_URL`` names either one Redis (``redis://``, ``rediss://``, ``unix://``: redis-py's
``Redis.from_url``) or the Redis Sentinels that watch a primary and its replicas
(``sentinel://host:port;sentinel://host2:port;...``, kombu's form, with
``WORKBENCH_REDIS_MASTER_NAME``). With sentinels a client is redis-py's
``Sentinel(...).master_for(name)``: each new connection asks the sentinels where the primary is,
so after a failover the next command reaches the promoted replica (a command in flight when the
primary went fails as it would with one Redis, and the callers' handling of that applies).
"""

from __future__ import annotations

from typing import Any

import redis
import redis.asyncio
import redis.asyncio.sentinel
from redis.sentinel import Sentinel, SentinelConnectionPool

from workbench.config import Config, is_sentinel_url, sentinels


def connect(config: Config, *, socket_timeout: float,
            socket_connect_timeout: float | None = None, **options: Any) -> redis.Redis:
    """A client of ``config.redis_url`` (one Redis, or the primary the sentinels name) with
    these timeouts (also to reach the sentinels) and redis-py's other ``options``."""
    return connect_url(config.redis_url, master_name=config.redis_master_name,
                       sentinel_password=config.redis_sentinel_password,
                       socket_timeout=socket_timeout,
                       socket_connect_timeout=socket_connect_timeout, **options)


def connect_url(url: str, *, master_name: str | None = None,
                sentinel_password: str | None = None, socket_timeout: float,
                socket_connect_timeout: float | None = None, **options: Any) -> redis.Redis:
    """``connect`` for a URL and the master name (and the sentinels' password) given apart."""
    timeouts = {"socket_timeout": socket_timeout,
                "socket_connect_timeout": socket_connect_timeout}
    if not is_sentinel_url(url):
        return redis.Redis.from_url(url, **timeouts, **options)
    if not master_name:
        raise ValueError("a sentinel:// Redis URL needs the master's name "
                         "(WORKBENCH_REDIS_MASTER_NAME)")
    found = sentinels(url)
    asking = sentinel_options(sentinel_password, socket_timeout, socket_connect_timeout)
    if "retry" in options:  # the caller's retry policy also when asking the sentinels
        asking["retry"] = options["retry"]
    watcher = Sentinel(list(found.nodes), sentinel_kwargs=asking, **timeouts)
    client: redis.Redis = watcher.master_for(
        master_name, db=found.db, username=found.username, password=found.password,
        **timeouts, **options)
    return client


def connect_async(config: Config, *, socket_timeout: float,
                  socket_connect_timeout: float | None = None) -> redis.asyncio.Redis:
    """``connect`` for asyncio (the live A/B search's loop): the same URL, sentinels and
    timeouts, with redis-py's asyncio client."""
    timeouts: dict[str, Any] = {"socket_timeout": socket_timeout,
                                "socket_connect_timeout": socket_connect_timeout}
    if not is_sentinel_url(config.redis_url):
        return redis.asyncio.Redis.from_url(config.redis_url, **timeouts)
    if not config.redis_master_name:
        raise ValueError("a sentinel:// Redis URL needs the master's name "
                         "(WORKBENCH_REDIS_MASTER_NAME)")
    found = sentinels(config.redis_url)
    asking = sentinel_options(config.redis_sentinel_password, socket_timeout,
                              socket_connect_timeout)
    watcher = redis.asyncio.sentinel.Sentinel(list(found.nodes), sentinel_kwargs=asking,
                                              **timeouts)
    client: redis.asyncio.Redis = watcher.master_for(
        config.redis_master_name, db=found.db, username=found.username,
        password=found.password, **timeouts)
    return client


def primary_address(client: redis.Redis) -> str | None:
    """``host:port`` of the primary a client of sentinels reaches now (None: one Redis)."""
    pool = client.connection_pool
    if not isinstance(pool, SentinelConnectionPool):
        return None
    host, port = pool.get_master_address()
    return f"{host}:{port}"


def sentinel_options(password: str | None, socket_timeout: float | None,
                     socket_connect_timeout: float | None) -> dict[str, Any]:
    """The options of a connection to a sentinel (not to the primary): the timeouts, and the
    sentinels' own password when they have one (redis-py's and kombu's ``sentinel_kwargs``)."""
    options: dict[str, Any] = {"socket_timeout": socket_timeout,
                               "socket_connect_timeout": socket_connect_timeout}
    if password:
        options["password"] = password
    return options
