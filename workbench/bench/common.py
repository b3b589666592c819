"""Shared pieces of the benchmarks: the services, the workbench processes, timing and results.

Every benchmark measures a workbench path against a baseline taken in the same run on the same
machine and reports the ratio; absolute seconds vary from machine to machine, ratios much less.

The benchmarks are installed with the package, so an operator can measure the deployed thing:
the services come from ``--opensearch-url``/``--redis-url`` (else ``OPENSEARCH_URL``/
``REDIS_URL``); only a source checkout can start them when none is given, as the tests do
(tests/support/services.py). With ``--workbench-url`` the benchmarks that can measure a running
workbench do so instead of starting ``workbench serve`` and ``workbench worker`` of their own.
"""

from __future__ import annotations

import contextlib
import json
import os
import statistics
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

from opensearchpy import OpenSearch

from workbench.bench.client import Api
from workbench.bench.paths import output
from workbench.bench.processes import CHECKOUT, Server, Worker, base_env
from workbench.config import REPO_ROOT

REPO = REPO_ROOT


@dataclass
class Result:
    """One measured ratio: ``measured / baseline`` (lower is better unless ``higher_is_better``)."""

    benchmark: str
    name: str
    measured: float
    baseline: float
    unit: str = "s"
    target: float | None = None
    higher_is_better: bool = False
    details: dict[str, Any] = field(default_factory=dict)

    @property
    def ratio(self) -> float:
        return self.measured / self.baseline if self.baseline else float("inf")

    @property
    def met(self) -> bool | None:
        if self.target is None:
            return None
        return self.ratio >= self.target if self.higher_is_better else self.ratio <= self.target

    def as_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out.update(ratio=self.ratio, met=self.met)
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Result:
        return cls(**{k: v for k, v in data.items() if k not in ("ratio", "met")})


class Bench:
    """The environment one benchmark run shares: services, clients, processes it started.

    The services are looked up when a benchmark first needs them (``metrics`` needs none)."""

    def __init__(self, quick: bool = False, out: Path | None = None,
                 options: dict[str, Any] | None = None) -> None:
        self.quick = quick
        #: the report folder (a benchmark with more figures than the report writes them there)
        self.out = out or output("bench")
        #: the options of one benchmark (``--llm-url``...), as the command line gave them
        self.options = dict(options or {})
        #: a running workbench to measure (``--workbench-url``) instead of starting one
        self.workbench_url: str | None = (self.options.get("workbench_url") or "").rstrip("/") \
            or None
        self.queue = f"bench-{uuid.uuid4().hex[:8]}"
        self._stops: list[Callable[[], None]] = []

    @cached_property
    def opensearch_url(self) -> str:
        return service_url(self.options.get("opensearch_url"), "OPENSEARCH_URL", "opensearch_url")

    @cached_property
    def redis_url(self) -> str:
        return service_url(self.options.get("redis_url"), "REDIS_URL", "redis_url")

    @cached_property
    def env(self) -> dict[str, str]:
        return base_env(self.opensearch_url, self.redis_url, WORKBENCH_QUEUE=self.queue,
                        WORKBENCH_LOG_LEVEL="WARNING")

    @cached_property
    def client(self) -> OpenSearch:
        return OpenSearch(hosts=[self.opensearch_url], timeout=600)

    def data_file(self, name: str) -> Path:
        """One of the ESCI/UBI files (``DATA_FILES``), of ``--data DIR`` or shipped."""
        return data_file(self.options.get("data"), name)

    def server(self, workers: int = 2, front: str = "none", prefix: list[str] | None = None,
               **env: str) -> Server:
        """``workbench serve``; ``prefix`` is a command it runs under (``env -C DIR`` serves
        another tree). One that does not come up is stopped before the error is raised. With
        ``--workbench-url``, that workbench (a benchmark that runs there takes care that it
        needs none of ``env``'s settings; run.py skips the others)."""
        if self.workbench_url:
            return Deployed(self.workbench_url)
        srv = _StoppedOnFailure(dict(self.env, **env), workers=workers, front=front,
                                prefix=prefix)
        self._stops.append(srv.stop)
        return srv

    def on_close(self, fn: Callable[[], None]) -> None:
        """Run ``fn`` when the benchmark's processes stop (after those started later)."""
        self._stops.append(fn)

    def worker(self, **env: str) -> Worker | None:
        """``workbench worker`` on this run's queue; None with ``--workbench-url`` (the
        deployed workbench's workers run the jobs)."""
        if self.workbench_url:
            return None
        wrk = Worker(dict(self.env, **env), queue=env.get("WORKBENCH_QUEUE", self.queue))
        self._stops.append(wrk.stop)
        return wrk

    def api(self, server: Server) -> Api:
        return Api(server.url)

    def close(self) -> None:
        while self._stops:
            with contextlib.suppress(Exception):  # tearing down; keep going
                self._stops.pop()()


