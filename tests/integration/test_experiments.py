"""Experiments end to end over HTTP with a real worker: pairwise, pointwise, hybrid, PATCH,
validate, delete cascade, idempotent re-runs and bad input."""

from __future__ import annotations

import json
import math
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from opensearchpy import OpenSearch

from tests.support.api import Api, search_configuration
from tests.support.data import REPO
from tests.support.processes import Worker
from tests.support.waiting import finished
from workbench.jobs.celery_app import celery_app

EXPERIMENTS = ".plugins-search-relevance-experiment"
EVALUATIONS = "search-relevance-evaluation-result"
VARIANTS = "search-relevance-experiment-variant"

# Rank decides the order of equally matching documents, so the result lists are known exactly.
DOCS = [
    ("b", "worked red shoes", "worked running shoes in red", 1, 10),
    ("a", "worked red shoes for trail", "trail shoes", 2, 20),
    ("y", "worked blue shoes", "worked worked blue running shoes", 3, 30),
    ("c", "green hat", "a hat", 4, 40),
    ("x", "yellow sock", "a worked sock", 5, 50),
]


@pytest.fixture(scope="module")
def world(api: Api, direct: OpenSearch, worker: Worker) -> Iterator[dict[str, Any]]:
    index = f"test-exp-{uuid.uuid4().hex[:6]}"
    direct.indices.create(index=index, body={"mappings": {"properties": {
        "title": {"type": "text"}, "description": {"type": "text"},
        "rank": {"type": "integer"}, "price": {"type": "integer"}}}})
    for doc_id, title, description, rank, price in DOCS:
        direct.index(index=index, id=doc_id, body={"title": title, "description": description,
                                                   "rank": rank, "price": price})
    direct.indices.refresh(index=index)

    def config(name: str, query: str) -> str:
        return search_configuration(api, name, index, query)

    by_rank = config("by rank", '{"query":{"match":{"title":"%SearchText%"}},'
                                '"sort":[{"rank":"asc"}]}')
    by_price = config("by price desc", '{"query":{"match":{"title":"%SearchText%"}},'
                                       '"sort":[{"price":"desc"}]}')
    hybrid = config("hybrid", '{"query":{"hybrid":{"queries":['
                              '{"match":{"title":"%SearchText%"}},'
                              '{"match":{"description":"%SearchText%"}}]}}}')
    query_set = api.srw("PUT", "/query_sets", {"name": "worked", "querySetQueries": [
        {"queryText": "worked"}, {"queryText": "nothing matches this"}]}).json["query_set_id"]
    judgment = api.srw("PUT", "/judgments", {"name": "worked example", "type": "IMPORT_JUDGMENT",
                                             "judgmentRatings": [{"query": "worked", "ratings": [
                                                 {"docId": "a", "rating": "3"},
                                                 {"docId": "b", "rating": "1"},
                                                 {"docId": "c", "rating": "0"},
                                                 {"docId": "x", "rating": "2"}]}]}).json[
        "judgment_id"]
    wait(api, f"/judgments/{judgment}")
    yield {"index": index, "by_rank": by_rank, "by_price": by_price, "hybrid": hybrid,
           "querySetId": query_set, "judgment": judgment}
    direct.indices.delete(index=index)


def wait(api: Api, path: str, timeout: float = 180) -> dict[str, Any]:
    return finished(api, path, timeout, interval=0.25)


def create(api: Api, body: dict[str, Any]) -> str:
    reply = api.srw("PUT", "/experiments", body)
    assert reply.status == 200, reply.data
    assert set(reply.json) == {"experiment_id", "experiment_result"}
    assert reply.json["experiment_result"] == "CREATED"
    return str(reply.json["experiment_id"])


