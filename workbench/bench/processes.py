"""The workbench's own processes (API server, Celery worker) started as subprocesses of the
running Python, as ``workbench serve`` / ``workbench worker`` of the installed package: the
benchmarks start them (unless one measures a deployed workbench, ``--workbench-url``) and so do
the tests (tests/support/processes.py)."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from contextlib import suppress
from pathlib import Path

import urllib3

from workbench.bench.client import close_connections
from workbench.config import REPO_ROOT

#: the source checkout this package runs from, None when it is installed: processes start in
#: it (as the tests' always have), else in the current folder
CHECKOUT: Path | None = REPO_ROOT if (REPO_ROOT / "pyproject.toml").is_file() else None


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
            args, env=env, stdout=self._log, stderr=subprocess.STDOUT, cwd=CHECKOUT,
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


#: the settings that let remote search configurations reach this machine's engines
#: (docs/engines.md): loopback URLs are trusted and non-public addresses allowed
TRUST_LOOPBACK = {"WORKBENCH_REMOTE_ENDPOINTS": json.dumps([r"^http://127\.0\.0\.1:.*"]),
                  "WORKBENCH_REMOTE_PRIVATE_ENDPOINTS": "true"}