class Deployed(Server):
    """A workbench already running at ``url`` (``--workbench-url``): nothing to start or stop."""

    def __init__(self, url: str) -> None:  # no process of ours: Server's start is not called
        self.url = url
        self.front = "deployed"

    @property
    def pid(self) -> int:
        raise RuntimeError(f"the workbench at {self.url} is not a process of this run")

    def stop(self, sig: int = 0, timeout: float = 0) -> None:
        return None


def service_url(given: str | None, variable: str, start: str, option: bool = True) -> str:
    """A service's URL: the option, else the environment variable, else one started as the
    tests start it (``tests/support/services.py``, function ``start``), which only a source
    checkout can do."""
    url = given or os.environ.get(variable)
    if url:
        return url.rstrip("/")
    if CHECKOUT is None or not (CHECKOUT / "tests" / "support" / "services.py").is_file():
        flag = f"give --{variable.lower().replace('_', '-')} or " if option else ""
        raise SystemExit(f"workbench bench: no {variable}: {flag}set {variable} (starting the "
                         "services needs a source checkout)")
    import importlib
    import sys

    if str(CHECKOUT) not in sys.path:
        sys.path.insert(0, str(CHECKOUT))
    services = importlib.import_module("tests.support.services")
    return str(getattr(services, start)()).rstrip("/")


#: the ESCI/UBI files the benchmarks read: name -> (the file under ``--data DIR``, in the
#: plugin sample's layout; the file shipped in workbench/demo/data)
DATA_FILES = {
    "queryset": ("esci/esci_us_queryset.json", "esci_us_queryset.json.gz"),
    "judgments": ("esci/esci_us_judgments.json", "esci_us_judgments.json.gz"),
    "products": ("ubi-sample/ubi_ecommerce_products.json.gz", "ubi_ecommerce_products.json.gz"),
}


def data_file(data: str | None, name: str) -> Path:
    """A file of ``DATA_FILES``: of ``data`` when given, else the demo data the package ships
    (``workbench load-demo``'s; read them with ``workbench.demo.load.read_json``)."""
    from workbench.demo.load import DATA

    under_data, shipped = DATA_FILES[name]
    return Path(data) / under_data if data else DATA / shipped


class _StoppedOnFailure(Server):
    """A Server whose process is stopped when it does not come up (a start that times out
    would otherwise leave it running, with no object to stop it by)."""

    def _wait(self, wait_cluster: bool, timeout: float = 90) -> None:
        try:
            super()._wait(wait_cluster, timeout)
        except RuntimeError:
            self.stop()
            raise


def timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    started = time.perf_counter()
    value = fn()
    return time.perf_counter() - started, value


def median_of(runs: int, fn: Callable[[], Any]) -> float:
    """Median wall time of ``runs`` calls (the machines are noisy)."""
    return statistics.median(timed(fn)[0] for _ in range(runs))


