"""API memory after a large request: the resident memory of the API's processes before, at the
peak of, and 30 s after one 500,000-rating ``IMPORT_JUDGMENT`` (a 19 MB body), as ratios to the
memory before.

The API is ``workbench serve`` with two workers and no front (``WORKBENCH_FRONT=none``), so its
process tree is the gunicorn master and its workers; their RSS is summed (psutil). The baseline
is taken after a warm-up of small requests (a few creates, reads and lists, from two clients so
that both workers serve some) and a pause; the peak is the largest of samples taken every 0.2 s
while the import is sent and answered; the last figure is taken 30 s after the answer, with no
other request in between. A Celery worker runs the import's job (its memory is not the API's).

The same run is made twice, each with a server of its own: with the default
``WORKBENCH_WEB_RECYCLE_BYTES`` (the worker that read the body is replaced once it has answered)
and with recycling off (``WORKBENCH_WEB_RECYCLE_BYTES=0``: the worker stays, and collects and
trims its heap after the request; serving/gunicorn_app.py, ``Recycler``). ``--quick`` imports
250,000 ratings (a 9.6 MB body, still above the default threshold).
"""

from __future__ import annotations

import json
import statistics
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import psutil

from workbench.bench.client import Api
from workbench.bench.common import Bench, Result
from workbench.bench.processes import Server

NAME = "memory"
RATINGS, QUICK_RATINGS = 500_000, 250_000
PER_QUERY = 100
AFTER_SECONDS = 30.0
SAMPLE_SECONDS = 0.2
TARGET = 1.25  # RSS 30 s after the import, at most this times the baseline
MIB = 1024 * 1024
JUDGMENTS = "/_plugins/_search_relevance/judgments"


