"""The post_request hook that gives a large request's memory back (serving/gunicorn_app.py)."""

from __future__ import annotations

from typing import Any

import pytest
from gunicorn.config import Config as GunicornConfig

from workbench.api import BODY_BYTES
from workbench.config import Config
from workbench.serving.gunicorn_app import TRIM_BYTES, Recycler, WorkbenchServer

MIB = 1024 * 1024


class FakeLog:
    def __init__(self) -> None:
        self.lines: list[str] = []

    def info(self, message: str, *args: Any) -> None:
        self.lines.append(message % args)


class FakeWorker:
    def __init__(self) -> None:
        self.alive = True
        self.pid = 4242
        self.log = FakeLog()
        self.cfg = GunicornConfig()
        self.cfg.set("timeout", 90)
        self.cfg.set("graceful_timeout", 30)


class CountingTrim:
    def __init__(self) -> None:
        self.calls = 0

    def __call__(self, pad: int) -> int:
        self.calls += 1
        return 1


def after(recycler: Recycler, size: int | None) -> FakeWorker:
    worker = FakeWorker()
    environ = {} if size is None else {BODY_BYTES: size}
    recycler(worker, None, environ, None)
    return worker


@pytest.fixture
def trim() -> CountingTrim:
    return CountingTrim()


def recycler(limit: int, trim: CountingTrim) -> Recycler:
    hook = Recycler(limit)
    hook.trim = trim
    return hook


def test_a_body_above_the_threshold_retires_the_worker_after_its_requests(
        trim: CountingTrim) -> None:
    worker = after(recycler(8 * MIB, trim), 8 * MIB + 1)
    assert worker.alive is False
    assert worker.cfg.graceful_timeout == 90  # no request in flight is cut short
    assert worker.log.lines == [
        "worker 4242 retires: it read a 8388609-byte request body (more than "
        "WORKBENCH_WEB_RECYCLE_BYTES, 8388608); a fresh worker replaces it once its requests in "
        "flight are answered"]
    assert trim.calls == 0  # the process ends: nothing to give back by hand


def test_a_threshold_below_the_trim_size_retires_too(trim: CountingTrim) -> None:
    worker = after(recycler(64 * 1024, trim), 64 * 1024 + 1)
    assert worker.alive is False and trim.calls == 0


def test_smaller_bodies_and_streamed_ones_keep_the_worker(trim: CountingTrim) -> None:
    hook = recycler(8 * MIB, trim)
    for size in (None, 0, 1000, TRIM_BYTES):
        worker = after(hook, size)
        assert worker.alive and not worker.log.lines
    assert trim.calls == 0
    worker = after(hook, 8 * MIB)  # at the threshold: kept, its heap trimmed
    assert worker.alive and trim.calls == 1


def test_with_recycling_off_a_large_body_is_trimmed_instead(trim: CountingTrim) -> None:
    worker = after(recycler(0, trim), 500 * MIB)
    assert worker.alive and trim.calls == 1 and not worker.log.lines


def test_gunicorn_gets_the_settings() -> None:
    server = WorkbenchServer(Config(web_max_requests=7, web_max_requests_jitter=3,
                                    web_recycle_bytes=5))
    assert server.cfg.max_requests == 7
    assert server.cfg.max_requests_jitter == 3
    hook = server.cfg.post_request
    assert isinstance(hook, Recycler) and hook.recycle_bytes == 5
