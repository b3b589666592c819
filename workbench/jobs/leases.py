"""Leases, not ages: Redis keys that say a job is queued or running.

* ``workbench:queued:<task>:<entity id>`` (no TTL) is written by ``enqueue`` before the message is
  sent, and removed by the job once it holds its lease.
* ``workbench:lease:<task>:<entity id>`` (value: host, pid and a token; TTL
  ``WORKBENCH_LEASE_SECONDS``) is taken by the job when it starts, renewed by a heartbeat thread
  every third of the TTL and deleted when the job ends.
* ``workbench:attempts:<task>:<entity id>`` counts the sweeper's re-runs of a lost job.

Invariant: every PROCESSING/RETRYING entity has a queued marker or a live lease (each step writes
the next key before it deletes the previous one). The sweeper re-queues an entity that has
neither: its worker died (the lease lapsed) or its message was lost.

Why not redis-py's ``Lock`` (which these keys resemble: a token, a TTL, release only by the
owner): two of the lease's rules do not fit it. A heartbeat writes the lease again when the key
has *vanished* (a Redis restarted without its data must not leave a running job unleased, while
``Lock.reacquire`` raises ``LockNotOwnedError`` then), and a job takes over a lease whose holder
is a dead process of its own host (``holder_is_dead``) instead of waiting out the TTL, which
needs the holder's host and pid readable in the value. The two short Lua scripts below are the
whole of the difference.

The key names are ``workbench.redis_keys``'s (imported here, so ``leases.lease_key`` ... are
what the sweeper and the queue use).
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
import uuid
from typing import Any

import redis

from workbench.redis_keys import (
    QUEUED_SINCE_KEY,
    attempts_key,
    lease_key,
    queued_key,
    queued_member,
)
from workbench.telemetry import instruments

log = logging.getLogger(__name__)

ATTEMPTS_TTL = 7 * 86400

# Renew if the lease is still ours (or gone, as after a Redis that lost its data); 0 if another
# holder has it.
_RENEW = """
local v = redis.call('GET', KEYS[1])
if v == false or v == ARGV[1] then
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
  return 1
end
return 0
"""
# Delete only if the value is still the expected one.
_RELEASE = """
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0
"""


def holder_value() -> str:
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:12]}"


def holder_is_dead(value: bytes | str | None) -> bool:
    """True when the lease was taken by a process of this host that no longer exists (a pool
    process killed, or a whole worker killed and a new one started on the same host). Holders on
    other hosts are judged by their lease's TTL alone."""
    if value is None:
        return False
    text = value.decode() if isinstance(value, bytes) else value
    host, _, rest = text.rpartition(":")[0].rpartition(":")
    if host != socket.gethostname() or not rest.isdigit():
        return False
    pid = int(rest)
    if pid == os.getpid():
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    return _zombie(pid)


def _zombie(pid: int) -> bool:
    """A killed process whose parent died too waits as a zombie until something reaps it (not
    every container's first process does): it holds nothing any more."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            return stat.read().rsplit(b")", 1)[1].split()[0] == b"Z"
    except (OSError, IndexError):
        return False


def release_if(r: redis.Redis, key: str, value: bytes | str) -> bool:
    return bool(r.eval(_RELEASE, 1, key, value))


class Lease:
    """A job's lease on its entity, kept alive by a heartbeat thread until ``release``."""

    def __init__(self, r: redis.Redis, task: str, entity_id: str, ttl: float) -> None:
        self.redis = r
        self.task = task
        self.entity_id = entity_id
        self.key = lease_key(task, entity_id)
        self.ttl_ms = max(1000, int(ttl * 1000))
        self.value = holder_value()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def acquire(self, wait: float) -> bool:
        """Take the lease; a live lease of another holder is waited for up to ``wait`` seconds
        (a retry of the same job arrives while its previous attempt is still releasing)."""
        deadline = time.monotonic() + wait
        while True:
            if self.redis.set(self.key, self.value, nx=True, px=self.ttl_ms):
                break
            current = self.redis.get(self.key)
            if holder_is_dead(current) and current is not None:
                if release_if(self.redis, self.key, current):
                    instruments.LEASE_RECOVERIES.labels("job").inc()
                continue
            if time.monotonic() >= deadline:
                log.info("%s for %s: lease held by %r; another worker runs it", self.task,
                         self.entity_id, current)
                return False
            time.sleep(0.2)
        pipe = self.redis.pipeline(transaction=False)
        pipe.delete(queued_key(self.task, self.entity_id))
        pipe.zrem(QUEUED_SINCE_KEY, queued_member(self.task, self.entity_id))
        pipe.execute()
        self._thread = threading.Thread(target=self._beat, name="job-lease", daemon=True)
        self._thread.start()
        return True

    def _beat(self) -> None:
        while not self._stop.wait(self.ttl_ms / 3000):
            try:
                if not self.redis.eval(_RENEW, 1, self.key, self.value, self.ttl_ms):
                    log.warning("%s for %s: the lease was taken by another worker",
                                self.task, self.entity_id)
            except redis.exceptions.RedisError as exc:
                log.warning("could not renew the lease of %s: %s", self.entity_id,
                            type(exc).__name__)

    def release(self, requeued: bool, why: str = "retry") -> None:
        """End the heartbeat and drop the lease; ``requeued`` (a retry was sent, or the job is
        handed over: ``why``) writes the queued marker first, so the entity is never without
        either key."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(5)
        try:
            if requeued:
                mark_queued(self.redis, self.task, self.entity_id, why)
            else:
                self.redis.delete(attempts_key(self.task, self.entity_id))
            release_if(self.redis, self.key, self.value)
        except redis.exceptions.RedisError as exc:
            log.warning("could not release the lease of %s: %s", self.entity_id,
                        type(exc).__name__)


def mark_queued(r: redis.Redis, task: str, entity_id: str, value: str) -> None:
    """Write the queued marker, and when the job was queued for the queue-age metric."""
    pipe = r.pipeline(transaction=False)
    pipe.set(queued_key(task, entity_id), value)
    pipe.zadd(QUEUED_SINCE_KEY, {queued_member(task, entity_id): time.time()})
    pipe.execute()


def state(r: redis.Redis, task: str, entity_id: str) -> tuple[Any, Any]:
    """(queued marker, lease holder) read at one instant."""
    queued, lease = r.mget([queued_key(task, entity_id), lease_key(task, entity_id)])
    return queued, lease