def import_body(ratings: int, name: str = "bench memory") -> bytes:
    """An ``IMPORT_JUDGMENT`` of ``ratings`` ratings, ``PER_QUERY`` a query, as a client sends
    it (string ratings, as ESCI's are)."""
    queries = max(1, ratings // PER_QUERY)
    return json.dumps({"name": name, "type": "IMPORT_JUDGMENT", "judgmentRatings": [
        {"query": f"bench query {q}", "ratings": [
            {"docId": f"B{q:06d}{d:03d}", "rating": str(d % 4)} for d in range(PER_QUERY)]}
        for q in range(queries)]}).encode()


def tree_rss(pid: int) -> tuple[int, dict[int, int]]:
    """Summed RSS of a process and its descendants, and each one's (a process that exits while
    it is read counts as nothing)."""
    each: dict[int, int] = {}
    try:
        root = psutil.Process(pid)
        procs = [root, *root.children(recursive=True)]
    except psutil.NoSuchProcess:
        return 0, each
    for proc in procs:
        try:
            each[proc.pid] = proc.memory_info().rss
        except psutil.NoSuchProcess:
            continue
    return sum(each.values()), each


class Sampler(threading.Thread):
    """Samples ``tree_rss`` every ``SAMPLE_SECONDS`` until stopped; ``peak`` is the largest."""

    def __init__(self, pid: int) -> None:
        super().__init__(daemon=True)
        self.pid = pid
        self.peak = 0
        self.peak_each: dict[int, int] = {}
        self._done = threading.Event()

    def run(self) -> None:
        while True:
            total, each = tree_rss(self.pid)
            if total > self.peak:
                self.peak, self.peak_each = total, each
            if self._done.wait(SAMPLE_SECONDS):
                return

    def stop(self) -> int:
        self._done.set()
        self.join()
        return self.peak


def _warm_up(server: Server) -> None:
    """Small requests from two clients: creates (a 20-rating import, deleted after), gets and
    cluster calls, so each worker has served the routes the import uses."""
    def client(n: int) -> None:
        api = Api(server.url)
        for i in range(5):
            reply = api.call("PUT", JUDGMENTS, raw=import_body(20, f"bench memory warm-up {n}"))
            assert reply.status == 200, reply.data[:300]
            judgment = reply.json["judgment_id"]
            api.call("GET", f"{JUDGMENTS}/{judgment}")
            api.call("GET", "/")
            api.call("GET", f"/_cluster/health?i={i}")
            _wait_done(api, judgment)
            api.call("DELETE", f"{JUDGMENTS}/{judgment}")

    with ThreadPoolExecutor(2) as pool:
        list(pool.map(client, range(2)))


def _wait_done(api: Api, judgment: str, timeout: float = 600) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        reply = api.call("GET", f"{JUDGMENTS}/{judgment}",
                         params={"filter_path": "hits.hits._source.status"})
        status = reply.json["hits"]["hits"][0]["_source"]["status"]
        if status != "PROCESSING":
            return str(status)
        time.sleep(0.5)
    raise TimeoutError(judgment)


def settled_rss(pid: int, seconds: float = 3.0) -> int:
    """The median of a few samples over ``seconds`` (RSS moves a little while idle)."""
    samples = []
    for _ in range(int(seconds / 0.5)):
        samples.append(tree_rss(pid)[0])
        time.sleep(0.5)
    return int(statistics.median(samples))


def measure(bench: Bench, body: bytes, prefix: list[str] | None = None, **env: str
            ) -> dict[str, Any]:
    """One server's figures for one import (bytes; pids of its workers before and after);
    ``prefix``: a command the server runs under (``env -C DIR`` serves another tree)."""
    started = time.perf_counter()
    server = bench.server(2, "none", prefix, WORKBENCH_LOG_LEVEL="INFO", **env)
    try:
        _warm_up(server)
        print(f"   (server and warm-up: {time.perf_counter() - started:.1f} s)", flush=True)
        baseline = settled_rss(server.pid)
        workers_before = sorted(server.worker_pids())
        sampler = Sampler(server.pid)
        sampler.start()
        api = Api(server.url)
        started = time.perf_counter()
        reply = api.call("PUT", JUDGMENTS, raw=body)
        answered = time.perf_counter()
        peak = sampler.stop()
        assert reply.status == 200, reply.data[:500]
        curve = {}
        for mark in (1, 5, 10, 20):
            time.sleep(max(0.0, answered + mark - time.perf_counter()))
            curve[f"{mark} s"] = round(tree_rss(server.pid)[0] / MIB, 1)
        time.sleep(max(0.0, answered + AFTER_SECONDS - time.perf_counter()))
        after, after_each = tree_rss(server.pid)
        workers_after = sorted(server.worker_pids())
        status = _wait_done(api, reply.json["judgment_id"])
        api.call("DELETE", f"{JUDGMENTS}/{reply.json['judgment_id']}")
        return {"baseline": baseline, "peak": peak, "after": after, "curve": curve,
                "import seconds": round(answered - started, 2), "job": status,
                "peak by process": {pid: round(rss / MIB, 1)
                                    for pid, rss in sampler.peak_each.items()},
                "after by process": {pid: round(rss / MIB, 1)
                                     for pid, rss in after_each.items()},
                "master": server.pid, "workers before": workers_before,
                "workers after": workers_after}
    finally:
        server.stop()


def run(bench: Bench) -> list[Result]:
    ratings = QUICK_RATINGS if bench.quick else RATINGS
    body = import_body(ratings)
    bench.worker()
    results = []
    for label, env in (("workers recycled (default)", {}),
                       ("recycling off", {"WORKBENCH_WEB_RECYCLE_BYTES": "0"})):
        figures = measure(bench, body, None, **env)
        base, peak, after = (figures.pop(key) / MIB for key in ("baseline", "peak", "after"))
        replaced = sorted(set(figures["workers before"]) - set(figures["workers after"]))
        details = {"body": f"{len(body) / MIB:.1f} MiB", "baseline MiB": round(base, 1),
                   "peak MiB": round(peak, 1), "after MiB": round(after, 1),
                   "workers replaced": len(replaced), "MiB after": figures.pop("curve"),
                   **figures}
        print(f"   {label}: baseline {base:.1f} MiB, peak {peak:.1f} MiB, "
              f"{AFTER_SECONDS:.0f} s after {after:.1f} MiB ({after / base:.3f}); "
              f"workers replaced: {len(replaced)}", flush=True)
        what = f"API RSS, {ratings:,}-rating import, {label}"
        results.append(Result(NAME, f"{what}: 30 s after vs before", after, base, unit="MiB",
                              target=TARGET if not env else None, details=details))
        results.append(Result(NAME, f"{what}: peak vs before", peak, base, unit="MiB"))
    return results
