"""Large pointwise and hybrid experiments split over two real workers (``jobs.fanout``): the
same results, evaluation results and variants as one worker gives, both workers doing a share,
and a cancel that leaves nothing behind.

The session's worker runs unsplit (its threshold is the default 100 queries), so its run of the
same experiment is the reference; document ids name the experiment, so documents are compared
by what they say and the ids by how they are built.
"""

from __future__ import annotations

import re
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from opensearchpy import OpenSearch
from opensearchpy.helpers import bulk

from tests.support.api import Api
from tests.support.processes import Server, Worker
from workbench.experiments.context import stable_id

QUERIES = 16
DOCS = 4
EVALUATIONS = "search-relevance-evaluation-result"
VARIANTS = "search-relevance-experiment-variant"
HELPER_DONE = re.compile(r"Task workbench\.jobs\.help\[[^\]]+\] succeeded in [\d.]+s: (\d+)")
PARENT_DONE = re.compile(r"Task workbench\.experiments\.run\[[^\]]+\] succeeded")
#: what differs between two runs of the same experiment: when, how long, and the ids
VOLATILE = {"id", "timestamp", "took", "experimentId", "experimentVariantId"}


@pytest.fixture(scope="module")
def shop(api: Api, direct: OpenSearch) -> Iterator[dict[str, Any]]:
    index = f"test-split-exp-{uuid.uuid4().hex[:6]}"
    direct.indices.create(index=index, body={"mappings": {"properties": {
        "title": {"type": "text"}, "description": {"type": "text"},
        "rank": {"type": "integer"}}}})
    bulk(direct, ({"_index": index, "_id": f"q{q}-d{d}",
                   "title": f"item{q} {'red shoe' if d % 2 else 'blue hat'} {d}",
                   "description": f"item{q} {'red' if d < 2 else 'green'} thing", "rank": d}
                  for q in range(QUERIES) for d in range(DOCS)), refresh=True)
    queries = [f"item{q} red shoe" for q in range(QUERIES)]
    query_set = api.srw("PUT", "/query_sets", {"name": "split exp", "querySetQueries": [
        {"queryText": text} for text in queries]}).json["query_set_id"]
    judgment = api.srw("PUT", "/judgments", {
        "name": f"split-{uuid.uuid4().hex[:6]}", "type": "IMPORT_JUDGMENT",
        "judgmentRatings": [{"query": text, "ratings": [
            {"docId": f"q{q}-d{d}", "rating": str((q + d) % 4)} for d in range(DOCS)]}
            for q, text in enumerate(queries[:-2])]}).json["judgment_id"]  # two unrated

    def config(name: str, query: str) -> str:
        reply = api.srw("PUT", "/search_configurations", {"name": name, "index": index,
                                                          "query": query})
        assert reply.status == 200, reply.data
        return str(reply.json["search_configuration_id"])

    by_rank = config("by rank", '{"query":{"match":{"title":"%SearchText%"}},'
                                '"sort":[{"rank":"asc"}]}')
    by_score = config("by score", '{"query":{"match":{"description":"%SearchText%"}}}')
    hybrid = config("hybrid", '{"query":{"hybrid":{"queries":['
                              '{"match":{"title":"%SearchText%"}},'
                              '{"match":{"description":"%SearchText%"}}]}}}')
    finished(api, f"/judgments/{judgment}")
    yield {"index": index, "querySetId": query_set, "judgment": judgment,
           "by_rank": by_rank, "by_score": by_score, "hybrid": hybrid}
    direct.indices.delete(index=index)


@pytest.fixture(scope="module")
def crew(env: dict[str, str]) -> Iterator[dict[str, Any]]:
    """An API server and two workers (one job at a time each) on a queue of their own, splitting
    any experiment of 4 queries or more."""
    crew_env = dict(env, WORKBENCH_QUEUE=f"split-exp-{uuid.uuid4().hex[:8]}",
                    WORKBENCH_SPLIT_QUERIES="4")
    server = Server(crew_env)
    workers = [Worker(crew_env, extra=["--concurrency", "1"]) for _ in range(2)]
    yield {"api": Api(server.url), "workers": workers}
    for worker in workers:
        worker.stop()
    server.stop()


def finished(api: Api, path: str, timeout: float = 180) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        source = api.srw("GET", path).json["hits"]["hits"][0]["_source"]
        if source["status"] not in ("PROCESSING", "RETRYING"):
            return source  # type: ignore[no-any-return]
        time.sleep(0.2)
    raise AssertionError(f"{path} still running")


def run(api: Api, body: dict[str, Any]) -> dict[str, Any]:
    reply = api.srw("PUT", "/experiments", body)
    assert reply.status == 200, reply.data
    done = finished(api, f"/experiments/{reply.json['experiment_id']}")
    assert done["status"] == "COMPLETED", done.get("results")
    return done


def by_experiment(direct: OpenSearch, index: str, experiment_id: str) -> dict[str, Any]:
    direct.indices.refresh(index=index)
    hits = direct.search(index=index, body={"query": {"term": {"experimentId": experiment_id}},
                                            "size": 10_000})
    return {h["_id"]: h["_source"] for h in hits["hits"]["hits"]}


