"""What a worker logs when its broker restarts: one WARNING line when the connection is lost
and one INFO line when it is back, per worker, without a traceback (Celery's own lines are a
warning with three chained tracebacks and an ERROR every reconnection attempt)."""

from __future__ import annotations

import re
import signal
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.processes import RedisServer, Worker, free_port

LOST = re.compile(r" WARNING \[\d+\] celery\.worker\.consumer\.consumer: lost the connection to "
                  r"the broker \(ConnectionError: [^)]+\); running jobs keep running, "
                  r"reconnecting until it is back$", re.MULTILINE)

READY = re.compile(r" INFO \[\d+\] celery\.apps\.worker: \S+ ready\.$", re.MULTILINE)


@pytest.fixture
def broker(env: dict[str, str], tmp_path: Path) -> Iterator[tuple[RedisServer, list[Worker]]]:
    redis_server = RedisServer(free_port(), str(tmp_path))
    worker_env = {k: v for k, v in env.items() if k != "CELERY_BROKER_URL"}
    worker_env.update(REDIS_URL=redis_server.url, WORKBENCH_QUEUE=f"loss-{uuid.uuid4().hex[:8]}")
    workers = [Worker(worker_env) for _ in range(2)]
    # Both consume one queue: a ping answered by the first says nothing of the second.
    deadline = time.monotonic() + 60
    while not all(READY.search(w.log()) for w in workers) and time.monotonic() < deadline:
        time.sleep(0.2)
    yield redis_server, workers
    for worker in workers:
        worker.stop()
    redis_server.stop()  # the first one (the test stops the one it started again)


def test_a_broker_restart_is_one_warning_and_one_info_per_worker(
        broker: tuple[RedisServer, list[Worker]]) -> None:
    redis_server, workers = broker
    back = re.compile(r" INFO \[\d+\] celery\.worker\.consumer\.connection: the broker is back "
                      rf"\({re.escape(redis_server.url)}\) after \d+ s: consuming again$",
                      re.MULTILINE)
    before = [len(w.log()) for w in workers]
    restarted = redis_server.restart(signal.SIGTERM, down=3)
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not all(
                back.search(w.log()[n:]) for w, n in zip(workers, before, strict=True)):
            time.sleep(0.5)
        time.sleep(2)  # anything Celery logs after reconnecting
        for worker, n in zip(workers, before, strict=True):
            new = worker.log()[n:]
            assert len(LOST.findall(new)) == 1, new
            assert len(back.findall(new)) == 1, new
            assert "Traceback" not in new, new
            assert not re.search(r" ERROR \[\d+\] ", new), new
            for noise in ("Connection to broker lost", "Cannot connect to",
                          "CPendingDeprecationWarning", "prefetch count"):
                assert noise not in new, new
    finally:
        restarted.stop()
