"""Scale-out: how LLM work spreads over worker processes, and a rate limit shared by them.

- One LLM judgment of 10,000 query-document pairs (1,000 calls of 10 hits, 100 ms each) with 1,
  2 and 4 worker processes (one job at a time each), split over them (``jobs.fanout``), against
  the ideal throughput ``workers x concurrency / latency`` calls a second. Two figures per
  worker count: the throughput while the model is being asked (first call sent to last answer,
  from the LLM's own request log; the target, 0.85 of ideal at 4 workers, is on this one) and
  the whole job from the create request to COMPLETED (searching 1,000 queries and writing the
  10,000 ratings do not shrink with more workers).
- One HYBRID_OPTIMIZER experiment over 1,500 queries with 1 and 2 workers
  (``workbench.bench.scale_hybrid``).
- The same model with ``rateLimit.requestsPerMinute`` R, four worker processes each running
  judgments as fast as they may: the call rate the LLM sees over the steady part of the run,
  against R (target: between 0.95 R and R).
"""

from __future__ import annotations

import json
import threading
import time
from contextlib import AbstractContextManager
from typing import Any

from opensearchpy.helpers import bulk

from workbench.bench import scale_hybrid
from workbench.bench.client import Api
from workbench.bench.common import Bench, Result, temp_index, wait_status
from workbench.bench.llm_server import LLMServer

LATENCY = 0.1
CONCURRENCY = 8
DOCS_PER_QUERY = 10  # query sets hold at most 1,000 queries by default
RATE_LIMIT = 600  # requests per minute for the shared-limit run: 10 a second


def _setup(bench: Bench, api: Api, index: str, queries: int) -> dict[str, Any]:
    query_set = api.srw("PUT", "/query_sets", {"name": "bench scale", "querySetQueries": [
        {"queryText": f"item{q:04d}"} for q in range(queries)]}).json["query_set_id"]
    config = api.srw("PUT", "/search_configurations", {
        "name": "bench scale", "index": index,
        "query": '{"query":{"match":{"title":"%SearchText%"}}}'}).json["search_configuration_id"]
    return {"name": "bench scale", "type": "LLM_JUDGMENT", "querySetId": query_set,
            "searchConfigurationList": [config], "size": DOCS_PER_QUERY,
            "contextFields": ["title"], "overwriteCache": True}


def _models(llm: LLMServer) -> str:
    return json.dumps([
        {"id": "bench-judge", "name": "bench", "provider": "openai",
         "base_url": llm.openai_base_url, "model": "m", "api_key_env": "BENCH_KEY"},
        {"id": "bench-limited", "name": "bench limited", "provider": "openai",
         "base_url": llm.openai_base_url, "model": "m", "api_key_env": "BENCH_KEY",
         "rate_limit": {"requestsPerMinute": RATE_LIMIT}}])


class CallClock(AbstractContextManager["CallClock"]):
    """Samples the LLM's call count every 50 ms, to read a rate over part of a run."""

    def __init__(self, llm: LLMServer) -> None:
        self.llm = llm
        self.samples: list[tuple[float, int]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> CallClock:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(5)

    def _run(self) -> None:
        while not self._stop.is_set():
            self.samples.append((time.monotonic(), self.llm.calls))
            time.sleep(0.05)

    def rate_between(self, low: float, high: float) -> float:
        """Calls a second while the count went from ``low`` to ``high`` of its final value."""
        total = self.samples[-1][1]
        first = next(s for s in self.samples if s[1] >= low * total)
        last = next(s for s in self.samples if s[1] >= high * total)
        return (last[1] - first[1]) / (last[0] - first[0])


def run(bench: Bench) -> list[Result]:
    queries = 200 if bench.quick else 1000  # x 10 documents: 2,000 or 10,000 pairs
    results: list[Result] = []
    with LLMServer() as llm, temp_index(bench.client, "bench-scale-products") as index:
        llm.latency = LATENCY
        bulk(bench.client, ({"_index": index, "_id": f"q{q:04d}-{d}",
                             "title": f"item{q:04d} model {d} shoe"}
                            for q in range(queries) for d in range(DOCS_PER_QUERY)),
             refresh=True)
        env = {"WORKBENCH_MODELS": _models(llm), "BENCH_KEY": "k",
               "WORKBENCH_LLM_CONCURRENCY": str(CONCURRENCY)}
        api = bench.api(bench.server(2, "none", None, **env))
        body = _setup(bench, api, index, queries)
        workers = 0
        for wanted in (1, 2, 4):
            while workers < wanted:
                bench.worker(WORKBENCH_WORKER_CONCURRENCY="1", **env)
                workers += 1
            before = len(llm.requests)
            started = time.perf_counter()
            reply = api.srw("PUT", "/judgments", {**body, "modelId": "bench-judge"})
            done = wait_status(api, f"/judgments/{reply.json['judgment_id']}", timeout=1800)
            elapsed = time.perf_counter() - started
            assert done["status"] == "COMPLETED", done
            sent = [r.received for r in llm.requests[before:]]
            calls = len(sent)
            asking = max(sent) + LATENCY - min(sent)  # first call sent to last answer
            ideal = calls * LATENCY / (wanted * CONCURRENCY)
            pairs = queries * DOCS_PER_QUERY
            common = {"LLM calls": calls, "latency per call": f"{LATENCY * 1000:g} ms",
                      "calls at once per worker": CONCURRENCY,
                      "ideal": "workers x concurrency / latency calls a second"}
            results.append(Result(
                "scale", f"one judgment, {pairs} pairs, {wanted} worker(s): asking the model",
                asking, ideal, target=1 / 0.85 if wanted == 4 else None,
                details={**common, "throughput vs ideal": round(ideal / asking, 3),
                         "calls a second": round(calls / asking, 1)}))
            results.append(Result(
                "scale", f"one judgment, {pairs} pairs, {wanted} worker(s): whole job",
                elapsed, ideal,
                details={**common, "throughput vs ideal": round(ideal / elapsed, 3),
                         "seconds outside the asking": round(elapsed - asking, 2)}))
        per_job = 60 if bench.quick else 150
        small = _setup(bench, api, index, per_job)
        with CallClock(llm) as clock:
            ids = [api.srw("PUT", "/judgments", {**small, "modelId": "bench-limited"}).json[
                "judgment_id"] for _ in range(4)]
            for judgment_id in ids:
                done = wait_status(api, f"/judgments/{judgment_id}", timeout=1800)
                assert done["status"] == "COMPLETED", done
        rate = clock.rate_between(0.1, 0.9)
        limit = RATE_LIMIT / 60
        results.append(Result(
            "scale", "rate limit shared by 4 workers: calls a second vs the limit", rate, limit,
            unit="calls/s", target=1.0,
            details={"limit": f"{RATE_LIMIT} requests a minute", "jobs": 4,
                     "calls": 4 * per_job, "window": "10 % to 90 % of the calls",
                     "target band": "0.95 to 1.0 of the limit",
                     "within the band": 0.95 <= rate / limit <= 1.0}))
    return results + scale_hybrid.run(bench)
