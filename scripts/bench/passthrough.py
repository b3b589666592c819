"""Pass-through: ``_search`` and ``_bulk`` through the workbench vs directly to the cluster.

A closed-loop load generator on loopback (``wrk`` with Lua scripts for the POST bodies; a Python
generator, labelled as such, when ``wrk`` is missing) runs for a bounded time against the cluster
and against the workbench in front of it, served both ways (gunicorn alone, and the nginx front of
``workbench/serving/front.py``), alternately, for several rounds; the medians give the throughput
ratio (target: >= 80% of direct) and the latency each adds at p50 and p99, under load and with a
single connection (where no queueing hides or inflates the per-request cost).

Everything shares one machine: the cluster, the workbench's gunicorn workers and the generator
compete for the same cores, so "direct" also gets the CPU that the workbench would use. That is
the honest comparison for a co-located proxy and is why the figures are ratios.
"""

from __future__ import annotations

import http.client
import json
import os
import random
import re
import resource
import shutil
import statistics
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from scripts.bench.common import Bench, Result, temp_index
from workbench.config import Config

NAME = "passthrough"
SEARCH_INDEX = "bench-passthrough-search"
BULK_INDEX = {"direct": "bench-passthrough-bulk-direct", "gunicorn": "bench-passthrough-bulk-via",
              "nginx": "bench-passthrough-bulk-front",
              "nginx without door": "bench-passthrough-bulk-nodoor"}
# The workbench as it can be served (WORKBENCH_FRONT): gunicorn alone, and nginx in front of it,
# behind the door that fixes slash-less request lines (the default) and without it.
VIA = {"gunicorn": "gunicorn alone (WORKBENCH_FRONT=none)",
       "nginx": "door and nginx front (WORKBENCH_FRONT=nginx)",
       "nginx without door": "nginx front alone (WORKBENCH_FRONT=nginx, WORKBENCH_DOOR=false)"}
# Environment of each way of serving it.
SERVED = {"gunicorn": {"WORKBENCH_FRONT": "none"}, "nginx": {"WORKBENCH_FRONT": "nginx"},
          "nginx without door": {"WORKBENCH_FRONT": "nginx", "WORKBENCH_DOOR": "false"}}
DOCS = 10_000
BULK_ACTIONS = 100  # index actions per _bulk request
BULK_BODIES = 100  # distinct bodies cycled through: ids stay within BULK_ACTIONS x BULK_BODIES
SEARCH_BODIES = 64  # distinct match queries cycled through

# Closed loop: each connection sends its next request when the previous answer is in. Two wrk
# threads (one per core) and 16 connections keep the cluster and the workbench busy while the
# generator itself stays a small share of the CPU (wrk is C and epoll; ~5-10% of one core here).
THREADS = 2
CONNECTIONS = 16
WORDS = [
    "red", "blue", "green", "black", "white", "small", "large", "light", "heavy", "soft", "hard",
    "warm", "cold", "fast", "slow", "new", "old", "shoe", "boot", "sock", "shirt", "jacket",
    "coat", "hat", "glove", "scarf", "bag", "belt", "watch", "ring", "lamp", "chair", "table",
    "desk", "sofa", "bed", "pillow", "blanket", "towel", "cup", "mug", "plate", "bowl", "knife",
    "fork", "spoon", "pan", "pot", "kettle", "phone", "cable", "charger", "speaker", "laptop",
    "screen", "mouse", "keyboard", "camera", "lens", "tripod", "bike", "helmet", "tent", "stove",
    "bottle", "rope", "map", "compass", "book", "pen", "pencil", "paper", "cotton", "wool",
    "leather", "steel", "wood", "glass", "plastic", "organic", "classic", "modern", "vintage",
    "sport", "outdoor", "kitchen", "office", "travel", "kids", "women", "men"
]


