"""``workbench worker`` keeps its job consumer alive: a consumer that exits is started again.

The Celery consumer (``workbench worker --no-supervise``) runs as a child of this process, in a
process group of its own: a stop signal (SIGTERM, SIGINT, SIGQUIT) reaches it forwarded by this
process, which then waits for its shutdown and exits with it. With
``WORKBENCH_WORKER_STOP=handover`` the consumer hands its jobs over (``jobs.handover``) and
this process kills it if it is still running ``WORKBENCH_WORKER_STOP_SECONDS + STOP_MARGIN``
seconds after the first stop signal, so a worker's stop is bounded. A consumer that
exits without being asked to (killed, out of memory, an "Unrecoverable error" of Celery when
its broker goes away) is started again after 1 s, doubling up to 30 s while it keeps dying,
back to 1 s once a consumer has run for ``STABLE_SECONDS``.

Every exit is recorded in Redis (``workbench:supervisor:<host>:<pid>``, refreshed while this
process lives and expiring soon after it dies), so ``workbench status`` shows a worker that
keeps dying on any host. Redis being down does not stop the supervision.

Why not supervisord or systemd: they restart a process just as well, but a container, a test
and a laptop would each need its own one, and neither tells ``workbench status`` (which reads
only Redis and the cluster) how often the consumer died. The compose file still runs this
process under ``restart: unless-stopped``, for a supervisor that dies itself.

Processes die with their parent (``die_with_parent``, Linux's ``PR_SET_PDEATHSIG``): the
consumer with this process, the consumer's pool processes with the consumer. A killed worker
leaves nothing running unsupervised, and the leases its jobs held belong to dead processes,
which the next consumer's sweeper re-queues at once (``jobs.sweeper``).
"""

from __future__ import annotations

import ctypes
import json
import logging
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from types import FrameType
from typing import Any

import redis

from workbench import redis_client, redis_keys
from workbench.config import Config

#: seconds past ``WORKBENCH_WORKER_STOP_SECONDS`` before a stopping consumer is killed: a job
#: handed over by force ends its process at ``WORKBENCH_WORKER_STOP_SECONDS`` (``jobs.handover``)
STOP_MARGIN = 5.0

log = logging.getLogger(__name__)

#: a consumer that ran this long was healthy: the next restart waits 1 s again
STABLE_SECONDS = 60.0
BACKOFF_FIRST, BACKOFF_MAX = 1.0, 30.0
#: how far back ``workbench status`` counts exits, and how many make a worker "keep dying"
RECENT_SECONDS, DYING_EXITS = 600, 3
#: the Redis record is refreshed this often and expires after ``3 *`` as long
HEARTBEAT_SECONDS = 10.0
#: set in the consumer's environment: the pid of the supervisor it must not outlive
SUPERVISOR_ENV = "WORKBENCH_SUPERVISOR_PID"

_PR_SET_PDEATHSIG = 1


def die_with_parent(sig: int = signal.SIGKILL) -> None:
    """Ask Linux to send ``sig`` to this process when its parent dies (no-op elsewhere)."""
    if not sys.platform.startswith("linux"):
        return
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, int(sig), 0, 0, 0)
    except (OSError, AttributeError):  # no prctl: the process just outlives its parent
        return


def bind_to_supervisor() -> None:
    """In the consumer: die with the supervisor that started it (if one did)."""
    supervisor = os.environ.get(SUPERVISOR_ENV)
    if not supervisor:
        return
    die_with_parent(signal.SIGKILL)
    if os.getppid() != int(supervisor):  # it died before the line above took effect
        sys.exit(1)


def describe_exit(returncode: int) -> str:
    if returncode < 0:
        try:
            return f"killed by {signal.Signals(-returncode).name}"
        except ValueError:
            return f"killed by signal {-returncode}"
    return f"exit code {returncode}"


class Record:
    """What ``workbench status`` reads about this supervisor, kept in Redis."""

    def __init__(self, config: Config, queue: str) -> None:
        self.config = config
        self.redis = redis_client.connect(config, socket_timeout=3, socket_connect_timeout=3)
        self.key = redis_keys.supervisor_key(socket.gethostname(), os.getpid())
        self.data: dict[str, Any] = {
            "host": socket.gethostname(), "pid": os.getpid(), "queue": queue,
            "started": time.time(), "consumerPid": None, "restarts": 0, "exits": []}
        self._warned = False
        self.lock = threading.Lock()

    def consumer_started(self, pid: int) -> None:
        with self.lock:
            self.data["consumerPid"] = pid
        self.save()

    def consumer_exited(self, how: str) -> None:
        now = time.time()
        with self.lock:
            self.data["restarts"] += 1
            self.data["exits"] = [e for e in self.data["exits"]
                                  if e["at"] > now - RECENT_SECONDS][-20:]
            self.data["exits"].append({"at": now, "how": how})
        self.save()

    def save(self) -> None:
        with self.lock:
            text = json.dumps(self.data)
        try:
            self.redis.set(self.key, text, ex=int(3 * HEARTBEAT_SECONDS))
            self._warned = False
        except redis.exceptions.RedisError as exc:
            if not self._warned:  # once per outage: the supervision goes on without it
                log.warning("could not record the worker's state in Redis: %s",
                            type(exc).__name__)
                self._warned = True

    def forget(self) -> None:
        try:
            self.redis.delete(self.key)
        except redis.exceptions.RedisError:
            return


