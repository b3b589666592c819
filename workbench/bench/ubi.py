"""UBI judgment (COEC) on 100k, 1M and 3M generated events (``ubi_data``).

Three ways to the same ratings, timed on the same index in the same run:

* the job: a real ``UBI_JUDGMENT`` through the HTTP API, run by a worker with one pool process
  (its VmHWM is that job's peak memory), timed from the PUT until it leaves PROCESSING;
* the lower bound: the aggregation requests the job sends (``ubi_events.rank_counts`` and
  ``cells``), sent directly; only the time inside ``client.search`` counts;
* the plugin's approach (docs/algorithms.md, "COEC"): scroll every event (pages of 1000, five
  ``_source`` fields) and count in Python, in a subprocess of its own so its VmHWM is clean.

The shard request cache is off on the generated indices (see ``ubi_data.load``), so every run
makes the cluster compute its aggregations again.
"""

from __future__ import annotations

import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import psutil
from opensearchpy import OpenSearch

from workbench.bench import ubi_data
from workbench.bench.client import Api
from workbench.bench.common import REPO, Bench, Result, peak_rss, wait_status
from workbench.config import Config
from workbench.store.client import make_client
from workbench.store.indices import JUDGMENT_INDEX
from workbench.store.repository import Repository

MAX_RANK = 20
SCROLL_PAGE = 1000  # the plugin's page size
ORDINAL = "event_attributes.position.ordinal"
OBJECT_ID = "event_attributes.object.object_id"
SCROLL_FIELDS = ["query_id", "action_name", "user_query", OBJECT_ID, ORDINAL]
MiB = 2**20
#: how often the job's status is read: finer than the common 20 ms, whose wait (10 ms on
#: average) would be a third of the aggregations at 100,000 events
POLL = 0.005

Ratings = dict[tuple[str, str], str]


# ------------------------------------------------------------------------------------------
# (a) the lower bound: the job's own aggregation requests, nothing else


class _TimedClient:
    """Passes calls to a client and adds up the time spent in ``search`` (the cluster's share,
    with the HTTP round trip and JSON decoding every caller pays)."""

    def __init__(self, client: OpenSearch) -> None:
        self._client = client
        self.seconds = 0.0
        self.requests = 0

    def search(self, **kwargs: Any) -> Any:
        started = time.perf_counter()
        try:
            return self._client.search(**kwargs)
        finally:
            self.seconds += time.perf_counter() - started
            self.requests += 1

    def __getattr__(self, name: str) -> Any:
        return getattr(self._client, name)


def aggregations(client: OpenSearch, index: str) -> tuple[float, int, int]:
    """Wall seconds of the job's aggregation requests sent directly the way the job sends them
    (rank CTRs alongside the paged cells), the number of requests and of cells."""
    from workbench.store import ubi_events

    timed_client = _TimedClient(client)
    query = ubi_events.event_filter(MAX_RANK, None, None)
    started = time.perf_counter()
    with ThreadPoolExecutor(1) as pool:
        rates = pool.submit(ubi_events.rank_counts, timed_client, index, query, MAX_RANK)  # type: ignore[arg-type]
        cells = 0
        for _ in ubi_events.cells(timed_client, index, query):  # type: ignore[arg-type]
            cells += 1
        rates.result()
    return time.perf_counter() - started, timed_client.requests, cells


# ------------------------------------------------------------------------------------------
# (b) the plugin's approach: scroll every event