@dataclass
class Load:
    """One bounded load run: what the generator saw."""

    requests: int
    seconds: float
    p50_ms: float
    p99_ms: float
    errors: int
    generator_cpu: float = 0.0  # CPU seconds the load generator itself used

    @property
    def rps(self) -> float:
        return self.requests / self.seconds if self.seconds else 0.0

    @property
    def generator_share(self) -> float:
        """The generator's CPU as a share of the machine's (all cores) during the run."""
        return self.generator_cpu / (self.seconds * (os.cpu_count() or 1)) if self.seconds else 0.0


@dataclass
class Scenario:
    """A request mix: one path, a content type and bodies cycled through in order."""

    name: str
    path: str
    content_type: str
    bodies: list[str]


def run(bench: Bench) -> list[Result]:
    rounds = 1 if bench.quick else 3
    seconds = 4.0 if bench.quick else 12.0
    warmup = 2.0 if bench.quick else 4.0
    single_seconds = 3.0 if bench.quick else 6.0
    generator = Generator()
    config = Config.from_env(bench.env)
    workers = Config().web_workers  # the production default, not the harness's 2
    targets = {"direct": bench.opensearch_url}
    for via in VIA:
        env = SERVED[via]
        targets[via] = bench.server(workers=workers, front=env["WORKBENCH_FRONT"],
                                    **{k: v for k, v in env.items() if k != "WORKBENCH_FRONT"}
                                    ).url
    settings = {
        "generator": generator.label,
        "loaded runs": f"{THREADS} threads, {CONNECTIONS} connections, {seconds:g} s",
        "single-connection runs": f"1 thread, 1 connection, {single_seconds:g} s",
        "warm-up": f"{warmup:g} s per side and operation",
        "rounds": f"{rounds}, sides alternating",
        "workbench": f"{workers} gunicorn gthread workers x {config.web_threads} threads "
                     "(production defaults); the nginx front runs one nginx worker per core",
    }

    results: list[Result] = []
    with temp_index(bench.client, SEARCH_INDEX, _index_body()), \
            _bulk_indices(bench, BULK_INDEX.values()):
        _load_search_index(bench)
        scenarios = [_search_scenario(), _bulk_scenario()]
        for scenario in scenarios:
            for side, base in targets.items():
                _check(base, _for_side(scenario, side))
                generator.run(base, _for_side(scenario, side), warmup, CONNECTIONS)
        tag = "" if generator.wrk else " [Python generator]"  # never mistaken for wrk figures
        loaded: dict[tuple[str, str], list[Load]] = {}
        single: dict[tuple[str, str], list[Load]] = {}
        for round_no in range(rounds):
            # Alternate which side goes first, so a drift in machine load hits both alike.
            order = list(targets) if round_no % 2 == 0 else list(reversed(targets))
            for scenario in scenarios:
                for side in order:
                    _reset_bulk_index(bench, scenario, side)
                    job = _for_side(scenario, side)
                    key = (scenario.name + tag, side)
                    loaded.setdefault(key, []).append(
                        generator.run(targets[side], job, seconds, CONNECTIONS))
                    single.setdefault(key, []).append(
                        generator.run(targets[side], job, single_seconds, 1))
        for scenario in scenarios:
            for via in VIA:
                results += _results(scenario.name + tag, via, loaded, single, settings)
    return results