def read_all(r: redis.Redis) -> list[dict[str, Any]]:
    """Every live supervisor's record (for ``workbench status``)."""
    found = []
    for key in r.scan_iter(f"{redis_keys.SUPERVISOR_PREFIX}*", count=200):
        raw = r.get(key)
        if raw:
            found.append(json.loads(raw))
    return sorted(found, key=lambda d: (d["host"], d["pid"]))


def recent_exits(record: dict[str, Any], now: float | None = None) -> list[dict[str, Any]]:
    now = time.time() if now is None else now
    return [e for e in record.get("exits", []) if e["at"] > now - RECENT_SECONDS]


def stop_bound(config: Config) -> float | None:
    """Seconds from a stop signal to killing a consumer that has not exited: with
    ``WORKBENCH_WORKER_STOP=handover``, ``WORKBENCH_WORKER_STOP_SECONDS`` plus the margin in
    which a job handed over by force ends its process (``jobs.handover``); None (wait for the
    jobs, however long) with ``finish``."""
    if config.worker_stop != "handover":
        return None
    return config.worker_stop_seconds + STOP_MARGIN


def _wait(child: subprocess.Popen[bytes], stopped_at: list[float], bound: float | None) -> int:
    """Wait for ``child``; once a stop signal came (``stopped_at``), at most ``bound`` seconds
    from it, then kill it (its pool processes die with it)."""
    while True:
        try:
            return child.wait(0.25)
        except subprocess.TimeoutExpired:
            pass
        if stopped_at and bound is not None and time.monotonic() - stopped_at[0] >= bound:
            log.error("the job consumer (pid %d) did not exit within %.0f s of the stop signal; "
                      "killing it", child.pid, bound)
            child.kill()
            return child.wait()


def supervise(command: list[str], record: Record | None, bound: float | None = None) -> int:
    """Run ``command`` until this process is asked to stop; returns the last exit status. A
    consumer still running ``bound`` seconds after the stop signal is killed (None: the
    record's configuration says, ``stop_bound``)."""
    stopping = threading.Event()
    child: subprocess.Popen[bytes] | None = None
    stopped_at: list[float] = []
    if bound is None and record is not None:
        bound = stop_bound(record.config)

    def forward(signum: int, _: FrameType | None) -> None:
        if not stopped_at:
            stopped_at.append(time.monotonic())
        stopping.set()
        if child is not None and child.poll() is None:
            try:
                child.send_signal(signum)
            except ProcessLookupError:
                return

    for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGQUIT):
        signal.signal(signum, forward)
    beat = threading.Thread(target=_heartbeat, args=(record, stopping), daemon=True)
    if record is not None:
        beat.start()
    backoff = BACKOFF_FIRST
    returncode = 0
    try:
        while not stopping.is_set():
            started = time.monotonic()
            child = subprocess.Popen(command, process_group=0,
                                     env=dict(os.environ, **{SUPERVISOR_ENV: str(os.getpid())}))
            log.info("job consumer started (pid %d)", child.pid)
            if record is not None:
                record.consumer_started(child.pid)
            returncode = _wait(child, stopped_at, bound)
            if stopping.is_set():
                break
            ran = time.monotonic() - started
            backoff = BACKOFF_FIRST if ran >= STABLE_SECONDS else backoff
            how = describe_exit(returncode)
            log.error("the job consumer (pid %d) stopped unexpectedly after %.0f s (%s); "
                      "starting it again in %.0f s", child.pid, ran, how, backoff)
            if record is not None:
                record.consumer_exited(how)
            if stopping.wait(backoff):
                break
            backoff = min(backoff * 2, BACKOFF_MAX)
    finally:
        stopping.set()
        if child is not None and child.poll() is None:
            returncode = _wait(child, stopped_at, bound)
        if record is not None:
            record.forget()
    return returncode


def _heartbeat(record: Record, stopping: threading.Event) -> None:
    while not stopping.wait(HEARTBEAT_SECONDS):
        record.save()
