"""The workbench's own processes (API server, Celery worker) run as real subprocesses."""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager, suppress
from pathlib import Path

import urllib3

from tests.support.api import Api, close_connections

REPO = Path(__file__).resolve().parents[2]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class Proc:
    """A subprocess with its combined output in a temporary log file."""

    def __init__(self, args: list[str], env: dict[str, str], name: str) -> None:
        self.log_path = Path(tempfile.mkstemp(prefix=f"{name}-", suffix=".log")[1])
        self._log = self.log_path.open("wb")
        self.proc = subprocess.Popen(
            args, env=env, stdout=self._log, stderr=subprocess.STDOUT, cwd=REPO,
            start_new_session=True,
        )
        self.name = name

    @property
    def pid(self) -> int:
        return self.proc.pid

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def alive(self) -> bool:
        return self.proc.poll() is None

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 30) -> None:
        if self.alive():
            with suppress(ProcessLookupError):
                os.killpg(self.proc.pid, sig)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(10)
        self._log.close()


#: models registered through the API may use the stand-in LLM, which listens on loopback, as
#: an operator of a local llama.cpp set-up allows (docs/model-endpoints.md)
LOOPBACK_MODELS = {
    "WORKBENCH_MODEL_ENDPOINTS": json.dumps([r"^http://127\.0\.0\.1:[0-9]+(/.*)?$"]),
    "WORKBENCH_MODEL_PRIVATE_ENDPOINTS": "true",
}


def base_env(opensearch_url: str, redis_url: str, **extra: str) -> dict[str, str]:
    """The environment of the workbench's processes in tests: the services, INFO logs, and
    ``LOOPBACK_MODELS`` (a test of the default endpoint rules drops those two)."""
    env = dict(os.environ)
    env.update(
        OPENSEARCH_URL=opensearch_url,
        REDIS_URL=redis_url,
        WORKBENCH_LOG_LEVEL="INFO",
        PYTHONUNBUFFERED="1",
        **LOOPBACK_MODELS,
    )
    env.update(extra)
    return env


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


class Server(Proc):
    """``workbench serve`` on a free port; ``url`` is its base URL. ``front`` is
    ``WORKBENCH_FRONT``: gunicorn alone unless a test asks for the HAProxy front."""

    def __init__(self, env: dict[str, str], workers: int = 2, wait_cluster: bool = True,
                 front: str = "none", prefix: list[str] | None = None) -> None:
        """``prefix``: a command the server runs under (``HostsFile.command``, say)."""
        self.port = free_port()
        self.front = front
        env = dict(env, WORKBENCH_PORT=str(self.port), WORKBENCH_WEB_WORKERS=str(workers),
                   WORKBENCH_HOST="127.0.0.1", WORKBENCH_FRONT=front)
        super().__init__([*(prefix or []), sys.executable, "-m", "workbench.cli", "serve"], env,
                         "workbench-api")
        self.url = f"http://127.0.0.1:{self.port}"
        self._wait(wait_cluster)

    def _wait(self, wait_cluster: bool, timeout: float = 90) -> None:
        http = urllib3.PoolManager(retries=False, timeout=3)
        deadline = time.monotonic() + timeout
        try:
            while time.monotonic() < deadline:
                if not self.alive():
                    raise RuntimeError(f"workbench serve exited:\n{self.log()[-4000:]}")
                try:
                    status = http.request("GET", self.url + "/").status
                except urllib3.exceptions.HTTPError:
                    time.sleep(0.2)
                    continue
                if status == 200 or not wait_cluster:
                    return
                time.sleep(0.2)
        finally:
            http.clear()  # no kept-alive connection to hold up a stop (close_connections)
        raise RuntimeError(f"workbench serve did not answer in {timeout}s:\n{self.log()[-4000:]}")

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 30) -> None:
        """Stop it, first closing the test's idle connections to it (``close_connections``):
        otherwise a SIGTERM waits 2 s for each before the server exits."""
        close_connections(self.url)
        super().stop(sig, timeout)

    def worker_pids(self) -> list[int]:
        """Pids of the gunicorn worker processes (children of the master)."""
        import psutil

        assert self.front == "none", "with a front, the master is not this process"
        return [child.pid for child in psutil.Process(self.pid).children()]


class Worker(Proc):
    """``workbench worker`` consuming a queue of its own, so concurrent test runs never mix."""

    def __init__(self, env: dict[str, str], queue: str | None = None,
                 module: str = "workbench.cli", extra: list[str] | None = None,
                 prefix: list[str] | None = None) -> None:
        self.queue = queue or env.get("WORKBENCH_QUEUE") or f"test-{uuid.uuid4().hex[:8]}"
        env = dict(env, WORKBENCH_QUEUE=self.queue)
        super().__init__([*(prefix or []), sys.executable, "-m", module, "worker",
                          *(extra or [])], env, "workbench-worker")
        self._wait(env)

    def _wait(self, env: dict[str, str], timeout: float = 60) -> None:
        wait_for_ping(env, self.queue, "workbench worker", self.alive, self.log, timeout)

    def pool_pids(self) -> list[int]:
        """Pids of the consumer's pool processes (the ones that run jobs): the grandchildren of
        ``workbench worker``, which supervises the consumer (``jobs.supervisor``)."""
        import psutil

        return [pool.pid for consumer in psutil.Process(self.pid).children()
                for pool in consumer.children()]


def stop_together(processes: Sequence[Proc]) -> None:
    """Stop them all at once, each waiting for its own exit, rather than one after another
    (an API server or a worker takes a second or two to exit)."""
    with ThreadPoolExecutor(max_workers=max(1, len(processes))) as pool:
        list(pool.map(lambda process: process.stop(), processes))


def wait_for_ping(env: dict[str, str], name_part: str, what: str, alive: Callable[[], bool],
                  log: Callable[[], str], timeout: float) -> None:
    """Until a job consumer whose Celery node name holds ``name_part`` answers a ping on the
    broker of ``env``; a RuntimeError with the end of ``log()`` if it exits or stays silent."""
    from celery import Celery

    from workbench.config import Config
    from workbench.jobs.celery_app import transport_options

    # A private app: pinging must not repoint the test process's own Celery app.
    config = Config.from_env(env)
    app = Celery("ping", broker=config.celery_broker_url)
    app.conf.broker_transport_options = transport_options(config)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not alive():
            raise RuntimeError(f"{what} exited:\n{log()[-4000:]}")
        replies = app.control.ping(timeout=1.0)
        if any(name_part in name for reply in replies for name in reply):
            return
    raise RuntimeError(f"{what} did not answer a ping in {timeout}s:\n{log()[-4000:]}")


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


#: the settings that let remote search configurations reach this machine's engines
#: (docs/engines.md): loopback URLs are trusted and non-public addresses allowed
TRUST_LOOPBACK = {"WORKBENCH_REMOTE_ENDPOINTS": json.dumps([r"^http://127\.0\.0\.1:.*"]),
                  "WORKBENCH_REMOTE_PRIVATE_ENDPOINTS": "true"}


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
