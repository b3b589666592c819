"""LLM judgment: 2,000 query-document pairs against the local OpenAI-compatible server with
100 ms per call, against the bound calls x latency / concurrency; then the same job again, whose
ratings all come from the judgment cache."""

from __future__ import annotations

import json

from opensearchpy.helpers import bulk

from workbench.bench.common import Bench, Result, temp_index, timed, wait_status
from workbench.bench.llm_server import LLMServer

LATENCY = 0.1
CONCURRENCY = 8
DOCS_PER_QUERY = 5


def run(bench: Bench) -> list[Result]:
    queries = 80 if bench.quick else 400  # x 5 documents = 2,000 pairs
    with LLMServer() as llm, temp_index(bench.client, "bench-llm-products") as index:
        llm.latency = LATENCY
        bulk(bench.client, ({"_index": index, "_id": f"q{q:03d}-{d}",
                             "title": f"item{q:03d} model {d} shoe", "price": d}
                            for q in range(queries) for d in range(DOCS_PER_QUERY)),
             refresh=True)
        models = [{"id": "bench-judge", "name": "bench", "provider": "openai",
                   "base_url": llm.openai_base_url, "model": "m", "api_key_env": "BENCH_KEY"}]
        server = bench.server()
        # One process, so the bound holds: a judgment this large is split, and a second
        # process would make another CONCURRENCY calls at once.
        bench.worker(WORKBENCH_MODELS=json.dumps(models), BENCH_KEY="k",
                     WORKBENCH_WORKER_CONCURRENCY="1",
                     WORKBENCH_LLM_CONCURRENCY=str(CONCURRENCY))
        api = bench.api(server)
        query_set = api.srw("PUT", "/query_sets", {"name": "bench", "querySetQueries": [
            {"queryText": f"item{q:03d}"} for q in range(queries)]}).json["query_set_id"]
        config = api.srw("PUT", "/search_configurations", {
            "name": "bench", "index": index,
            "query": '{"query":{"match":{"title":"%SearchText%"}}}'}).json[
            "search_configuration_id"]
        body = {"name": "bench", "type": "LLM_JUDGMENT", "modelId": "bench-judge",
                "querySetId": query_set, "searchConfigurationList": [config],
                "size": DOCS_PER_QUERY, "contextFields": ["title"]}

        def judge(fresh: bool) -> dict[str, object]:
            reply = api.srw("PUT", "/judgments", {**body, "overwriteCache": fresh})
            return wait_status(api, f"/judgments/{reply.json['judgment_id']}")

        # The first run asks the model about every pair (ignoring ratings an earlier benchmark
        # left in the cache); the second finds them all in the cache.
        first_time, first = timed(lambda: judge(True))
        calls = llm.calls
        assert first["status"] == "COMPLETED", first
        bound = calls * LATENCY / CONCURRENCY
        cached_time, _ = timed(lambda: judge(False))
        assert llm.calls == calls, "the cached run called the LLM"
        pairs = queries * DOCS_PER_QUERY
        return [
            Result("llm", f"first run, {pairs} pairs", first_time, bound, target=1.15,
                   details={"LLM calls": calls, "latency per call": f"{LATENCY * 1000:g} ms",
                            "concurrency": CONCURRENCY,
                            "bound": "calls x latency / concurrency"}),
            Result("llm", "cached re-run vs first run", cached_time, first_time, target=0.05,
                   details={"LLM calls in the re-run": llm.calls - calls}),
        ]