def scroll_coec(client: OpenSearch, index: str, max_rank: int) -> tuple[Ratings, dict[str, int]]:
    """COEC exactly as the plugin computes it (docs/algorithms.md, "COEC"): a terms aggregation for
    the rank CTRs, then every event matching F scrolled and counted per (query, document)."""
    from workbench.judgments.click_models import format_rating

    query = {"bool": {"must": [{"range": {ORDINAL: {"lte": max_rank}}}]}}
    step1 = client.search(index=index, request_timeout=300, body={
        "size": 1000, "query": query,
        "aggs": {"actions": {"terms": {"field": "action_name"}, "aggs": {
            "positions": {"terms": {"field": ORDINAL, "size": max_rank}}}}}})
    clicks_at: dict[int, int] = {}
    shown_at: dict[int, int] = {}
    for action in step1["aggregations"]["actions"]["buckets"]:
        name = str(action["key"]).lower()
        target = clicks_at if name == "click" else shown_at if name == "impression" else None
        if target is not None:
            for position in action["positions"]["buckets"]:
                target[int(position["key"])] = int(position["doc_count"])
    ctr = [clicks_at.get(r, 0) / shown_at[r] if shown_at.get(r, 0) > 0 else 0.0
           for r in range(max_rank)]

    counts: dict[tuple[str, str], list[float]] = {}  # clicks, impressions, best rank
    events = pages = 0
    page = client.search(index=index, scroll="10m", size=SCROLL_PAGE, request_timeout=300,
                         body={"query": query, "_source": SCROLL_FIELDS})
    scroll_id = page.get("_scroll_id")
    try:
        while page["hits"]["hits"]:
            pages += 1
            for hit in page["hits"]["hits"]:
                events += 1
                source = hit["_source"]
                attributes = source.get("event_attributes") or {}
                user_query = source.get("user_query")
                doc = (attributes.get("object") or {}).get("object_id")
                ordinal = (attributes.get("position") or {}).get("ordinal")
                if user_query is None or doc is None or ordinal is None:
                    continue
                entry = counts.setdefault((str(user_query), str(doc)), [0, 0, math.inf])
                action = str(source.get("action_name")).lower()
                if action == "click":
                    entry[0] += 1
                    entry[2] = min(entry[2], int(ordinal))
                elif action == "impression":
                    entry[1] += 1
                    entry[2] = min(entry[2], int(ordinal))
            page = client.scroll(scroll_id=scroll_id, scroll="10m", request_timeout=300)
            scroll_id = page.get("_scroll_id", scroll_id)
    finally:
        if scroll_id:
            client.clear_scroll(scroll_id=scroll_id, ignore=[404])

    ratings: Ratings = {}
    for key, (clicks, shown, rank) in counts.items():
        rate = ctr[int(rank)] if 0 <= rank < max_rank else 0.0
        expected = rate * shown
        ratings[key] = format_rating(clicks / expected if expected > 0 else 0.0)
    return ratings, {"events": events, "pages": pages, "pairs": len(ratings)}


def _scroll_child(index: str, out: str) -> None:
    """Entry point of the measuring subprocess: one scroll run, its figures as JSON on stdout."""
    import workbench.judgments.click_models  # noqa: F401 - imported before, not during, the run

    client = make_client(Config.from_env())
    client.info()  # connect first: the connection is not part of the run
    before = peak_rss_self()
    started = time.perf_counter()
    ratings, facts = scroll_coec(client, index, MAX_RANK)
    seconds = time.perf_counter() - started
    Path(out).write_text(json.dumps([[q, d, r] for (q, d), r in ratings.items()]))
    print(json.dumps({"seconds": seconds, "hwm_before": before, "hwm": peak_rss_self(),
                      **facts}))


def peak_rss_self() -> int:
    return peak_rss(os.getpid())


def scroll_run(bench: Bench, index: str) -> tuple[dict[str, Any], Ratings]:
    """One scroll baseline in a fresh interpreter: its figures and ratings."""
    with tempfile.NamedTemporaryFile(suffix=".json") as out:
        done = subprocess.run(
            [sys.executable, "-m", "workbench.bench.ubi", "scroll", index, out.name],
            env=bench.env, cwd=REPO, capture_output=True, text=True, check=False)
        if done.returncode:
            raise RuntimeError(f"scroll baseline failed:\n{done.stderr[-4000:]}")
        figures = json.loads(done.stdout.strip().splitlines()[-1])
        ratings = {(q, d): r for q, d, r in json.loads(Path(out.name).read_text())}
    return figures, ratings


# ------------------------------------------------------------------------------------------
# the job


def job_run(api: Api, index: str, name: str) -> tuple[float, str]:
    """One UBI_JUDGMENT through the API: wall seconds from the PUT to COMPLETED, and its id."""
    body = {"name": name, "type": "UBI_JUDGMENT", "clickModel": "coec", "maxRank": MAX_RANK,
            "ubiEventsIndex": index}
    started = time.perf_counter()
    reply = api.srw("PUT", "/judgments", body)
    if reply.status != 200:
        raise RuntimeError(f"PUT /judgments: {reply.status} {reply.text[:500]}")
    judgment = reply.json["judgment_id"]
    done = wait_status(api, f"/judgments/{judgment}", poll=POLL)
    seconds = time.perf_counter() - started
    if done["status"] != "COMPLETED":
        raise RuntimeError(f"judgment {judgment} ended {done}")
    return seconds, judgment


