"""The workbench's own processes (API server, Celery worker) run as real subprocesses: those the
benchmarks start too are workbench/bench/processes.py; here what only tests need."""

from __future__ import annotations

import os
import re
import tempfile
import time
import uuid
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path

from tests.support.api import Api
from workbench.bench.processes import (  # noqa: F401 - the tests import them from here
    LOOPBACK_MODELS,
    TRUST_LOOPBACK,
    Proc,
    Server,
    Worker,
    base_env,
    free_port,
    wait_for_ping,
)

REPO = Path(__file__).resolve().parents[2]


class RedisServer(Proc):
    """A ``redis-server`` of the test's own on ``port``. With ``data_dir`` it keeps an
    append-only file there (fsync every second, as ``scripts/redis.sh`` runs it), so a restart
    on the same directory finds the keys, queues and leases again; without, it keeps nothing."""

    def __init__(self, port: int, data_dir: str | None = None) -> None:
        self.port = port
        self.data_dir = data_dir
        persistence = (["--appendonly", "yes", "--dir", data_dir] if data_dir
                       else ["--appendonly", "no"])
        super().__init__(["redis-server", "--port", str(port), "--bind", "127.0.0.1",
                          "--save", "", *persistence],
                         {"PATH": os.environ.get("PATH", "/usr/bin:/bin")}, "redis")
        self.url = f"redis://127.0.0.1:{port}/0"
        self._wait()

    def _wait(self, timeout: float = 20) -> None:
        import redis

        client = redis.Redis(port=self.port, socket_connect_timeout=1)
        deadline = time.monotonic() + timeout
        while True:
            try:
                client.ping()
                return
            except (redis.ConnectionError, redis.exceptions.BusyLoadingError):
                if time.monotonic() > deadline or not self.alive():
                    raise RuntimeError(f"redis-server did not start:\n{self.log()}") from None
                time.sleep(0.1)

    def restart(self, sig: int, down: float) -> RedisServer:
        """Stop it with ``sig`` (SIGTERM: it saves and exits; SIGKILL: it dies at once), wait
        ``down`` seconds and start a new one on the same port and directory."""
        self.stop(sig)
        time.sleep(down)
        return RedisServer(self.port, self.data_dir)


FRONTS = ["none", "haproxy"]  # what listens on the workbench's port: gunicorn alone, or HAProxy


def stop_together(processes: Sequence[Proc]) -> None:
    """Stop them all at once, each waiting for its own exit, rather than one after another
    (an API server or a worker takes a second or two to exit)."""
    with ThreadPoolExecutor(max_workers=max(1, len(processes))) as pool:
        list(pool.map(lambda process: process.stop(), processes))


_HELPER_DONE = re.compile(r"Task workbench\.jobs\.help\[[^\]]+\] succeeded in [\d.]+s: (\d+)")


def helper_units(log: str) -> int:
    """Units of split jobs done by the helper tasks of a worker's log (each helper's Celery
    success line ends with the count it returned)."""
    return sum(int(n) for n in _HELPER_DONE.findall(log))


def logs_since(workers: list[Worker], before: list[str], until: re.Pattern[str],
               timeout: float = 15) -> list[str]:
    """What each worker logged since ``before``, once ``until`` (a job's success line, which
    Celery writes a moment after the job wrote its final status) is in one of them."""
    deadline = time.monotonic() + timeout
    while True:
        new = [w.log()[len(old):] for w, old in zip(workers, before, strict=True)]
        if any(until.search(text) for text in new) or time.monotonic() > deadline:
            time.sleep(0.5)  # a helper's last line follows its parent's by a little
            return [w.log()[len(old):] for w, old in zip(workers, before, strict=True)]
        time.sleep(0.1)


class HostsFile:
    """A hosts file that only the processes started under ``command`` see as /etc/hosts (a
    mount namespace of their own; needs root and util-linux's ``unshare``): the test's own
    name resolution, changed at will with ``write``."""

    def __init__(self, entries: dict[str, str]) -> None:
        self.path = Path(tempfile.mkstemp(prefix="hosts-")[1])
        self.write(entries)

    def write(self, entries: dict[str, str]) -> None:
        """Name -> address; written in place, so running processes see it on their next look."""
        lines = ["127.0.0.1 localhost", "::1 localhost ip6-localhost"]
        lines += [f"{address} {name}" for name, address in entries.items()]
        with self.path.open("r+" if self.path.stat().st_size else "w") as out:
            out.seek(0)
            out.write("\n".join(lines) + "\n")
            out.truncate()

    def command(self) -> list[str]:
        return ["unshare", "--mount", "sh", "-c", 'mount --bind "$0" /etc/hosts && exec "$@"',
                str(self.path)]


def loopback_node(opensearch_url: str) -> str:
    """The first node of ``OPENSEARCH_URL`` as a remote's ``connectionUrl`` starts."""
    return opensearch_url.split(",")[0].rstrip("/").replace("//localhost:", "//127.0.0.1:")


@contextmanager
def own_stack(env: dict[str, str], name: str, **settings: str) -> Iterator[Api]:
    """An API server (one gunicorn worker) and a Celery worker of their own queue, with
    ``settings`` on top of ``env``, stopped afterwards."""
    own = dict(env, WORKBENCH_QUEUE=f"{name}-{uuid.uuid4().hex[:8]}", **settings)
    server = Server(own, workers=1)
    worker = Worker(own)
    try:
        yield Api(server.url)
    finally:
        stop_together([worker, server])
