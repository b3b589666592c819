"""A Redis with no single point of failure, for a test: a primary, one replica and three Redis
Sentinels, each a real ``redis-server`` process on loopback (the sentinels run with
``--sentinel``, as ``scripts/sentinel.sh`` starts them), so a test can kill the primary with a
signal and watch the sentinels promote the replica."""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import redis

from tests.support.processes import Proc, free_port

#: ms a primary may not answer before a sentinel thinks it down (scripts/sentinel.sh: 5000)
DOWN_AFTER_MS = 1000
#: Sentinel's failover-timeout, in ms: also how long before a failed failover is tried again
FAILOVER_TIMEOUT_MS = 5000
QUORUM = 2


def _env() -> dict[str, str]:
    return {"PATH": os.environ.get("PATH", "/usr/bin:/bin")}


def _wait(what: str, ready: Callable[[], object], proc: Proc, timeout: float = 20) -> None:
    """Until ``ready()`` is true (a Redis error counts as not yet)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            if ready():
                return
        except (redis.ConnectionError, redis.exceptions.BusyLoadingError):
            pass
        if time.monotonic() > deadline or not proc.alive():
            raise RuntimeError(f"{what} was not ready in {timeout}s:\n{proc.log()[-3000:]}")
        time.sleep(0.1)


class RedisNode(Proc):
    """A ``redis-server`` keeping an append-only file in ``data_dir`` (as scripts/sentinel.sh),
    a replica of ``replica_of`` when given."""

    def __init__(self, data_dir: Path, replica_of: int | None = None,
                 password: str | None = None) -> None:
        self.port = free_port()
        data_dir.mkdir(parents=True, exist_ok=True)
        follow = ["--replicaof", "127.0.0.1", str(replica_of)] if replica_of else []
        secured = ["--requirepass", password, "--masterauth", password] if password else []
        super().__init__(["redis-server", "--port", str(self.port), "--bind", "127.0.0.1",
                          "--save", "", "--appendonly", "yes", "--dir", str(data_dir), *follow,
                          *secured],
                         _env(), "redis-replica" if replica_of else "redis-primary")
        self.client = redis.Redis(port=self.port, password=password, socket_timeout=2,
                                  socket_connect_timeout=1)
        if replica_of:
            _wait("the replica", lambda: self.client.info("replication").get(
                "master_link_status") == "up", self)
        else:
            _wait("the primary", self.client.ping, self)


class SentinelNode(Proc):
    """``redis-server sentinel.conf --sentinel`` watching the primary as ``name``."""

    def __init__(self, data_dir: Path, name: str, primary_port: int,
                 password: str | None = None, own_password: str | None = None) -> None:
        """``password``: the primary's; ``own_password``: the sentinel's own (requirepass,
        which the sentinels also give each other)."""
        self.port = free_port()
        conf = data_dir / f"sentinel-{self.port}.conf"  # the sentinel rewrites it as it learns
        conf.write_text("\n".join([
            f"port {self.port}", "bind 127.0.0.1", f"dir {data_dir}",
            *([f"requirepass {own_password}"] if own_password else []),
            f"sentinel monitor {name} 127.0.0.1 {primary_port} {QUORUM}",
            *([f"sentinel auth-pass {name} {password}"] if password else []),
            f"sentinel down-after-milliseconds {name} {DOWN_AFTER_MS}",
            f"sentinel failover-timeout {name} {FAILOVER_TIMEOUT_MS}",
            f"sentinel parallel-syncs {name} 1", ""]))
        super().__init__(["redis-server", str(conf), "--sentinel"], _env(), "sentinel")
        self.client = redis.Redis(port=self.port, password=own_password, socket_timeout=2,
                                  socket_connect_timeout=1)
        _wait("a sentinel", self.client.ping, self)


class SentinelGroup:
    """The primary, its replica and three sentinels; ``url`` and ``name`` are what the
    workbench is given (REDIS_URL, WORKBENCH_REDIS_MASTER_NAME). ``password``: the primary's
    and the replica's (in the first entry of ``url``); ``sentinel_password``: the sentinels'
    own (WORKBENCH_REDIS_SENTINEL_PASSWORD)."""

    def __init__(self, data_dir: Path, password: str | None = None,
                 sentinel_password: str | None = None) -> None:
        self.name = f"wb-{uuid.uuid4().hex[:6]}"
        self.password = password
        self.primary = RedisNode(data_dir / "primary", password=password)
        self.replica = RedisNode(data_dir / "replica", replica_of=self.primary.port,
                                 password=password)
        self.sentinels = [SentinelNode(data_dir, self.name, self.primary.port, password,
                                       sentinel_password) for _ in range(3)]
        auth = f":{password}@" if password else ""
        self.url = ";".join(f"sentinel://{auth if n == 0 else ''}127.0.0.1:{s.port}"
                            for n, s in enumerate(self.sentinels))
        for node in self.sentinels:
            _wait("the sentinels' view of the group", self._knows_all(node), node, timeout=30)

    def _knows_all(self, node: SentinelNode) -> Callable[[], bool]:
        """Whether ``node`` knows the replica and the two other sentinels."""
        def knows() -> bool:
            replicas = node.client.sentinel_slaves(self.name)
            others = node.client.sentinel_sentinels(self.name)
            return (isinstance(replicas, list) and len(replicas) == 1
                    and isinstance(others, list) and len(others) == 2)

        return knows

    def master_port(self) -> int | None:
        """The primary's port as a majority of the sentinels answer it now (None: no majority,
        or no sentinel answers)."""
        ports: list[int] = []
        for node in self.sentinels:
            try:
                address = node.client.sentinel_get_master_addr_by_name(self.name)
            except redis.RedisError:
                continue
            if isinstance(address, tuple):
                ports.append(int(address[1]))
        best = max(set(ports), key=ports.count, default=None)
        return best if best is not None and ports.count(best) >= QUORUM else None

    def wait_promoted(self, port: int, timeout: float = 60) -> float:
        """Until a majority of the sentinels name ``port`` the primary and it answers as one;
        returns time.monotonic() then."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.master_port() == port:
                try:
                    role = redis.Redis(port=port, password=self.password,
                                       socket_timeout=1).info("replication")["role"]
                except redis.RedisError:
                    role = None
                if role == "master":
                    return time.monotonic()
            time.sleep(0.02)
        logs = "\n".join(s.log()[-1500:] for s in self.sentinels)
        raise AssertionError(f"port {port} was not promoted in {timeout}s:\n{logs}")

    def stop(self) -> None:
        for proc in (*self.sentinels, self.replica, self.primary):
            proc.stop()
