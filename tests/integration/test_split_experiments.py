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
from opensearchpy.helpers import bulk, scan

from tests.support.api import Api, search_configuration
from tests.support.processes import Server, Worker, helper_units, logs_since
from tests.support.waiting import finished, settled
from workbench.experiments.context import stable_id

#: a hybrid run of these is cut into 8 units of 5 queries: long enough for the helper's Celery hop
#: to come before the parent has done every unit itself, even on a loaded machine
QUERIES = 40
DOCS = 4
EVALUATIONS = "search-relevance-evaluation-result"
VARIANTS = "search-relevance-experiment-variant"
HISTORY = ".search-relevance-scheduled-experiment-history"
PARENT_DONE = re.compile(r"Task workbench\.experiments\.run\[[^\]]+\] succeeded")
#: what differs between two runs of the same experiment: when, how long, and the ids
VOLATILE = {"id", "timestamp", "took", "experimentId", "experimentVariantId"}


@pytest.fixture(scope="module")
def shop(api: Api, direct: OpenSearch, worker: Worker) -> Iterator[dict[str, Any]]:
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
        return search_configuration(api, name, index, query)

    by_rank = config("by rank", '{"query":{"match":{"title":"%SearchText%"}},'
                                '"sort":[{"rank":"asc"}]}')
    by_score = config("by score", '{"query":{"match":{"description":"%SearchText%"}}}')
    hybrid = config("hybrid", '{"query":{"hybrid":{"queries":['
                              '{"match":{"title":"%SearchText%"}},'
                              '{"match":{"description":"%SearchText%"}}]}}}')
    finished(api, f"/judgments/{judgment}", 180)
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
    yield {"api": Api(server.url), "workers": workers, "queue": crew_env["WORKBENCH_QUEUE"]}
    for worker in workers:
        worker.stop()
    server.stop()


def many_queries(api: Api) -> str:
    """A query set of 600 queries over the shop's items: a run long enough to stop midway."""
    return str(api.srw("PUT", "/query_sets", {"name": "split many", "querySetQueries": [
        {"queryText": f"item{q % QUERIES} red shoe {q}"} for q in range(600)]}).json[
        "query_set_id"])


def run(api: Api, body: dict[str, Any]) -> dict[str, Any]:
    reply = api.srw("PUT", "/experiments", body)
    assert reply.status == 200, reply.data
    done = finished(api, f"/experiments/{reply.json['experiment_id']}", 180)
    assert done["status"] == "COMPLETED", done.get("results")
    return done


def by_experiment(direct: OpenSearch, index: str, experiment_id: str) -> dict[str, Any]:
    direct.indices.refresh(index=index)
    hits = scan(direct, index=index, query={"query": {"term": {"experimentId": experiment_id}}})
    return {h["_id"]: h["_source"] for h in hits}


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
    new = logs_since(crew["workers"], logs, PARENT_DONE)
    parents = [bool(PARENT_DONE.search(text)) for text in new]
    assert parents.count(True) == 1, new
    assert helper_units(new[parents.index(False)]) >= 1, new


def test_a_cancelled_split_experiment_leaves_nothing(crew: dict[str, Any],
                                                     shop: dict[str, Any],
                                                     direct: OpenSearch) -> None:
    api = crew["api"]
    many = many_queries(api)
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


def fire(direct: OpenSearch, celery: Any, queue: str, experiment_id: str) -> str:
    """Start one scheduled run of the experiment on the crew's queue, as the scheduler does
    (a PROCESSING history document, then the job); returns the run id."""
    history_id = str(uuid.uuid4())
    direct.index(index=HISTORY, id=history_id, refresh=True, body={
        "id": history_id, "experimentId": experiment_id, "jobId": experiment_id,
        "jobIndexName": ".search-relevance-scheduled-experiment-jobs",
        "timestamp": time.strftime("%Y-%m-%dT%H:%M:%S.000Z", time.gmtime()),
        "status": "PROCESSING", "results": None})
    celery.send_task("workbench.experiments.scheduled_run", args=[history_id], queue=queue)
    return history_id


