"""Where metric samples are kept and the listener that serves them (docs/metrics.md).

prometheus-client's multiprocess mode: each process writes its samples to memory-mapped files
in ``PROMETHEUS_MULTIPROC_DIR``, and a scrape adds them up. ``enable`` gives each ``workbench``
command a folder of its own, ``<WORKBENCH_METRICS_DIR>/<command>-<pid>``, which its children
(gunicorn workers, Celery's pool, a supervised consumer) inherit; the listener adds up every
folder under ``WORKBENCH_METRICS_DIR``, so one listener reports every workbench process of its
host. A folder whose command has died is removed when the next command starts: its counters
start again from zero, which Prometheus reads as a restart.

The listener has its own port (``WORKBENCH_METRICS_PORT``, bound to ``WORKBENCH_METRICS_HOST``,
loopback by default): every path of the API's port belongs to OpenSearch's namespace, and the
metrics are for operators, not for every client that may search. Beside the files it reports
two gauges read from Redis at each scrape: jobs queued and the age of the oldest.

Nothing here is written by hand that prometheus-client does: the files, the merging and the HTTP
server are its own; this module only chooses folders and adds the queue gauges.
"""

from __future__ import annotations

import contextlib
import errno
import glob
import logging
import os
import re
import shutil
import tempfile
import time
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import redis

from workbench import redis_client
from workbench.config import Config
from workbench.redis_keys import QUEUED_SINCE_KEY, queued_key_of_member

log = logging.getLogger(__name__)

_ENV = "PROMETHEUS_MULTIPROC_DIR"
#: the gauges read from Redis at each scrape: name and help
QUEUED = ("workbench_jobs_queued", "Jobs queued and not yet started by a worker.")
OLDEST = ("workbench_oldest_queued_job_age_seconds",
          "How long the job queued longest has waited (0: none queued).")
_OWNED = re.compile(r"^[a-z-]+-(\d+)$")


def metrics_enabled(config: Config) -> bool:
    return config.metrics_port is not None or config.metrics_dir is not None


def base_dir(config: Config) -> Path:
    """The folder every workbench process of this host writes its samples under."""
    if config.metrics_dir:
        return Path(config.metrics_dir)
    return Path(tempfile.gettempdir()) / f"workbench-metrics-{os.getuid()}"


def enable(config: Config, command: str) -> Path | None:
    """Have this process (and its children) write samples where the listener reads them; call
    before anything imports ``prometheus_client``. None when metrics are off."""
    if not metrics_enabled(config):
        return None
    base = base_dir(config)
    inherited = os.environ.get(_ENV)
    if inherited and Path(inherited).parent == base and Path(inherited).is_dir():
        return Path(inherited)  # a child of a command that set it up (a supervised consumer)
    base.mkdir(parents=True, exist_ok=True)
    _remove_dead(base)
    own = base / f"{command}-{os.getpid()}"
    own.mkdir(exist_ok=True)
    os.environ[_ENV] = str(own)
    return own


def _remove_dead(base: Path) -> None:
    for entry in base.iterdir():
        match = _OWNED.match(entry.name)
        if match and entry.is_dir() and not _alive(int(match.group(1))):
            shutil.rmtree(entry, ignore_errors=True)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class _AllFolders:
    """The samples of every process under the base folder, added up."""

    def __init__(self, base: Path) -> None:
        self.base = base

    def collect(self) -> Iterable[Any]:
        from prometheus_client.multiprocess import MultiProcessCollector

        files = glob.glob(str(self.base / "*" / "*.db"))
        for _ in range(3):
            try:
                return MultiProcessCollector.merge(files, accumulate=True)
            except FileNotFoundError:  # a dead command's folder removed during the scrape
                files = [f for f in files if os.path.exists(f)]
        return []


class _Queue:
    """Jobs queued and not yet started, and how long the oldest has waited, from Redis."""

    #: entries looked at per scrape when skipping ones whose job left without saying so
    LOOK = 20

    def __init__(self, config: Config) -> None:
        self.redis = redis_client.connect(config, socket_timeout=2, socket_connect_timeout=2)

    def collect(self) -> Iterator[Any]:
        from prometheus_client.core import GaugeMetricFamily

        try:
            depth, oldest = self.read()
        except redis.exceptions.RedisError as exc:
            log.warning("metrics: cannot read the job queue from Redis: %s", type(exc).__name__)
            return
        yield GaugeMetricFamily(*QUEUED, value=depth)
        yield GaugeMetricFamily(*OLDEST, value=oldest)

    def read(self) -> tuple[int, float]:
        """(depth, age of the oldest); an entry whose queued marker is gone (its job was
        failed by the sweeper, say) is dropped."""
        while True:
            head: list[tuple[Any, float]] = list(self.redis.zrange(  # type: ignore[arg-type]
                QUEUED_SINCE_KEY, 0, self.LOOK - 1, withscores=True))
            if not head:
                return 0, 0.0
            members = [m.decode() if isinstance(m, bytes) else str(m) for m, _ in head]
            markers = self.redis.mget([queued_key_of_member(m) for m in members])
            stale = [m for m, marker in zip(members, markers, strict=True) if marker is None]
            if stale:
                self.redis.zrem(QUEUED_SINCE_KEY, *stale)
            live = [float(score) for (_, score), marker in zip(head, markers, strict=True)
                    if marker is not None]
            if live or not stale:
                depth = int(self.redis.zcard(QUEUED_SINCE_KEY))
                return depth, max(0.0, time.time() - live[0]) if live else 0.0


def serve(config: Config) -> Any | None:
    """Start the listener in a thread of this process when ``WORKBENCH_METRICS_PORT`` is set.
    A port already taken (the API and a worker of one host both given it) is left to the
    process that has it, which reports this one's samples too when they share the folder."""
    if config.metrics_port is None:
        return None
    from prometheus_client import CollectorRegistry, start_http_server

    registry = CollectorRegistry(auto_describe=False)
    registry.register(_AllFolders(base_dir(config)))
    registry.register(_Queue(config))
    try:
        server, _ = start_http_server(config.metrics_port, addr=config.metrics_host,
                                      registry=registry)
    except OSError as exc:
        if exc.errno != errno.EADDRINUSE:
            raise
        log.info("metrics port %s:%d is in use: the listener there reports this process's "
                 "metrics too when it shares WORKBENCH_METRICS_DIR", config.metrics_host,
                 config.metrics_port)
        return None
    with contextlib.suppress(OSError):
        os.set_inheritable(server.socket.fileno(), False)
    log.info("metrics on http://%s:%d/metrics", config.metrics_host, config.metrics_port)
    return server