def peak_rss(pid: int) -> int:
    """VmHWM of a process: the most resident memory it has had, in bytes."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError(f"no VmHWM for {pid}")


def wait_status(api: Api, path: str, done: tuple[str, ...] = ("COMPLETED", "ERROR"),
                timeout: float = 3600, poll: float = 0.02) -> dict[str, Any]:
    """Poll an SRW entity until it leaves PROCESSING; fine polling keeps the error small."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        reply = api.srw("GET", path, params={"filter_path": "hits.hits._source.status,"
                                                            "hits.hits._source.metadata.error"})
        source = reply.json["hits"]["hits"][0]["_source"]
        if source["status"] in done:
            return source
        time.sleep(poll)
    raise TimeoutError(path)


@contextmanager
def temp_index(client: OpenSearch, name: str, body: dict[str, Any] | None = None
               ) -> Iterator[str]:
    client.indices.delete(index=name, ignore=[404])
    client.indices.create(index=name, body=body or {})
    try:
        yield name
    finally:
        client.indices.delete(index=name, ignore=[404])


def previous_results(out_dir: Path, replaced: set[str]) -> tuple[list[Result], list[str]]:
    """The results of an earlier report in ``out_dir`` for benchmarks not run now, and that
    report's commands: a partial run (``--only``) updates its part and keeps the rest."""
    path = out_dir / "report.json"
    if not path.exists():
        return [], []
    data = json.loads(path.read_text())
    kept = [Result.from_dict(r) for r in data.get("results", []) if r["benchmark"] not in replaced]
    meta = data.get("meta", {})
    runs = meta.get("runs") or [f"{meta.get('command', '?')} ({meta.get('date', '?')})"]
    return kept, (runs if kept else [])


def write_report(results: list[Result], out_dir: Path, meta: dict[str, Any]) -> Path:
    """``report.json`` (every figure) and ``report.md`` (the table docs/performance.md quotes)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "report.json").write_text(json.dumps(
        {"meta": meta, "results": [r.as_dict() for r in results]}, indent=2))
    lines = [
        f"# Benchmarks ({meta.get('date', '')})", "",
        f"Machine: {meta.get('machine', '')}. Runs: "
        + "; ".join(f"`{run}`" for run in meta.get("runs", [])), "",
        "| Benchmark | Measurement | Workbench | Baseline | Ratio | Target | Met |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in results:
        target = "" if r.target is None else (f">= {r.target:g}" if r.higher_is_better
                                              else f"<= {r.target:g}")
        met = "" if r.met is None else ("yes" if r.met else "**no**")
        lines.append(f"| {r.benchmark} | {r.name} | {r.measured:.4g} {r.unit} | "
                     f"{r.baseline:.4g} {r.unit} | {r.ratio:.3f} | {target} | {met} |")
    notes = [f"- **{r.benchmark} / {r.name}**: " + ", ".join(
        f"{k} {v}" for k, v in r.details.items()) for r in results if r.details]
    if notes:
        lines += ["", "Details:", "", *notes]
    skipped = meta.get("skipped") or {}
    if skipped:
        lines += ["", "Skipped (a deployed workbench measured, --workbench-url):", "",
                  *(f"- **{name}**: {why}" for name, why in skipped.items())]
    path = out_dir / "report.md"
    path.write_text("\n".join(lines) + "\n")
    return path


def machine() -> str:
    cores = os.cpu_count()
    mem = next((line.split()[1] for line in Path("/proc/meminfo").read_text().splitlines()
                if line.startswith("MemTotal")), "?")
    return f"{cores} cores, {int(mem) // 1024 // 1024} GiB"


def ms(values: list[float]) -> list[float]:
    """Seconds as milliseconds to 0.1, for a result's details."""
    return [round(1000 * v, 1) for v in values]


def ensure_demo_index(bench: Bench, index: str) -> None:
    """The UBI sample's product catalogue in ``index``, loaded when the index is missing."""
    from workbench.config import Config
    from workbench.demo.load import load_demo

    if not bench.client.indices.exists(index=index):
        load_demo(Config.from_env(bench.env), str(bench.data_file("products")), index, None)