def _results(op: str, via: str, loaded: dict[tuple[str, str], list[Load]],
             single: dict[tuple[str, str], list[Load]], settings: dict[str, Any]
             ) -> list[Result]:
    """Throughput (with target) and p50/p99 latency (no target) of one way of serving the
    workbench against direct, medians over the rounds."""

    def med(runs: dict[tuple[str, str], list[Load]], side: str, attr: str) -> float:
        return float(statistics.median(getattr(load, attr) for load in runs[(op, side)]))

    def per_round(runs: dict[tuple[str, str], list[Load]], side: str, attr: str) -> list[float]:
        return [round(getattr(load, attr), 2) for load in runs[(op, side)]]

    errors = {side: sum(load.errors for load in loaded[(op, side)] + single[(op, side)])
              for side in ("direct", via)}
    ratios = [round(through.rps / direct.rps, 3) for through, direct in
              zip(loaded[(op, via)], loaded[(op, "direct")], strict=True)]
    generator = max(load.generator_share for side in ("direct", via)
                    for load in loaded[(op, side)])
    label = f"{op} via {via} ({CONNECTIONS} connections)"
    out = [Result(NAME, f"{label} throughput", med(loaded, via, "rps"),
                  med(loaded, "direct", "rps"), unit="req/s", target=0.8,
                  higher_is_better=True,
                  details=dict(settings, **{
                      "served by": VIA[via],
                      "req/s per round via": per_round(loaded, via, "rps"),
                      "req/s per round direct": per_round(loaded, "direct", "rps"),
                      "ratio per round": ratios,
                      "generator CPU (max, share of all cores)": f"{generator:.0%}",
                      "errors (non-2xx, socket) via/direct":
                          f"{errors[via]}/{errors['direct']}"}))]
    for pct in ("p50_ms", "p99_ms"):
        through, direct = med(loaded, via, pct), med(loaded, "direct", pct)
        out.append(Result(NAME, f"{label} latency {pct[:3]}", through, direct, unit="ms",
                          details={"added ms": round(through - direct, 3)}))
    through, direct = med(single, via, "p50_ms"), med(single, "direct", "p50_ms")
    out.append(Result(NAME, f"{op} via {via} (1 connection) latency p50", through, direct,
                      unit="ms", details={"added ms": round(through - direct, 3),
                               "p99 via/direct ms": f"{med(single, via, 'p99_ms'):.3f}/"
                                                    f"{med(single, 'direct', 'p99_ms'):.3f}",
                               "req/s via/direct": f"{med(single, via, 'rps'):.0f}/"
                                                   f"{med(single, 'direct', 'rps'):.0f}"}))
    return out


# ---------------------------------------------------------------------------------------------
# Data and request bodies


def _index_body() -> dict[str, Any]:
    return {
        "settings": {"number_of_shards": 1, "number_of_replicas": 0},
        "mappings": {"properties": {
            "title": {"type": "text"}, "description": {"type": "text"},
            "category": {"type": "keyword"}, "price": {"type": "float"},
        }},
    }


def _document(rng: random.Random) -> dict[str, Any]:
    return {
        "title": " ".join(rng.choices(WORDS, k=rng.randint(3, 6))),
        "description": " ".join(rng.choices(WORDS, k=rng.randint(15, 40))),
        "category": rng.choice(WORDS[:16]),
        "price": round(rng.uniform(1, 500), 2),
    }


def _load_search_index(bench: Bench) -> None:
    """~10k small product documents, one segment, so every run searches the same index."""
    rng = random.Random(7)
    for start in range(0, DOCS, 2000):
        lines = []
        for i in range(start, min(start + 2000, DOCS)):
            lines.append(json.dumps({"index": {"_index": SEARCH_INDEX, "_id": str(i)}}))
            lines.append(json.dumps(_document(rng)))
        reply = bench.client.bulk(body="\n".join(lines) + "\n")
        if reply["errors"]:
            raise RuntimeError("loading the search index failed")
    bench.client.indices.refresh(index=SEARCH_INDEX)
    bench.client.indices.forcemerge(index=SEARCH_INDEX, max_num_segments=1)


def _search_scenario() -> Scenario:
    rng = random.Random(11)
    bodies = [json.dumps({
        "size": 10,
        "query": {"multi_match": {"query": " ".join(rng.sample(WORDS, rng.randint(1, 3))),
                                  "fields": ["title^2", "description"]}},
    }) for _ in range(SEARCH_BODIES)]
    return Scenario("_search", f"/{SEARCH_INDEX}/_search", "application/json", bodies)