def job_ratings(client: OpenSearch, judgment: str) -> Ratings:
    source = client.get(index=JUDGMENT_INDEX, id=judgment)["_source"]
    return {(entry["query"], rating["docId"]): rating["rating"]
            for entry in source["judgmentRatings"] for rating in entry["ratings"]}


def _pool_child(worker_pid: int) -> int:
    """The worker's single pool process (concurrency 1), where the job runs."""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        children = psutil.Process(worker_pid).children()
        if len(children) == 1:
            return children[0].pid
        time.sleep(0.2)
    raise RuntimeError(f"expected one pool process under worker {worker_pid}")


# ------------------------------------------------------------------------------------------
# one size


def measure(bench: Bench, api: Api, queue: str, index: str, n: int) -> dict[str, Any]:
    """Job and lower bound interleaved (runs rounds, after a warm-up of each), then the
    scroll baseline; medians, peak memories, and the cross-check of the ratings."""
    client = make_client(Config.from_env(bench.env))
    job_rounds = 5  # a job takes a second at most: more runs steady the median on a busy box
    scroll_rounds = 1 if n >= 3_000_000 else 3  # the 3M scroll alone takes a minute or more
    worker = bench.worker(WORKBENCH_QUEUE=queue, WORKBENCH_WORKER_CONCURRENCY="1")
    judgments: list[str] = []
    try:
        # a deployed workbench's (--workbench-url) workers are not ours: no memory figures
        child = _pool_child(worker.pid) if worker else None
        idle = peak_rss(child) if child else 0
        aggregations(client, index)  # warm-up: the same file-system cache for both
        judgments.append(job_run(api, index, f"bench-ubi-{n}-warmup")[1])  # lazy imports
        written = Repository(client, JUDGMENT_INDEX).get_source(judgments[-1])
        assert written is not None

        def bound() -> float:
            """The aggregations, then the judgment's finished document written again
            (refreshed): what a client needs before it can read COMPLETED."""
            started = time.perf_counter()
            aggregations(client, index)
            Repository(client, JUDGMENT_INDEX).put(written)
            return time.perf_counter() - started

        lower: list[float] = []
        jobs: list[float] = []
        bounds: list[float] = []
        for run in range(job_rounds):
            seconds, requests, cells = aggregations(client, index)
            lower.append(seconds)
            seconds, judgment = job_run(api, index, f"bench-ubi-{n}-{run}")
            jobs.append(seconds)
            judgments.append(judgment)
            bounds.append(bound())
        if worker and _pool_child(worker.pid) != child:
            raise RuntimeError("the pool process was replaced: its peak memory is lost")
        job_peak = peak_rss(child) if child else 0
        ratings = job_ratings(client, judgments[-1])
    finally:
        if worker:
            worker.stop()
        for judgment in judgments:
            api.srw("DELETE", f"/judgments/{judgment}")
    scrolls: list[dict[str, Any]] = []
    scroll_ratings: Ratings = {}
    for _ in range(scroll_rounds):
        figures, scroll_ratings = scroll_run(bench, index)
        scrolls.append(figures)
    same = scroll_ratings == ratings
    differing = sum(1 for key in set(ratings) | set(scroll_ratings)
                    if ratings.get(key) != scroll_ratings.get(key))
    return {
        "job s": statistics.median(jobs), "job runs": jobs,
        "aggs s": statistics.median(lower), "aggs runs": lower,
        "bound s": statistics.median(bounds), "bound runs": bounds,
        "aggs requests": requests, "cells": cells,
        "scroll s": statistics.median(s["seconds"] for s in scrolls),
        "scroll runs": [s["seconds"] for s in scrolls],
        "scroll pages": scrolls[0]["pages"], "scroll events": scrolls[0]["events"],
        "job peak MiB": job_peak / MiB, "job idle MiB": idle / MiB,
        "scroll peak MiB": max(s["hwm"] for s in scrolls) / MiB,
        "scroll before MiB": min(s["hwm_before"] for s in scrolls) / MiB,
        "pairs": len(ratings), "queries": len({q for q, _ in ratings}),
        "ratings equal": same, "ratings differing": differing,
    }


def _r(values: list[float]) -> list[float]:
    return [round(v, 3) for v in values]


#: the job against its aggregations alone (issue 49): a small job's fixed costs (the create, the
#: queue hop, the final write) weigh more next to aggregations of a few milliseconds
TARGETS = {100_000: 2.5, 1_000_000: 1.5, 3_000_000: 1.5}


