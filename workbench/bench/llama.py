"""LLM judgment against a real model server: 20 ESCI queries x 10 hits (200 pairs) rated by
SmolLM2-135M-Instruct on llama.cpp's Python server (``scripts/llama.sh``; ``LLAMA_URL`` names
another server).

The baseline is the model's own time in the same run: the sum of every call's latency
(``metadata.usage.latencyMs``). The server answers one call at a time, so a job can take no
less; the ratio is what the workbench adds around the calls (searches, the judgment cache,
writing the result) plus any time the server sat idle. The details give calls, seconds per
call, and the tokens ``_estimate`` predicted against those the server reported.
"""

from __future__ import annotations

import json
import os
import uuid

from workbench.bench.common import Bench, Result, service_url, timed, wait_status
from workbench.config import Config
from workbench.demo.load import load_demo, read_json

QUERIES = 20
HITS = 10
MODEL = "bench-llama"


def run(bench: Bench) -> list[Result]:
    queries = 5 if bench.quick else QUERIES
    llama = service_url(None, "LLAMA_URL", "llama_url", option=False)
    texts = [q["queryText"] for q in read_json(
        bench.data_file("queryset"))["querySetQueries"][:queries]]
    index = f"bench-llama-{uuid.uuid4().hex[:8]}"
    load_demo(Config.from_env(dict(os.environ, OPENSEARCH_URL=bench.opensearch_url)),
              str(bench.data_file("products")), index, None)
    bench.on_close(lambda: bench.client.indices.delete(index=index, ignore=[404]))
    models = json.dumps([{"id": MODEL, "name": "SmolLM2 on llama.cpp", "provider": "openai",
                          "base_url": llama, "model": "smollm2"}])
    server = bench.server(WORKBENCH_MODELS=models)
    # llama.cpp's Python server answers one call at a time: more at once only queue there,
    # each waiting for the others, until they time out and are sent again (docs/llm-models.md).
    bench.worker(WORKBENCH_MODELS=models, WORKBENCH_WORKER_CONCURRENCY="1",
                 WORKBENCH_LLM_CONCURRENCY="1")
    api = bench.api(server)
    query_set = api.srw("PUT", "/query_sets", {"name": "bench esci", "querySetQueries": [
        {"queryText": text} for text in texts]}).json["query_set_id"]
    config = api.srw("PUT", "/search_configurations", {
        "name": "bench esci", "index": index,
        "query": '{"query":{"match":{"title":"%SearchText%"}}}'}).json["search_configuration_id"]
    body = {"name": "bench llama", "type": "LLM_JUDGMENT", "modelId": MODEL,
            "querySetId": query_set, "searchConfigurationList": [config], "size": HITS,
            "contextFields": ["title"], "overwriteCache": True, "ignoreFailure": True}
    estimate = api.srw("POST", "/judgments/_estimate", body).json

    def judge() -> dict[str, object]:
        reply = api.srw("PUT", "/judgments", body)
        judgment_id = reply.json["judgment_id"]
        wait_status(api, f"/judgments/{judgment_id}", poll=0.2)
        return api.srw("GET", f"/judgments/{judgment_id}").json["hits"]["hits"][0]["_source"]

    wall, done = timed(judge)
    assert isinstance(done, dict) and done["status"] == "COMPLETED", done
    usage = done["metadata"]["usage"]
    failed_queries = done["metadata"].get("failedQueries", 0)
    rated = sum(len(e["ratings"]) for e in done["judgmentRatings"])
    failed = sum(len(e.get("failures", [])) for e in done["judgmentRatings"])
    model_time = usage["latencyMs"] / 1000
    return [Result(
        "llama", f"LLM judgment, {queries} ESCI queries x {HITS} hits, SmolLM2 on llama.cpp",
        wall, model_time, target=None,
        details={
            "LLM calls": usage["llmCalls"],
            "seconds per call": round(model_time / max(1, usage["llmCalls"]), 2),
            "pairs rated / listed as failures": f"{rated} / {failed}",
            "queries that failed outright (ignoreFailure)": failed_queries,
            "input tokens estimated / reported": f"{estimate['inputTokens']} / "
                                                 f"{usage['inputTokens']}",
            "output tokens estimated / reported": f"{estimate['outputTokens']} / "
                                                  f"{usage['outputTokens']}",
            "tokenizer": estimate["tokenizer"],
            "baseline": "the model's own time (sum of call latencies; one call at a time)"})]