def _bulk_scenario() -> Scenario:
    """BULK_BODIES bodies of BULK_ACTIONS index actions with fixed ids: the index stays bounded
    at BULK_ACTIONS x BULK_BODIES documents however long the run (later passes overwrite)."""
    rng = random.Random(13)
    bodies = []
    for b in range(BULK_BODIES):
        lines = []
        for a in range(BULK_ACTIONS):
            lines.append(json.dumps({"index": {"_id": str(b * BULK_ACTIONS + a)}}))
            lines.append(json.dumps(_document(rng)))
        bodies.append("\n".join(lines) + "\n")
    return Scenario("_bulk", "/{index}/_bulk", "application/x-ndjson", bodies)


def _for_side(scenario: Scenario, side: str) -> Scenario:
    """The scenario for one side: bulk writes go to that side's own index."""
    path = scenario.path.replace("{index}", BULK_INDEX[side])
    return Scenario(scenario.name, path, scenario.content_type, scenario.bodies)


@contextmanager
def _bulk_indices(bench: Bench, names: Any) -> Iterator[None]:
    try:
        for name in names:
            _recreate(bench, name)
        yield
    finally:
        for name in names:
            bench.client.indices.delete(index=name, ignore=[404])


def _recreate(bench: Bench, name: str) -> None:
    bench.client.indices.delete(index=name, ignore=[404])
    bench.client.indices.create(index=name, body=_index_body())


def _reset_bulk_index(bench: Bench, scenario: Scenario, side: str) -> None:
    """Every bulk run starts from an empty index (first pass creates, later ones overwrite)."""
    if scenario.name == "_bulk":
        _recreate(bench, BULK_INDEX[side])


def _check(base: str, scenario: Scenario) -> None:
    """One request of the scenario must succeed (a benchmark of 4xx answers measures nothing)."""
    parts = urlsplit(base)
    conn = http.client.HTTPConnection(parts.hostname or "127.0.0.1", parts.port, timeout=60)
    try:
        conn.request("POST", scenario.path, scenario.bodies[0],
                     {"Content-Type": scenario.content_type})
        reply = conn.getresponse()
        body = json.loads(reply.read())
    finally:
        conn.close()
    if reply.status != 200 or body.get("errors") or (
            scenario.name == "_search" and not body["hits"]["hits"]):
        raise RuntimeError(f"{scenario.name} via {base}: {reply.status} {str(body)[:300]}")


# ---------------------------------------------------------------------------------------------
# Load generators


class Generator:
    """``wrk`` when installed, else a threaded Python closed loop (much weaker; labelled)."""

    def __init__(self) -> None:
        self.wrk = shutil.which("wrk")
        self.label = (f"{_wrk_version(self.wrk)} ({self.wrk}), Lua scripts for the POST bodies"
                      if self.wrk else
                      "PYTHON FALLBACK (wrk not installed): http.client threads, one per "
                      "connection; the generator competes for the GIL and the CPU, so "
                      "absolute figures are low and ratios only indicative")

    def run(self, base: str, scenario: Scenario, seconds: float, connections: int) -> Load:
        if self.wrk:
            return _wrk(self.wrk, base, scenario, seconds, connections)
        return _python_load(base, scenario, seconds, connections)


LUA = """
local bodies = %(bodies)s
local path = %(path)s
local ctype = %(ctype)s
local requests = {}
local counter = 0
local next_at = 0

function setup(thread)
  thread:set("id", counter)
  counter = counter + 1
end

function init(args)
  for n, body in ipairs(bodies) do
    requests[n] = wrk.format("POST", path, {["Content-Type"] = ctype}, body)
  end
  -- threads start at different bodies, so concurrent bulk requests write different ids
  next_at = ((id or 0) * math.floor(#requests / 2)) %% #requests
end

function request()
  next_at = next_at %% #requests + 1
  return requests[next_at]
end

function done(summary, latency, requests)
  local e = summary.errors
  io.write(string.format(
    "WRKJSON {\\"requests\\":%%d,\\"duration_us\\":%%d,\\"p50_us\\":%%d,\\"p99_us\\":%%d," ..
    "\\"errors\\":%%d}\\n",
    summary.requests, summary.duration, latency:percentile(50), latency:percentile(99),
    e.connect + e.read + e.write + e.status + e.timeout))
end
"""