def written(direct: OpenSearch, experiment: dict[str, Any]) -> dict[str, Any]:
    """The experiment's results with each id replaced by what its document says, and its
    variants' contents in order: equal for two runs of the same experiment."""
    evaluations = by_experiment(direct, EVALUATIONS, experiment["id"])
    variants = by_experiment(direct, VARIANTS, experiment["id"])

    def plain(doc: dict[str, Any]) -> dict[str, Any]:
        out = {k: v for k, v in doc.items() if k not in VOLATILE}
        if isinstance(out.get("results"), dict):
            out["results"] = {k: v for k, v in out["results"].items()
                              if k not in ("took", "evaluationResultId")}
        return out

    def resolve(value: Any) -> Any:
        if isinstance(value, list):
            return [resolve(v) for v in value]
        if isinstance(value, dict):
            return {k: (plain(evaluations[v]) if k == "evaluationId"
                        else plain(variants[v]) if k == "experimentVariantId" else resolve(v))
                    for k, v in value.items()}
        return value

    linked = {e["experimentVariantId"] for e in evaluations.values()}
    return {"results": resolve(experiment["results"]),
            "evaluations": len(evaluations),
            "variants": sorted((plain(v) for v in variants.values()), key=repr),
            "all linked": linked <= set(variants)}


def helper_units(log: str) -> int:
    return sum(int(n) for n in HELPER_DONE.findall(log))


def test_split_pointwise_equals_the_unsplit_run(crew: dict[str, Any], api: Api, worker: Worker,
                                                shop: dict[str, Any],
                                                direct: OpenSearch) -> None:
    body = {"type": "POINTWISE_EVALUATION", "querySetId": shop["querySetId"],
            "searchConfigurationList": [shop["by_rank"], shop["by_score"]],
            "judgmentList": [shop["judgment"]], "size": 3}
    reference = run(api, body)
    done = run(crew["api"], body)
    assert len(done["results"]) == QUERIES * 2
    assert written(direct, done) == written(direct, reference)
    # The ids are the ones a whole run of this experiment names: query position, configuration.
    evaluations = by_experiment(direct, EVALUATIONS, done["id"])
    for number, entry in enumerate(done["results"]):
        query, config = str(number // 2), entry.get("searchConfigurationId")
        if "evaluationId" in entry:
            assert entry["evaluationId"] == stable_id(done["id"], "", "evaluation", config,
                                                      query)
            assert evaluations[entry["evaluationId"]]["experimentVariantId"] == stable_id(
                done["id"], "", "variant", config, query)


def test_split_hybrid_equals_the_unsplit_run_and_both_workers_share_it(
        crew: dict[str, Any], api: Api, worker: Worker, shop: dict[str, Any],
        direct: OpenSearch) -> None:
    body = {"type": "HYBRID_OPTIMIZER", "querySetId": shop["querySetId"],
            "searchConfigurationList": [shop["hybrid"]], "judgmentList": [shop["judgment"]],
            "size": 3}
    reference = run(api, body)
    logs = [w.log() for w in crew["workers"]]
    done = run(crew["api"], body)
    assert len(done["results"]) == QUERIES
    assert written(direct, done) == written(direct, reference)
    first = done["results"][0]["evaluationResults"][0]
    assert first["evaluationId"] == stable_id(done["id"], "", shop["hybrid"], "0", "0",
                                              "evaluation")
    # One worker ran the experiment (and units), the other a helper that did units too.
    time.sleep(1)  # the helper's log line follows the parent's end by a little
    new = [w.log()[len(before):] for w, before in zip(crew["workers"], logs, strict=True)]
    parents = [bool(PARENT_DONE.search(text)) for text in new]
    assert parents.count(True) == 1, new
    assert helper_units(new[parents.index(False)]) >= 1, new


def test_a_cancelled_split_experiment_leaves_nothing(crew: dict[str, Any],
                                                     shop: dict[str, Any],
                                                     direct: OpenSearch) -> None:
    api = crew["api"]
    many = api.srw("PUT", "/query_sets", {"name": "split many", "querySetQueries": [
        {"queryText": f"item{q % QUERIES} red shoe {q}"} for q in range(600)]}).json[
        "query_set_id"]
    experiment_id = api.srw("PUT", "/experiments", {
        "type": "HYBRID_OPTIMIZER", "querySetId": many,
        "searchConfigurationList": [shop["hybrid"]], "judgmentList": [shop["judgment"]],
        "size": 3}).json["experiment_id"]
    deadline = time.monotonic() + 60
    doc: dict[str, Any] = {}
    while time.monotonic() < deadline:
        doc = api.srw("GET", f"/experiments/{experiment_id}").json["hits"]["hits"][0]["_source"]
        assert doc["status"] == "PROCESSING", doc.get("results")
        if (doc.get("progress") or {}).get("done", 0) > 0:
            break
        time.sleep(0.1)
    assert doc["progress"]["unit"] == "pairs" and doc["progress"]["total"] == 600
    assert api.srw("POST", f"/experiments/{experiment_id}/_cancel").status == 200
    done = finished(api, f"/experiments/{experiment_id}", timeout=60)
    assert done["status"] == "ERROR"
    assert done["results"] == [{"error": "cancelled by the user"}]
    assert done["progress"]["done"] < 600
    for _ in range(2):  # nothing written by a unit in flight lands later either
        for index in (EVALUATIONS, VARIANTS):
            assert by_experiment(direct, index, experiment_id) == {}, index
        time.sleep(2)