def history_done(direct: OpenSearch, history_id: str, timeout: float = 180) -> dict[str, Any]:
    return settled(direct, HISTORY, history_id, timeout, running=("PROCESSING",))


def test_a_scheduled_run_splits_and_equals_the_experiment(
        crew: dict[str, Any], celery: Any, shop: dict[str, Any], direct: OpenSearch) -> None:
    """A scheduled run of a hybrid experiment: split over both workers, its results are the
    experiment's own query by query, and its documents are tagged with the run id."""
    done = run(crew["api"], {
        "type": "HYBRID_OPTIMIZER", "querySetId": shop["querySetId"],
        "searchConfigurationList": [shop["hybrid"]], "judgmentList": [shop["judgment"]],
        "size": 3})
    logs = [w.log() for w in crew["workers"]]
    history_id = fire(direct, celery, crew["queue"], done["id"])
    history = history_done(direct, history_id)
    assert history["status"] == "COMPLETED", history
    assert [r["query_text"] for r in history["results"]] == [
        r["query_text"] for r in done["results"]]
    assert [len(r["evaluationResults"]) for r in history["results"]] == [
        len(r["evaluationResults"]) for r in done["results"]]
    evaluations = by_experiment(direct, EVALUATIONS, done["id"])
    tagged = [e for e in evaluations.values() if e.get("scheduledRunId") == history_id]
    untagged = [e for e in evaluations.values() if "scheduledRunId" not in e]
    assert len(tagged) == len(untagged) > 0

    def content(docs: list[dict[str, Any]]) -> list[str]:
        return sorted(repr((e["searchText"], e["experimentVariantParameters"],
                            e["documentIds"], e["metrics"])) for e in docs)

    assert content(tagged) == content(untagged)
    time.sleep(1)
    new = [w.log()[len(before):] for w, before in zip(crew["workers"], logs, strict=True)]
    assert any(f"experiment {done['id']} split into 8 units" in text for text in new)
    assert sum(helper_units(text) for text in new) >= 1, new


def test_a_split_scheduled_run_past_its_timeout_ends_timeout(
        crew: dict[str, Any], celery: Any, shop: dict[str, Any], direct: OpenSearch) -> None:
    """With ``scheduled_experiments_timeout`` at 2 s, a 600-query hybrid run split over both
    workers stops every worker once the deadline passes and ends TIMEOUT with the reason."""
    api = crew["api"]
    many = many_queries(api)
    experiment_id = api.srw("PUT", "/experiments", {
        "type": "PAIRWISE_COMPARISON", "querySetId": many,
        "searchConfigurationList": [shop["hybrid"], shop["by_rank"]], "size": 3}).json[
        "experiment_id"]
    finished(api, f"/experiments/{experiment_id}", 180)
    # The scheduled run re-runs the stored experiment; make it a hybrid one over 600 queries.
    direct.update(index=".plugins-search-relevance-experiment", id=experiment_id,
                  refresh=True, body={"doc": {"type": "HYBRID_OPTIMIZER",
                                              "searchConfigurationList": [shop["hybrid"]],
                                              "judgmentList": [shop["judgment"]]}})
    logs = [w.log() for w in crew["workers"]]
    setting = "plugins.search_relevance.scheduled_experiments_timeout"
    assert api.call("PUT", "/_cluster/settings", {"persistent": {setting: "2s"}}).status == 200
    try:
        started = time.monotonic()
        history = history_done(direct, fire(direct, celery, crew["queue"], experiment_id),
                               timeout=120)
        elapsed = time.monotonic() - started
    finally:
        api.call("PUT", "/_cluster/settings", {"persistent": {setting: None}})
    assert history["status"] == "TIMEOUT", history
    assert history["results"] == {
        "error": "the scheduled run exceeded scheduled_experiments_timeout"}
    assert elapsed < 60  # stopped, not run to the end
    new = [w.log()[len(before):] for w, before in zip(crew["workers"], logs, strict=True)]
    assert any(f"experiment {experiment_id} split into" in text for text in new), new