def _lua_string(text: str) -> str:
    """A Lua long string that cannot be closed early by the text."""
    level = "=" * 4
    assert f"]{level}]" not in text
    return f"[{level}[{text}]{level}]"


def _wrk(wrk: str, base: str, scenario: Scenario, seconds: float, connections: int) -> Load:
    script = LUA % {
        "bodies": "{" + ",\n".join(_lua_string(b) for b in scenario.bodies) + "}",
        "path": _lua_string(scenario.path),
        "ctype": _lua_string(scenario.content_type),
    }
    threads = min(THREADS, connections)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    with tempfile.TemporaryDirectory(prefix="bench-wrk-") as tmp:
        path = Path(tmp) / f"{scenario.name.strip('_')}.lua"
        path.write_text(script)
        proc = subprocess.run(
            [wrk, f"-t{threads}", f"-c{connections}", f"-d{seconds:g}s", "--timeout", "30s",
             "-s", str(path), base],
            capture_output=True, text=True, timeout=seconds + 120, check=False)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    found = re.search(r"^WRKJSON (\{.*\})$", proc.stdout, re.MULTILINE)
    if proc.returncode != 0 or not found:
        raise RuntimeError(f"wrk failed ({proc.returncode}): {proc.stdout}\n{proc.stderr}")
    stats = json.loads(found.group(1))
    return Load(requests=stats["requests"], seconds=stats["duration_us"] / 1e6,
                p50_ms=stats["p50_us"] / 1000, p99_ms=stats["p99_us"] / 1000,
                errors=stats["errors"],
                generator_cpu=(after.ru_utime - before.ru_utime)
                + (after.ru_stime - before.ru_stime))


def _wrk_version(wrk: str) -> str:
    """``wrk debian/4.1.0-3+b2`` from the first line of its usage text."""
    proc = subprocess.run([wrk, "--version"], capture_output=True, text=True, check=False)
    first = (proc.stdout or proc.stderr).splitlines()[:1]
    found = re.match(r"(wrk \S+)", first[0]) if first else None
    return found.group(1) if found else "wrk"


def _python_load(base: str, scenario: Scenario, seconds: float, connections: int,
                 max_requests: int = 1_000_000) -> Load:
    """Closed loop over ``connections`` keep-alive connections, bounded in time and count."""
    parts = urlsplit(base)
    latencies: list[float] = []
    errors = [0]
    lock = threading.Lock()
    started = time.perf_counter()
    deadline = started + seconds

    def loop(offset: int) -> None:
        conn = http.client.HTTPConnection(parts.hostname or "127.0.0.1", parts.port, timeout=30)
        mine: list[float] = []
        failed = 0
        i = offset
        while time.perf_counter() < deadline and len(latencies) + len(mine) < max_requests:
            body = scenario.bodies[i % len(scenario.bodies)]
            i += 1
            t0 = time.perf_counter()
            try:
                conn.request("POST", scenario.path, body,
                             {"Content-Type": scenario.content_type})
                reply = conn.getresponse()
                reply.read()
                failed += reply.status >= 400
            except (OSError, http.client.HTTPException):
                failed += 1
                conn.close()
                conn = http.client.HTTPConnection(parts.hostname or "127.0.0.1", parts.port,
                                                  timeout=30)
                continue
            mine.append(time.perf_counter() - t0)
        conn.close()
        with lock:
            latencies.extend(mine)
            errors[0] += failed

    cpu_before = time.process_time()
    workers = [threading.Thread(target=loop, args=(c * 7,)) for c in range(connections)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    elapsed = time.perf_counter() - started
    generator_cpu = time.process_time() - cpu_before
    latencies.sort()

    def pct(q: float) -> float:
        return latencies[min(len(latencies) - 1, int(q * len(latencies)))] * 1000 \
            if latencies else 0.0

    return Load(requests=len(latencies), seconds=elapsed, p50_ms=pct(0.5), p99_ms=pct(0.99),
                errors=errors[0], generator_cpu=generator_cpu)