def pointwise(world: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {"type": "POINTWISE_EVALUATION", "querySetId": world["querySetId"],
            "searchConfigurationList": [world["by_rank"]], "judgmentList": [world["judgment"]],
            "size": 3, **extra}


def by_experiment(direct: OpenSearch, index: str, experiment_id: str) -> list[dict[str, Any]]:
    direct.indices.refresh(index=index)
    hits = direct.search(index=index, body={"query": {"term": {"experimentId": experiment_id}},
                                            "size": 10_000})
    return [h["_source"] for h in hits["hits"]["hits"]]


def test_pointwise_reproduces_the_worked_example(api: Api, world: dict[str, Any],
                                                 direct: OpenSearch) -> None:
    before = api.srw("GET", "/stats/experiment_pointwise_evaluation_executions").json
    experiment_id = create(api, pointwise(world))
    done = wait(api, f"/experiments/{experiment_id}")
    assert done["status"] == "COMPLETED", done["results"]
    assert done["name"] == f"POINTWISE_EVALUATION-{experiment_id[:8]}"
    assert (done["isScheduled"], done["scheduledExperimentJobId"]) == (False, None)
    assert set(done["inputSignature"]) == {"query_set", "judgment_list", "search_configurations"}
    evaluation = done["results"][0]
    assert set(evaluation) == {"evaluationId", "searchConfigurationId", "queryText"}
    assert evaluation["queryText"] == "worked"
    assert evaluation["searchConfigurationId"] == world["by_rank"]
    assert done["results"][1] == {"queryText": "nothing matches this"}  # no hits: no evaluation

    (result,) = by_experiment(direct, EVALUATIONS, experiment_id)
    assert result["id"] == evaluation["evaluationId"]
    assert result["searchText"] == "worked"
    assert result["documentIds"] == ["b", "a", "y"]
    assert result["judgmentIds"] == [world["judgment"]]
    assert result["searchConfigurationId"] == world["by_rank"]
    # docs/algorithms.md, "Formulas": J = {a: 3, b: 1, c: 0, x: 2}, docIds = [b, a, y], k = 3.
    assert result["metrics"] == [
        {"metric": "Coverage@3", "value": 0.67}, {"metric": "Precision@3", "value": 0.33},
        {"metric": "Recall@3", "value": 1.0}, {"metric": "MAP@3", "value": 0.5},
        {"metric": "MRR", "value": 0.5}, {"metric": "DCG@3", "value": 5.42},
        {"metric": "NDCG@3", "value": 0.58},
        {"metric": "HitRate@3", "value": 1.0}]  # the workbench's own, after the plugin's seven
    assert isinstance(result["took"], int) and "scheduledRunId" not in result

    variants = {v["id"]: v for v in by_experiment(direct, VARIANTS, experiment_id)}
    assert len(variants) == 2
    linked = variants[result["experimentVariantId"]]
    assert linked["type"] == "POINTWISE_EVALUATION" and linked["status"] == "COMPLETED"
    assert linked["parameters"] == {"searchConfigId": world["by_rank"], "searchPipeline": ""}
    assert linked["results"] == {"evaluationResultId": result["id"]}
    empty = next(v for v in variants.values() if v["id"] != linked["id"])
    assert empty["results"]["details"] == "no search hits found"
    after = api.srw("GET", "/stats/experiment_pointwise_evaluation_executions").json
    count = "experiment_pointwise_evaluation_executions"
    assert after["all_nodes"]["experiments"][count] == \
        before["all_nodes"]["experiments"][count] + 1


@pytest.mark.parametrize(("size", "hit"), [(1, 0.0), (2, 1.0)])
def test_pointwise_hit_rate_looks_at_the_top_k_only(api: Api, world: dict[str, Any],
                                                    direct: OpenSearch, size: int,
                                                    hit: float) -> None:
    """By rank the list is b, a, y and only a (rank 2) is relevant: b (rating 1) is below T = 3.
    HitRate@1 is 0 and HitRate@2 is 1; the summary averages over both queries (no hits: 0)."""
    experiment_id = create(api, pointwise(world, size=size))
    assert wait(api, f"/experiments/{experiment_id}")["status"] == "COMPLETED"
    (result,) = by_experiment(direct, EVALUATIONS, experiment_id)
    assert result["documentIds"] == ["b", "a"][:size]
    metrics = {m["metric"]: m["value"] for m in result["metrics"]}
    assert list(metrics)[-1] == f"HitRate@{size}"
    assert metrics[f"HitRate@{size}"] == hit and metrics["MRR"] == hit / 2

    reply = api.srw("GET", f"/experiments/{experiment_id}/_summary",
                    params={"metric": f"HitRate@{size}"})
    assert reply.status == 200, reply.data
    summary = reply.json
    assert summary["metric"] == f"HitRate@{size}"
    figures = summary["configurations"][0]["metrics"][f"HitRate@{size}"]
    assert (figures["n"], figures["mean"]) == (2, hit / 2)


def test_pairwise_snapshots_and_metrics(api: Api, world: dict[str, Any]) -> None:
    experiment_id = create(api, {"type": "PAIRWISE_COMPARISON", "querySetId": world["querySetId"],
                                 "searchConfigurationList": [world["by_rank"], world["by_price"]],
                                 "size": 2})
    done = wait(api, f"/experiments/{experiment_id}")
    assert done["status"] == "COMPLETED", done["results"]
    assert done["judgmentList"] == []
    first = done["results"][0]
    assert first["query_text"] == "worked"
    assert [(s["searchConfigurationId"], s["docIds"]) for s in first["snapshots"]] == [
        (world["by_rank"], ["b", "a"]), (world["by_price"], ["y", "a"])]
    # A = [b, a], B = [y, a]: jaccard 1/3; rbo_p: d=1 overlap 0, d=2 overlap 1/2,
    # sum = 0 + p * 0.5, times (1-p)/(1-p^2): p=.5 -> 0.25*0.5/0.75 = 0.1667; p=.9 -> 0.45 *
    # 0.1/0.19 = 0.2368; frequencyWeighted: c(b) = (1/2 + 0)/2 = 0.25, c(a) = (1/2 + 1/2)/2
    # = 0.5, c(y) = 0.25 -> common a: 0.5 / (0.25 + 0.5 + 0.25) = 0.5.
    assert first["metrics"] == [{"metric": "jaccard", "value": 0.33},
                                {"metric": "rbo50", "value": 0.17},
                                {"metric": "rbo90", "value": 0.24},
                                {"metric": "frequencyWeighted", "value": 0.5}]
    second = done["results"][1]
    assert [s["docIds"] for s in second["snapshots"]] == [[], []]
    assert [m["value"] for m in second["metrics"]] == [0.0, 0.0, 0.0, 0.0]


def min_max(scores: list[float]) -> list[float]:
    low, high = min(scores), max(scores)
    return [1.0 if high == low else max(0.001, (s - low) / (high - low)) for s in scores]


def test_hybrid_optimizer_without_neural_search(api: Api, world: dict[str, Any],
                                                direct: OpenSearch) -> None:
    experiment_id = create(api, {"type": "HYBRID_OPTIMIZER", "querySetId": world["querySetId"],
                                 "searchConfigurationList": [world["hybrid"]],
                                 "judgmentList": [world["judgment"]], "size": 3})
    done = wait(api, f"/experiments/{experiment_id}")
    assert done["status"] == "COMPLETED", done["results"]
    entry = done["results"][0]
    assert entry["query_text"] == "worked"
    assert entry["searchConfigurationId"] == world["hybrid"]
    assert len(entry["evaluationResults"]) == 82
    evaluations = {e["id"]: e for e in by_experiment(direct, EVALUATIONS, experiment_id)}
    variants = {v["id"]: v for v in by_experiment(direct, VARIANTS, experiment_id)}
    assert len(evaluations) == 82 and len(variants) == 164  # the second query has no hits
    parameters = {e["experimentVariantParameters"] for e in evaluations.values()}
    assert "combination=arithmetic_mean, normalization=min_max, weights=0.5;0.5" in parameters
    assert "combination=rrf, rank_constant=60" in parameters
    assert len(parameters) == 82

    # Independent check of one variant: min-max per sub-query, then the weighted mean.
    def scored(field: str) -> dict[str, float]:
        hits = direct.search(index=world["index"],
                             body={"query": {"match": {field: "worked"}}, "size": 3})
        return {h["_id"]: h["_score"] for h in hits["hits"]["hits"]}
    subs = [scored("title"), scored("description")]
    normalised = [dict(zip(s, min_max(list(s.values())), strict=True)) for s in subs]
    combined = {d: 0.3 * normalised[0].get(d, 0.0) + 0.7 * normalised[1].get(d, 0.0)
                for d in set(subs[0]) | set(subs[1])}
    expected = [d for d, _ in sorted(combined.items(), key=lambda kv: -kv[1])][:3]
    chosen = next(e for e in evaluations.values() if e["experimentVariantParameters"]
                  == "combination=arithmetic_mean, normalization=min_max, weights=0.3;0.7")
    assert chosen["documentIds"] == expected
    variant = variants[chosen["experimentVariantId"]]
    assert variant["parameters"] == {"normalization": "min_max",
                                     "combination": "arithmetic_mean", "weights": [0.3, 0.7]}
    assert variant["results"] == {"evaluationResultId": chosen["id"]}
    # Only a (rating 3) is relevant (T = 3), so the variant hits when a is in its top 3.
    assert [m["metric"] for m in chosen["metrics"]] == [
        "Coverage@3", "Precision@3", "Recall@3", "MAP@3", "MRR", "DCG@3", "NDCG@3", "HitRate@3"]
    assert chosen["metrics"][-1]["value"] == (1.0 if "a" in expected else 0.0)


def test_a_failing_hybrid_search_fails_only_its_variants(api: Api, world: dict[str, Any],
                                                         direct: OpenSearch) -> None:
    config = api.srw("PUT", "/search_configurations", {
        "name": "hybrid price", "index": world["index"],
        "query": '{"query":{"hybrid":{"queries":[{"match":{"title":"%SearchText%"}},'
                 '{"term":{"price":"%SearchText%"}}]}}}'}).json["search_configuration_id"]
    query_set = api.srw("PUT", "/query_sets", {"name": "mixed", "querySetQueries": [
        {"queryText": "20"}, {"queryText": "worked"}]}).json["query_set_id"]
    experiment_id = create(api, {"type": "HYBRID_OPTIMIZER", "querySetId": query_set,
                                 "searchConfigurationList": [config],
                                 "judgmentList": [world["judgment"]], "size": 3})
    done = wait(api, f"/experiments/{experiment_id}")
    assert done["status"] == "COMPLETED"
    variants = by_experiment(direct, VARIANTS, experiment_id)
    failed = [v for v in variants if v["status"] == "ERROR"]
    assert len(failed) == 82  # every variant of the query whose price term cannot parse
    assert all("number_format_exception" in v["results"]["error"]
               or "failed to create query" in v["results"]["error"] for v in failed)
    assert len(done["results"][0]["evaluationResults"]) == 82  # "20" still evaluated
    assert done["results"][1]["evaluationResults"] == []


def test_validate_patch_and_cascading_delete(api: Api, world: dict[str, Any],
                                             direct: OpenSearch) -> None:
    experiment_id = create(api, pointwise(world, name="  named  ", description="first"))
    done = wait(api, f"/experiments/{experiment_id}")
    assert (done["name"], done["description"]) == ("named", "first")
    valid = api.srw("GET", f"/experiments/{experiment_id}/validate").json
    assert valid == {"status": "VALID", "drifted_inputs": [],
                     "message": "Experiment inputs match the stored execution fingerprint."}

    patched = api.srw("PATCH", f"/experiments/{experiment_id}", {"name": "renamed"})
    assert patched.json == {"experiment_id": experiment_id, "experiment_result": "updated"}
    again = api.srw("GET", f"/experiments/{experiment_id}").json["hits"]["hits"][0]["_source"]
    assert (again["name"], again["description"], again["timestamp"]) == (
        "renamed", "first", done["timestamp"])
    api.srw("PATCH", f"/experiments/{experiment_id}", {}).error(
        400, "At least one of 'name' or 'description' must be provided for update")
    api.srw("PATCH", f"/experiments/{experiment_id}", {"name": "n" * 51}).error(
        400, "Invalid name: Text exceeds maximum length of 50 characters")
    api.srw("PATCH", f"/experiments/{experiment_id}", {"description": 5}).error(
        400, "Field 'description' must be a string")
    api.srw("PATCH", "/experiments/missing-id", {"name": "x"}).error(
        404, "Experiment not found: missing-id")

    judgment = direct.get(index="search-relevance-judgment", id=world["judgment"])["_source"]
    drifted = {**judgment, "judgmentRatings": [{"query": "worked", "ratings": [
        {"docId": "a", "rating": "2"}]}]}
    direct.index(index="search-relevance-judgment", id=world["judgment"], body=drifted,
                 refresh=True)
    try:
        assert api.srw("GET", f"/experiments/{experiment_id}/validate").json == {
            "status": "DRIFTED", "drifted_inputs": ["judgment_list"],
            "message": "Judgment data has changed since execution."}
    finally:
        direct.index(index="search-relevance-judgment", id=world["judgment"], body=judgment,
                     refresh=True)

    assert by_experiment(direct, EVALUATIONS, experiment_id)
    deleted = api.srw("DELETE", f"/experiments/{experiment_id}")
    assert deleted.status == 200 and deleted.json["result"] == "deleted"
    assert by_experiment(direct, EVALUATIONS, experiment_id) == []
    assert by_experiment(direct, VARIANTS, experiment_id) == []
    api.srw("GET", f"/experiments/{experiment_id}").error(
        404, f"Document not found: {experiment_id}")


def test_list_and_search_exclude_nothing_but_results(api: Api, world: dict[str, Any]) -> None:
    experiment_id = create(api, pointwise(world))
    wait(api, f"/experiments/{experiment_id}")
    listed = api.srw("GET", "/experiments", params={"query_text": "ignored"}).json
    mine = next(h for h in listed["hits"]["hits"] if h["_id"] == experiment_id)
    assert mine["_source"]["results"]  # the list keeps results (Dashboards needs them)
    found = api.srw("POST", "/experiments/_search",
                    {"query": {"ids": {"values": [experiment_id]}}}).json["hits"]["hits"]
    assert "results" not in found[0]["_source"]
    with_results = api.srw("POST", "/experiments/_search", {
        "query": {"ids": {"values": [experiment_id]}}, "_source": ["results"]}).json
    assert with_results["hits"]["hits"][0]["_source"]["results"]


def test_rerunning_a_job_rewrites_the_same_documents(api: Api, world: dict[str, Any],
                                                     direct: OpenSearch) -> None:
    experiment_id = create(api, pointwise(world))
    first = wait(api, f"/experiments/{experiment_id}")
    ids = sorted(e["id"] for e in by_experiment(direct, EVALUATIONS, experiment_id))
    variant_ids = sorted(v["id"] for v in by_experiment(direct, VARIANTS, experiment_id))
    direct.update(index=EXPERIMENTS, id=experiment_id, refresh=True,
                  body={"doc": {"status": "PROCESSING"}})
    celery_app.send_task("workbench.experiments.run", args=[experiment_id])
    second = wait(api, f"/experiments/{experiment_id}")
    assert second["status"] == "COMPLETED"
    assert second["results"] == first["results"]
    assert sorted(e["id"] for e in by_experiment(direct, EVALUATIONS, experiment_id)) == ids
    assert sorted(v["id"] for v in by_experiment(direct, VARIANTS, experiment_id)) == \
        variant_ids


def test_non_numeric_ratings_end_the_run_error(api: Api, world: dict[str, Any],
                                               direct: OpenSearch) -> None:
    judgment_id = str(uuid.uuid4())
    direct.index(index="search-relevance-judgment", id=judgment_id, refresh=True, body={
        "id": judgment_id, "timestamp": "2025-01-01T00:00:00.000Z", "name": "bad",
        "status": "COMPLETED", "type": "IMPORT_JUDGMENT", "metadata": {},
        # The float mapping refuses words, NaN and Infinity; an empty string gets through.
        "judgmentRatings": [{"query": "worked", "ratings": [{"docId": "a", "rating": ""}]}]})
    experiment_id = create(api, pointwise(world, judgmentList=[judgment_id]))
    done = wait(api, f"/experiments/{experiment_id}")
    assert done["status"] == "ERROR"
    assert done["results"] == [{"error": "Invalid judgment rating [] for document [a]: "
                                         "rating must be a finite number"}]


@pytest.mark.parametrize("change, reason", [
    ({"type": None}, "Invalid or missing experiment type"),
    ({"type": "LLM_EVALUATION"}, "Invalid or missing experiment type"),
    ({"querySetId": "nope"}, "QuerySet [nope] does not exist"),
    ({"searchConfigurationList": ["nope"]}, "SearchConfiguration [nope] does not exist"),
    ({"judgmentList": ["nope"]}, "Judgment [nope] does not exist"),
    ({"judgmentList": []}, "judgmentList is required for POINTWISE_EVALUATION"),
    ({"size": None}, "size is required"),
    ({"size": 0}, "size must be a positive integer, got: 0"),
    ({"name": 7}, "Field 'name' must be a string"),
    ({"name": "n" * 51}, "Invalid name: Text exceeds maximum length of 50 characters"),
    ({"description": "d" * 251},
     "Invalid description: Text exceeds maximum length of 250 characters"),
])
def test_bad_input(api: Api, world: dict[str, Any], change: dict[str, Any], reason: str,
                   direct: OpenSearch) -> None:
    body = {k: v for k, v in {**pointwise(world), **change}.items() if v is not None}
    before = direct.count(index=EXPERIMENTS)["count"]
    api.srw("PUT", "/experiments", body).error(400, reason)
    assert direct.count(index=EXPERIMENTS)["count"] == before


def test_pairwise_needs_two_configurations(api: Api, world: dict[str, Any]) -> None:
    api.srw("PUT", "/experiments", {"type": "PAIRWISE_COMPARISON",
                                    "querySetId": world["querySetId"],
                                    "searchConfigurationList": [world["by_rank"]],
                                    "size": 3}).error(
        400, "PAIRWISE_COMPARISON requires exactly 2 search configurations, got: 1")


@pytest.mark.parametrize("kind", ["PAIRWISE_COMPARISON", "POINTWISE_EVALUATION",
                                  "HYBRID_OPTIMIZER"])
def test_an_experiment_on_a_query_set_with_no_queries_completes(
        api: Api, world: dict[str, Any], direct: OpenSearch, kind: str) -> None:
    """A query set with no queries (sampled from a UBI index that has none: the plugin's own
    experiment stories do this on a fresh cluster) is accepted, as by the plugin; the
    experiment completes with no results and writes no evaluation results or variants."""
    empty = api.srw("PUT", "/query_sets", {"name": "empty", "querySetQueries": []}).json[
        "query_set_id"]
    configurations = {"PAIRWISE_COMPARISON": [world["by_rank"], world["by_price"]],
                      "HYBRID_OPTIMIZER": [world["hybrid"]]}.get(kind, [world["by_rank"]])
    body = {"type": kind, "querySetId": empty, "searchConfigurationList": configurations,
            "size": 3}
    if kind != "PAIRWISE_COMPARISON":
        body["judgmentList"] = [world["judgment"]]
    experiment_id = create(api, body)
    done = wait(api, f"/experiments/{experiment_id}")
    assert (done["status"], done["results"]) == ("COMPLETED", [])
    assert by_experiment(direct, EVALUATIONS, experiment_id) == []
    assert by_experiment(direct, VARIANTS, experiment_id) == []


def test_the_plugins_story_on_a_fresh_cluster(api: Api, world: dict[str, Any],
                                            direct: OpenSearch) -> None:
    """The plugin's experiment and scheduled-experiment stories: a query set sampled from a UBI
    queries index that holds nothing, a pointwise experiment on it, a schedule for that."""
    ubi = f"test-ubi-empty-{uuid.uuid4().hex[:6]}"
    spec = json.loads((REPO / "index_mappings" / "ubi" / "ubi_queries.json").read_text())
    direct.indices.create(index=ubi, body={"mappings": spec["mappings"]})
    try:
        sampled = api.srw("POST", "/query_sets", {
            "name": "test03", "description": "test03", "sampling": "random",
            "querySetSize": 200, "ubiQueriesIndex": ubi})
        assert sampled.status == 200, sampled.data
        query_set = sampled.json["query_set_id"]
        stored = api.srw("GET", f"/query_sets/{query_set}").json["hits"]["hits"][0]["_source"]
        assert stored["querySetQueries"] == []
        experiment_id = create(api, pointwise(world, querySetId=query_set, size=10))
        done = wait(api, f"/experiments/{experiment_id}")
        assert (done["status"], done["results"]) == ("COMPLETED", [])
        scheduled = api.srw("POST", "/experiments/schedule",
                            {"experimentId": experiment_id, "cronExpression": "1 1 1 1 1"})
        assert scheduled.json == {"job_id": experiment_id, "job_result": "CREATED"}
        assert api.srw("DELETE", f"/experiments/schedule/{experiment_id}").status == 200
    finally:
        direct.indices.delete(index=ubi, ignore=[404])


@pytest.mark.parametrize("query, reason", [
    ('{"query":{"match":{"title":"%SearchText%"}}}',
     "query in search configuration does must be of type hybrid"),
    ('{"query":{"hybrid":{"queries":[{"match":{"title":"%SearchText%"}}]}}}',
     "invalid hybrid query: expected exactly [2] sub-queries but found [1]"),
    ('{"query":{"hybrid":{"other":"%SearchText%"}}}',
     "hybrid query in search configuration does not have queries"),
    ('{"size":3,"aggs":{"x":{"terms":{"field":"%SearchText%"}}}}',
     "query in search configuration does not have query"),
    ('{"query":{"hybrid":{"queries":[{"match":{"title":"%SearchText%"}},{"match_all":{}}]}},'
     '"search_pipeline":{"phase_results_processors":[]}}',
     "search pipeline is not allowed in search request"),
])
def test_a_hybrid_experiment_over_a_non_hybrid_configuration_is_accepted_then_ends_error(
    api: Api, world: dict[str, Any], query: str, reason: str, direct: OpenSearch
) -> None:
    """Accepted (as by the plugin); the job checks the configuration before any search and
    ends ERROR with the plugin's message, writing no evaluation results or variants."""
    config = api.srw("PUT", "/search_configurations", {"name": "h", "index": world["index"],
                                                       "query": query}).json[
        "search_configuration_id"]
    experiment_id = create(api, {"type": "HYBRID_OPTIMIZER", "querySetId": world["querySetId"],
                                 "searchConfigurationList": [config],
                                 "judgmentList": [world["judgment"]], "size": 3})
    done = wait(api, f"/experiments/{experiment_id}")
    assert done["status"] == "ERROR"
    assert done["results"] == [{"error": f"{reason} (search configuration [{config}])"}]
    assert by_experiment(direct, EVALUATIONS, experiment_id) == []
    assert by_experiment(direct, VARIANTS, experiment_id) == []


def test_esci_style_graded_ratings_evaluate(api: Api, world: dict[str, Any]) -> None:
    judgment = api.srw("PUT", "/judgments", {"name": "esci", "type": "IMPORT_JUDGMENT",
                                             "judgmentRatings": [{"query": "worked", "ratings": [
                                                 {"docId": "a", "rating": "100.000"},
                                                 {"docId": "b", "rating": "10.000"}]}]}).json[
        "judgment_id"]
    wait(api, f"/judgments/{judgment}")
    experiment_id = create(api, pointwise(world, judgmentList=[judgment]))
    done = wait(api, f"/experiments/{experiment_id}")
    assert done["status"] == "COMPLETED", done["results"]
    result = api.call("POST", f"/{EVALUATIONS}/_search", {
        "query": {"term": {"experimentId": experiment_id}}}).json["hits"]["hits"][0]["_source"]
    metrics = {m["metric"]: m["value"] for m in result["metrics"]}
    assert math.isclose(metrics["DCG@3"], 1023 + (2**100 - 1) / math.log2(3), rel_tol=1e-6)
    assert 0 < metrics["NDCG@3"] < 1
