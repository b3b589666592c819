"""Filling an experiment's holes (``POST experiments/{id}/_fill`` and its ``_estimate``,
docs/holes.md) against the real cluster, Redis, workers and the stand-in model (one test with
the real llama.cpp model).

The hand-built case: eight products, two queries, three configurations over one index. A and
B search disjoint groups of documents (A the ``a`` group, B the ``b`` group); C searches all of
them, so every document C retrieves is also retrieved by A or B (the pool asks each pair once).
Every query matches exactly four documents by title, so at size 5 each pool is those four
whatever their order: 8 pairs. The human list rates exactly what A retrieves (4 pairs, 0–3
grades) and one pair outside the pool; the 4 pairs only B and C retrieve are the holes.

The stand-in model rates a hit by the share of query words in it: ``red shoes`` finds both words
in d5 and one in d6, ``blue hat`` both in d7 and one in d8 (1.0 and 0.5), put on the human scale
(top grade 3): 3.0 and 1.5.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from opensearchpy import OpenSearch

from tests.conftest import JUDGE_MODEL
from tests.support.api import Api
from tests.support.processes import Server, Worker
from tests.support.waiting import finished, poll
from workbench.bench.llm_server import LLMServer, find_hits, find_query
from workbench.store.indices import EVALUATION_INDEX, EXPERIMENT_INDEX

DOCS = {
    "d1": ("red shoes running", "a"), "d2": ("red shoes leather", "a"),
    "d3": ("blue hat wool", "a"), "d4": ("blue hat cotton", "a"),
    "d5": ("red shoes canvas", "b"), "d6": ("red sneakers sale", "b"),
    "d7": ("blue hat summer", "b"), "d8": ("blue cap winter", "b"),
}
QUERIES = {"red shoes": "red shoes", "blue hat": "blue hat"}  # query -> its referenceAnswer
HUMAN = [{"query": "red shoes", "ratings": [{"docId": "d1", "rating": "3"},
                                            {"docId": "d2", "rating": "1"},
                                            {"docId": "d7", "rating": "0"}]},  # outside the pool
         {"query": "blue hat", "ratings": [{"docId": "d3", "rating": "2"},
                                           {"docId": "d4", "rating": "0"}]}]
HOLES = {("red shoes", "d5"), ("red shoes", "d6"), ("blue hat", "d7"), ("blue hat", "d8")}
POOL = {"queries": 2, "pairs": 8, "rated": 4, "unrated": 4}


def _match(group: str | None) -> str:
    match: dict[str, Any] = {"match": {"title": "%SearchText%"}}
    if group is None:
        return json.dumps({"query": match})
    return json.dumps({"query": {"bool": {"must": [match],
                                          "filter": [{"term": {"group": group}}]}}})


def _experiment(api: Api, body: dict[str, Any]) -> str:
    reply = api.srw("PUT", "/experiments", body)
    assert reply.status == 200, reply.data
    experiment_id: str = reply.json["experiment_id"]
    done = finished(api, f"/experiments/{experiment_id}", 120)
    assert done["status"] == "COMPLETED", done
    return experiment_id


@pytest.fixture(scope="module")
def case(api: Api, direct: OpenSearch, worker: Worker) -> Iterator[dict[str, Any]]:
    index = f"test-holes-{uuid.uuid4().hex[:8]}"
    direct.indices.create(index=index, body={"mappings": {"properties": {
        "title": {"type": "text"}, "group": {"type": "keyword"}}}})
    for doc_id, (title, group) in DOCS.items():
        direct.index(index=index, id=doc_id, body={"title": title, "group": group})
    direct.indices.refresh(index=index)
    query_set = api.srw("PUT", "/query_sets", {
        "name": f"holes {index}", "querySetQueries": [
            {"queryText": q, "referenceAnswer": a} for q, a in QUERIES.items()]}
    ).json["query_set_id"]
    configs = [api.srw("PUT", "/search_configurations", {
        "name": f"{label} {index}", "index": index, "query": _match(group)}
    ).json["search_configuration_id"] for label, group in (("A", "a"), ("B", "b"), ("C", None))]
    human = api.srw("PUT", "/judgments", {"name": f"human {index}", "type": "IMPORT_JUDGMENT",
                                          "judgmentRatings": HUMAN}).json["judgment_id"]
    assert finished(api, f"/judgments/{human}", 60)["status"] == "COMPLETED"
    experiment = _experiment(api, {
        "name": f"holes {index}", "type": "POINTWISE_EVALUATION", "querySetId": query_set,
        "searchConfigurationList": configs, "judgmentList": [human], "size": 5})
    yield {"index": index, "querySetId": query_set, "configs": configs, "human": human,
           "experiment": experiment}
    direct.indices.delete(index=index, ignore=[404])


def fill(api: Api, experiment: str, body: dict[str, Any], wait: bool = True
         ) -> tuple[dict[str, Any], dict[str, Any]]:
    reply = api.srw("POST", f"/experiments/{experiment}/_fill", body)
    assert reply.status == 200, reply.data
    answer: dict[str, Any] = reply.json
    if not wait:
        return answer, {}
    return answer, finished(api, f"/judgments/{answer['judgment_id']}", 120)


def asked(llm: LLMServer) -> list[tuple[str, str]]:
    """(query, docId) of every hit the model was asked about, in the order asked."""
    out = []
    for request in llm.requests:
        hits, span = find_hits(request.user)
        query = find_query(request.user, span)
        out.extend((query, str(hit["id"]).split("::", 1)[1]) for hit in hits)
    return out


def by_query(doc: dict[str, Any]) -> dict[str, dict[str, tuple[str, str]]]:
    return {row["query"]: {r["docId"]: (str(r["rating"]), r["source"]) for r in row["ratings"]}
            for row in doc["judgmentRatings"]}


def test_the_model_rates_only_the_holes_once_and_the_list_keeps_every_source(
        api: Api, case: dict[str, Any], llm: LLMServer) -> None:
    before = api.srw("POST", f"/experiments/{case['experiment']}/_fill/_estimate",
                     {"modelId": JUDGE_MODEL, "overwriteCache": True})
    assert before.status == 200, before.data
    estimate = before.json
    assert estimate["pool"] == POOL
    assert (estimate["modelId"], estimate["pairsToRate"], estimate["calls"],
            estimate["cachedPairs"], estimate["missingDocuments"]) == (JUDGE_MODEL, 4, 2, 0, 0)
    assert estimate["totalTokens"] == estimate["inputTokens"] + estimate["outputTokens"] > 0
    assert estimate["cost"] is None  # the test judge has no prices
    assert llm.calls == 0

    answer, done = fill(api, case["experiment"], {"modelId": JUDGE_MODEL,
                                                  "overwriteCache": True})
    assert set(answer) == {"judgment_id", "pool"} and answer["pool"] == POOL
    assert done["status"] == "COMPLETED", done["metadata"]
    assert done["type"] == "FILLED_JUDGMENT"
    assert done["name"] == f"holes {case['index']} with holes filled"
    pairs = asked(llm)
    assert sorted(pairs) == sorted(HOLES) and len(pairs) == len(set(pairs))  # each once
    assert llm.calls == 2  # one prompt per query
    model = f"llm:{JUDGE_MODEL}"
    assert by_query(done) == {
        "red shoes": {"d1": ("3", "human"), "d2": ("1", "human"), "d7": ("0", "human"),
                      "d5": ("3.0", model), "d6": ("1.5", model)},
        "blue hat": {"d3": ("2", "human"), "d4": ("0", "human"),
                     "d7": ("3.0", model), "d8": ("1.5", model)}}
    meta = done["metadata"]
    usage = meta.pop("usage")
    assert usage["llmCalls"] == 2 and usage["cachedRatings"] == 0
    assert abs(usage["inputTokens"] - estimate["inputTokens"]) <= 0.05 * usage["inputTokens"]
    assert meta == {
        "experimentId": case["experiment"], "judgmentList": [case["human"]], "size": 5,
        "modelId": JUDGE_MODEL, "llmJudgmentRatingType": "SCORE0_1",
        "promptTemplate": meta["promptTemplate"], "contextFields": [], "tokenLimit": 4000,
        "overwriteCache": True, "pool": POOL, "filled": 4, "failed": 0,
        "sources": {"human": 5, model: 4}, "scale": 3, "totalQueries": 2,
        "successfulQueries": 2, "failedQueries": 0}

    # a second fill asks the model nothing: the judgment cache has every hole
    llm.reset()
    again = api.srw("POST", f"/experiments/{case['experiment']}/_fill/_estimate",
                    {"modelId": JUDGE_MODEL}).json
    assert (again["pairsToRate"], again["calls"], again["cachedPairs"]) == (0, 0, 4)
    _, second = fill(api, case["experiment"], {"modelId": JUDGE_MODEL, "name": "second"})
    assert second["name"] == "second" and llm.calls == 0
    assert second["metadata"]["usage"]["cachedRatings"] == 4
    assert second["metadata"]["usage"]["llmCalls"] == 0
    assert by_query(second) == by_query(done)

    # re-running the experiment with the filled list: every pooled pair is rated
    rerun = _experiment(api, {
        "type": "POINTWISE_EVALUATION", "querySetId": case["querySetId"],
        "searchConfigurationList": case["configs"], "judgmentList": [answer["judgment_id"]],
        "size": 5})
    coverage = [m["value"] for e in evaluations(api, rerun) for m in e["metrics"]
                if m["metric"] == "Coverage@5"]
    assert coverage == [1.0] * 6  # 2 queries x 3 configurations
    old = [m["value"] for e in evaluations(api, case["experiment"]) for m in e["metrics"]
           if m["metric"] == "Coverage@5"]
    assert sorted(old) == [0.0, 0.0, 0.5, 0.5, 1.0, 1.0]  # A all, B none, C half
    # a filled list is filled again from: its ratings keep their sources
    refilled = _experiment(api, {
        "type": "POINTWISE_EVALUATION", "querySetId": case["querySetId"],
        "searchConfigurationList": case["configs"],
        "judgmentList": [answer["judgment_id"]], "size": 5})
    _, third = fill(api, refilled, {"modelId": JUDGE_MODEL})
    assert third["metadata"]["pool"] == {**POOL, "rated": 8, "unrated": 0}
    assert by_query(third) == by_query(done) and third["metadata"]["filled"] == 0
    assert third["metadata"]["sources"] == {"human": 5, model: 4}


def evaluations(api: Api, experiment: str) -> list[dict[str, Any]]:
    reply = api.call("POST", f"/{EVALUATION_INDEX}/_search", {
        "size": 100, "query": {"term": {"experimentId": experiment}}})
    assert reply.status == 200, reply.data
    return [hit["_source"] for hit in reply.json["hits"]["hits"]]


def test_the_reference_judge_fills_the_holes_without_a_call(
        api: Api, case: dict[str, Any], llm: LLMServer) -> None:
    body = {"judge": "token_overlap", "judgeOptions": {"threshold": 0.6},
            "contextFields": ["title"], "size": 2}
    estimate = api.srw("POST", f"/experiments/{case['experiment']}/_fill/_estimate", body)
    assert estimate.status == 200, estimate.data
    # size 2: A's and B's two hits of each query, C's first two (one of A's or B's)
    assert estimate.json == {"pool": POOL, "judge": "token_overlap", "pairsToRate": 4,
                             "calls": 0}
    answer, done = fill(api, case["experiment"], body)
    assert answer["pool"] == POOL and done["status"] == "COMPLETED", done["metadata"]
    assert llm.calls == 0
    ratings = by_query(done)
    source = "reference:token_overlap"
    new = {(q, d): rating for q, docs in ratings.items() for d, (rating, s) in docs.items()
           if s == source}
    # token_overlap: relevant (1) when 0.6 of the reference answer's words are in the title
    # (d5 and d7 have both, d6 and d8 one of two), x 3 (the scale)
    assert new == {("red shoes", "d5"): "3.0", ("red shoes", "d6"): "0.0",
                   ("blue hat", "d7"): "3.0", ("blue hat", "d8"): "0.0"}
    meta = done["metadata"]
    assert (meta["judge"], meta["judgeOptions"], meta["contextFields"], meta["size"],
            meta["filled"], meta["failed"], meta["sources"], meta["scale"]) == (
        "token_overlap", {"threshold": 0.6}, ["title"], 2, 4, 0, {"human": 5, source: 4}, 3)
    assert "usage" not in meta and "modelId" not in meta


def cli(server: Server, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    result = subprocess.run([sys.executable, "-m", "workbench.cli", *args],
                            env=dict(env, WORKBENCH_URL=server.url, COLUMNS="160"),
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, (result.stdout, result.stderr)
    return result


def test_the_command_line_fills_reruns_and_exports_one_source(
        api: Api, case: dict[str, Any], server: Server, env: dict[str, str], llm: LLMServer,
        tmp_path: Path) -> None:
    pool_line = "pool: 2 queries, 8 pairs, 4 rated, 4 unrated"
    estimate = cli(server, env, "experiment", "fill", case["experiment"], "--judge",
                   "token_overlap", "--estimate")
    assert estimate.stdout == "4 pairs to rate, 0 calls\n"
    assert pool_line in estimate.stderr
    filled = cli(server, env, "experiment", "fill", case["experiment"], "--judge",
                 "token_overlap", "--judge-options", '{"threshold": 0.6}', "--rerun", "--wait")
    assert pool_line in filled.stderr
    assert "rated 4 pairs, 0 left unrated; sources human 5, reference:token_overlap 4" in (
        filled.stderr)
    judgment_id, experiment_id = filled.stdout.split()
    done = finished(api, f"/judgments/{judgment_id}", 10)
    assert done["metadata"]["judgeOptions"] == {"threshold": 0.6}
    rerun = finished(api, f"/experiments/{experiment_id}", 10)
    assert rerun["status"] == "COMPLETED" and rerun["judgmentList"] == [judgment_id]
    assert (rerun["searchConfigurationList"], rerun["size"]) == (case["configs"], 5)
    coverage = [m["value"] for e in evaluations(api, experiment_id) for m in e["metrics"]
                if m["metric"] == "Coverage@5"]
    assert coverage == [1.0] * 6
    for kind, expected in (("human", 5), ("reference", 4), ("llm", 0)):
        out = tmp_path / f"{kind}.qrels"
        cli(server, env, "export", "qrels", "--judgment", judgment_id, "--source", kind,
            "--out", str(out))
        lines = out.read_text().splitlines()
        assert len(lines) == expected, lines
        if kind == "human":
            assert sorted((line.split()[2], line.split()[3]) for line in lines) == sorted(
                [("d1", "3"), ("d2", "1"), ("d7", "0"), ("d3", "2"), ("d4", "0")])


def test_a_budget_stops_the_fill_and_keeps_what_was_rated(
        api: Api, case: dict[str, Any], llm: LLMServer, priced: str) -> None:
    _, done = fill(api, case["experiment"], {"modelId": priced, "maxTokens": 1})
    assert done["status"] == "COMPLETED", done["metadata"]
    meta = done["metadata"]
    assert llm.calls == 0
    assert meta["budgetReached"] is True and meta["lastFailureReason"].startswith("budget")
    assert (meta["filled"], meta["failed"], meta["failedQueries"]) == (0, 4, 2)
    assert meta["usage"]["llmCalls"] == 0 and meta["usage"]["cost"] == 0.0
    ratings = by_query(done)
    assert {q: set(d) for q, d in ratings.items()} == {"red shoes": {"d1", "d2", "d7"},
                                                       "blue hat": {"d3", "d4"}}
    failures = {(row["query"], f["docId"]): f["reason"] for row in done["judgmentRatings"]
                for f in row.get("failures") or []}
    assert set(failures) == HOLES
    assert set(failures.values()) == {meta["lastFailureReason"]}


def test_pairs_the_model_fails_on_are_kept_as_failures(
        api: Api, case: dict[str, Any], llm: LLMServer, priced: str) -> None:
    llm.fail(400, times=100)  # every call of this fill
    _, done = fill(api, case["experiment"], {"modelId": priced})
    llm.reset()
    assert done["status"] == "COMPLETED", done["metadata"]
    meta = done["metadata"]
    assert (meta["filled"], meta["failed"], meta["failedQueries"], meta["successfulQueries"]) \
        == (0, 4, 2, 0)
    assert "budgetReached" not in meta and meta["usage"]["llmCalls"] >= 2
    failures = {(row["query"], f["docId"]): f["reason"] for row in done["judgmentRatings"]
                for f in row.get("failures") or []}
    assert set(failures) == HOLES
    assert meta["lastFailureReason"] and set(failures.values()) == {meta["lastFailureReason"]}
    assert meta["sources"] == {"human": 5}
    # Run with it, the summary says how to rate what the fill left: fill again, not _retry.
    summary = api.srw("GET", f"/experiments/{_rerun(api, case, done['id'])}/_summary").json
    [warning] = [w for w in summary["warnings"] if w["code"] == "judgment_failed_queries"]
    assert warning["message"].endswith(
        "the documents it left unrated count as unrated until POST experiments/{id}/_fill "
        "rates them again")


def test_cancel_ends_the_fill_error_with_its_usage(
        api: Api, case: dict[str, Any], llm: LLMServer, priced: str) -> None:
    llm.latency = 3.0
    answer, _ = fill(api, case["experiment"], {"modelId": priced}, wait=False)
    judgment = answer["judgment_id"]
    poll(lambda: llm.calls >= 1 or None, 30, 0.05, "no call was made")

    def progressing() -> dict[str, Any] | None:  # (the GET is a search: seen once refreshed)
        doc = api.srw("GET", f"/judgments/{judgment}").json["hits"]["hits"][0]["_source"]
        assert doc["status"] == "PROCESSING" and doc["type"] == "FILLED_JUDGMENT"
        return doc["metadata"].get("progress")  # type: ignore[no-any-return]

    progress = poll(progressing, 2.5, 0.05, "no progress written")
    assert (progress["unit"], progress["total"], progress["phase"]) == ("queries", 2, "rating")
    reply = api.srw("POST", f"/judgments/{judgment}/_cancel")
    assert reply.status == 200, reply.data
    done = finished(api, f"/judgments/{judgment}", 60)
    llm.latency = 0.0
    assert done["status"] == "ERROR"
    assert done["metadata"]["error"] == "cancelled by the user"
    usage = done["metadata"]["usage"]
    assert usage["llmCalls"] == llm.calls >= 1 and usage["inputTokens"] > 0
    assert done["judgmentRatings"] == []
    retried = api.srw("POST", f"/judgments/{judgment}/_retry")
    retried.error(400, "Retry is only supported for LLM_JUDGMENT type")


def test_refusals(api: Api, case: dict[str, Any], direct: OpenSearch) -> None:
    experiment = case["experiment"]
    path = f"/experiments/{experiment}/_fill"
    unknown = uuid.uuid4().hex
    for route in ("_fill", "_fill/_estimate"):
        api.srw("POST", f"/experiments/{unknown}/{route}", {"modelId": JUDGE_MODEL}).error(
            404, f"Experiment not found: {unknown}", "resource_not_found_exception")
    api.srw("POST", path, {}).error(
        400, "either modelId (a model) or judge (a reference judge) is required")
    api.srw("POST", path, {"modelId": JUDGE_MODEL, "judge": "token_overlap"}).error(
        400, "give either modelId or judge, not both")
    api.srw("POST", path, {"modelId": JUDGE_MODEL, "size": 6}).error(
        400, "size must be at most 5 (the experiment's size), got: 6")
    api.srw("POST", path, {"modelId": JUDGE_MODEL, "size": 0}).error(
        400, "size must be a positive integer, got: 0")
    api.srw("POST", path, {"judge": "token_overlap", "maxTokens": 10}).error(
        400, "maxTokens applies only to a fill by a model (modelId), not by a judge")
    api.srw("POST", path, {"judge": "no_such_judge"}).error(
        400, "Unknown judge [no_such_judge]; use one of: token_overlap, semantic")
    api.srw("POST", path, {"modelId": JUDGE_MODEL, "tokenLimit": 5}).error(
        400, "TokenLimit must be between 1000 and 500000, got: 5")
    # not finished, of a type without rankings, over several indices: planted as stored
    planted = {"querySetId": case["querySetId"], "searchConfigurationList": case["configs"],
               "judgmentList": [case["human"]], "size": 5, "timestamp": "2026-01-01T00:00:00.000Z"}
    direct.indices.create(index=f"{case['index']}-other")
    other = api.srw("PUT", "/search_configurations", {
        "name": f"other {case['index']}", "index": f"{case['index']}-other",
        "query": _match(None)}).json["search_configuration_id"]
    cases = [
        ({"status": "PROCESSING", "type": "POINTWISE_EVALUATION"}, 409,
         "Experiment [{id}] is PROCESSING; only a COMPLETED experiment has rankings to pool"),
        ({"status": "COMPLETED", "type": "PAIRWISE_COMPARISON"}, 400,
         "Experiment [{id}] is of type PAIRWISE_COMPARISON; only POINTWISE_EVALUATION and "
         "HYBRID_OPTIMIZER experiments store the rankings to pool"),
        ({"status": "COMPLETED", "type": "POINTWISE_EVALUATION",
          "searchConfigurationList": [case["configs"][0], other]}, 400,
         "the configurations of experiment [{id}] search different indices [{a}, {b}]; "
         "ratings are matched by document id, so its holes can be filled only when they "
         "search one"),
    ]
    try:
        for fields, status, reason in cases:
            planted_id = f"planted-{uuid.uuid4().hex[:8]}"
            direct.index(index=EXPERIMENT_INDEX, id=planted_id,
                         body={**planted, **fields, "id": planted_id}, refresh=True)
            for route in ("_fill", "_fill/_estimate"):
                api.srw("POST", f"/experiments/{planted_id}/{route}",
                        {"modelId": JUDGE_MODEL}).error(
                    status, reason.format(id=planted_id, a=case["index"],
                                          b=f"{case['index']}-other"))
            direct.delete(index=EXPERIMENT_INDEX, id=planted_id, refresh=True)
    finally:
        api.srw("DELETE", f"/search_configurations/{other}")
        direct.indices.delete(index=f"{case['index']}-other")


def test_the_real_model_fills_the_holes(api: Api, case: dict[str, Any], llama_url: str,
                                        worker: Worker) -> None:
    model = f"llama-{uuid.uuid4().hex[:8]}"
    created = api.srw("PUT", "/models", {"id": model, "name": "SmolLM2 on llama.cpp",
                                         "provider": "openai", "endpoint": llama_url,
                                         "model": "smollm2"})
    assert created.status == 200, created.data
    try:
        started = time.monotonic()
        # size 1: A's first hit of each query (rated), B's (a hole) and C's (either)
        answer, done = fill(api, case["experiment"], {"modelId": model, "size": 1,
                                                      "contextFields": ["title"]})
        assert done["status"] == "COMPLETED", done["metadata"]
        meta = done["metadata"]
        unrated = answer["pool"]["unrated"]
        assert answer["pool"]["rated"] == 2 and 2 <= unrated <= 4
        # every hole is rated or listed as a failure with its reason, never both, never twice
        assert meta["filled"] + meta["failed"] == unrated and meta["usage"]["llmCalls"] >= 2
        new = {(row["query"], r["docId"]) for row in done["judgmentRatings"]
               for r in row["ratings"] if r["source"] == f"llm:{model}"}
        failed = {(row["query"], f["docId"]) for row in done["judgmentRatings"]
                  for f in row.get("failures") or []}
        assert len(new | failed) == unrated and new | failed <= HOLES and not new & failed
        for row in done["judgmentRatings"]:
            for rating in row["ratings"]:
                if rating["source"] == f"llm:{model}":
                    assert 0.0 <= float(rating["rating"]) <= 3.0
        print(f"llama fill: {meta['filled']} rated, {meta['failed']} failed, "
              f"{meta['usage']} in {time.monotonic() - started:.1f} s")
    finally:
        api.srw("DELETE", f"/models/{model}")


def _rerun(api: Api, case: dict[str, Any], judgment: str) -> str:
    return _experiment(api, {
        "name": f"refilled {case['index']}", "type": "POINTWISE_EVALUATION",
        "querySetId": case["querySetId"], "searchConfigurationList": case["configs"],
        "judgmentList": [judgment], "size": 5})


def test_the_human_ratings_of_a_filled_list_are_the_gold_sample_unasked(
        api: Api, case: dict[str, Any]) -> None:
    # People rated "red shoes" whole (all four pooled documents) and "blue hat" only where A
    # looked; token_overlap fills d7 and d8. Only "red shoes" can be PPI's gold sample.
    whole = api.srw("PUT", "/judgments", {
        "name": f"whole {case['index']}", "type": "IMPORT_JUDGMENT", "judgmentRatings": [
            {"query": "red shoes", "ratings": [
                {"docId": d, "rating": r} for d, r in (("d1", "3"), ("d2", "1"), ("d5", "2"),
                                                       ("d6", "0"))]},
            {"query": "blue hat", "ratings": [{"docId": "d3", "rating": "2"},
                                              {"docId": "d4", "rating": "0"}]}]}
    ).json["judgment_id"]
    assert finished(api, f"/judgments/{whole}", 60)["status"] == "COMPLETED"
    experiment = _experiment(api, {
        "name": f"whole {case['index']}", "type": "POINTWISE_EVALUATION",
        "querySetId": case["querySetId"], "searchConfigurationList": case["configs"],
        "judgmentList": [whole], "size": 5})
    answer, filled = fill(api, experiment, {"judge": "token_overlap",
                                            "judgeOptions": {"threshold": 0.6}})
    assert answer["pool"] == {"queries": 2, "pairs": 8, "rated": 6, "unrated": 2}
    assert filled["metadata"]["sources"] == {"human": 6, "reference:token_overlap": 2}
    rerun = _rerun(api, case, answer["judgment_id"])

    reply = api.srw("GET", f"/experiments/{rerun}/_summary")
    assert reply.status == 200, reply.data
    summary = reply.json
    section = summary["humanJudgments"]
    assert (section["judgmentId"], section["automatic"], section["queries"]) == (
        answer["judgment_id"], True, {"total": 2, "labelled": 1, "unlabelled": 1})
    partly = [w for w in summary["warnings"] if w["code"] == "partly_human_queries"]
    assert partly == [{
        "level": "info", "code": "partly_human_queries", "judgmentId": answer["judgment_id"],
        "queries": 1,
        "message": f"people rated only part of the top-5 hits of 1 of the 2 queries they "
                   f"rated in [{filled['name']}] (a judge rated the rest); only queries people "
                   "rated whole are the gold sample"}]
    # On the one labelled query the filled list holds people's ratings only, so the judge's
    # value there is the humans' own: no bias, for every configuration.
    for config in section["configurations"]:
        figures = config["metrics"]["NDCG@5"]
        assert figures["humans"]["n"] == 1 and figures["judgeOnLabelled"]["n"] == 1
        assert figures["humans"]["mean"] == pytest.approx(figures["judgeOnLabelled"]["mean"])
        assert figures["bias"] == pytest.approx(0.0)
    # Asked for by name, the same section (but for ``automatic``).
    named = api.srw("GET", f"/experiments/{rerun}/_summary?humanJudgments="
                           f"{answer['judgment_id']}").json["humanJudgments"]
    assert "automatic" not in named and named["queries"] == section["queries"]


def test_a_filled_list_without_a_whole_human_query_gives_no_gold_sample(
        api: Api, case: dict[str, Any]) -> None:
    answer, filled = fill(api, case["experiment"], {"judge": "token_overlap",
                                                    "judgeOptions": {"threshold": 0.6}})
    rerun = _rerun(api, case, answer["judgment_id"])
    message = (f"no query of [{filled['name']}] has people's ratings for all of its top-5 "
               "hits, so people's ratings give no gold sample; label whole queries (GET "
               "experiments/{id}/_label_sample) to correct the judge's metric")
    summary = api.srw("GET", f"/experiments/{rerun}/_summary").json
    assert "humanJudgments" not in summary
    assert [w for w in summary["warnings"] if w["code"] == "no_human_gold_sample"] == [
        {"level": "info", "code": "no_human_gold_sample",
         "judgmentId": answer["judgment_id"], "message": message}]
    api.srw("GET", f"/experiments/{rerun}/_summary?humanJudgments={answer['judgment_id']}"
            ).error(400, f"humanJudgments [{answer['judgment_id']}]: {message}")