def run(bench: Bench) -> list[Result]:
    sizes = (20_000, 100_000) if bench.quick else (100_000, 1_000_000, 3_000_000)
    queue = f"{bench.queue}-ubi"  # our own workers only, whatever else this run started
    server = bench.server(WORKBENCH_QUEUE=queue)
    api = bench.api(server)
    real = ubi_data.real_stats()
    results: list[Result] = []
    figures: dict[int, dict[str, Any]] = {}
    for n in sizes:
        index, load_s = ubi_data.ensure_index(bench.client, n)
        facts = ubi_data.index_facts(bench.client, index)
        check = ubi_data.compare(real, ubi_data.index_stats(bench.client, index))
        print(f"   {index}: " + ("reused" if load_s is None else f"loaded in {load_s:.1f}s")
              + f", {facts}, distribution vs real: {check}", flush=True)
        m = figures[n] = measure(bench, api, queue, index, n)
        common = {"events": n, "index": index,
                  "load s": "cached" if load_s is None else round(load_s, 1), **facts,
                  "judged pairs": m["pairs"], "queries": m["queries"]}
        results.append(Result(
            "ubi", f"COEC job, {n:,} events, vs its aggregations alone", m["job s"], m["aggs s"],
            target=TARGETS.get(n, 1.5), details={
                **common, "job runs s": _r(m["job runs"]), "aggregation runs s": _r(m["aggs runs"]),
                "aggregation requests": m["aggs requests"], "cells": m["cells"],
                "job minus aggregations ms": round(1000 * (m["job s"] - m["aggs s"])),
                "baseline": "rank_counts alongside cells() requests, sent directly (wall time)",
                "job": "PUT to COMPLETED via the API, one worker pool process",
                "distribution vs real": check}))
        results.append(Result(
            "ubi", f"COEC job, {n:,} events, vs its aggregations and final write", m["job s"],
            m["bound s"], details={
                "job runs s": _r(m["job runs"]), "bound runs s": _r(m["bound runs"]),
                "baseline": "the aggregations as above, then the job's finished judgment "
                            "document written again (refresh=true), one after the other"}))
        results.append(Result(
            "ubi", f"COEC job, {n:,} events, vs scroll every event (plugin)", m["job s"],
            m["scroll s"], details={
                "speed-up": f"{m['scroll s'] / m['job s']:.1f}x",
                "scroll runs s": _r(m["scroll runs"]), "scroll page size": SCROLL_PAGE,
                "scroll pages": m["scroll pages"], "events scrolled": m["scroll events"],
                "ratings identical to the job's": m["ratings equal"],
                "ratings differing": m["ratings differing"]}))
    small, large = sizes[0], sizes[-1]
    a, b = figures[small], figures[large]
    results.append(Result(
        "ubi", f"job time, {large:,} vs {small:,} events", b["job s"], a["job s"], details={
            "events x": large // small,
            "aggregations alone x": round(b["aggs s"] / a["aggs s"], 1),
            "scroll x": round(b["scroll s"] / a["scroll s"], 1),
            **{f"job s at {n:,}": round(f["job s"], 3) for n, f in figures.items()}}))
    if not bench.workbench_url:  # a deployed workbench's worker is not a process of ours
        results.append(Result(
            "ubi", f"peak worker RSS, {large:,} vs {small:,} events", b["job peak MiB"],
            a["job peak MiB"], unit="MiB", target=1.25, details={
                "meaning": "<= 1.25 is flat: memory does not grow with the events",
                "measure": "VmHWM of the worker's only pool process over all its runs",
                **{f"peak/idle MiB at {n:,}": f"{f['job peak MiB']:.1f}/"
                                              f"{f['job idle MiB']:.1f}"
                   for n, f in figures.items()}}))
    results.append(Result(
        "ubi", f"scroll baseline peak RSS, {large:,} vs {small:,} events", b["scroll peak MiB"],
        a["scroll peak MiB"], unit="MiB", details={
            "measure": "VmHWM of the subprocess running the scroll",
            **{f"peak/before MiB at {n:,}": f"{f['scroll peak MiB']:.1f}/"
                                            f"{f['scroll before MiB']:.1f}"
               for n, f in figures.items()}}))
    return results


if __name__ == "__main__":
    if sys.argv[1:2] == ["scroll"]:
        _scroll_child(sys.argv[2], sys.argv[3])
