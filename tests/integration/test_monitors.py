"""Monitors (docs/monitors.md) against the real cluster, Redis, a worker and the scheduler.

The tiny case: twelve products, a panel of three queries whose reference answer is
"red leather", and the ``token_overlap`` judge at ``threshold`` 1.0 (a hit is relevant, rating
1, when it holds both words; else 0). The configurations sort the matches by ``rank``, so the
results are fixed: GOOD ranks ascending, BAD descending. Hand-worked values, k = 3, gains
2^r - 1, discounts log2(rank + 1):

* GOOD: every query's top 3 rates [1, 0, 1]: DCG = 1 + 1/2 = 1.5; the ideal (the query's
  known ratings, sorted) [1, 1, 0]: 1 + 1/log2(3) = 1.6309298; NDCG@3 = 0.9197207 for each.
  Precision@3 = 2/3.
* BAD, after GOOD ran (its ratings are known): "shoes" rates [0, 0, 1]: DCG = 0.5, NDCG@3 =
  0.5 / 1.6309298 = 0.3065736; "boots" and "sandals" rate [0, 1, 0]: DCG = 1/log2(3), NDCG@3 =
  0.6309298 / 1.6309298 = 0.3868528.

With ``threshold`` 0.5 the judge also calls relevant a hit with one of the two words: of the
nine gold pairs (the first run's rated pairs) "red canvas shoes", "leather boots" and "red
sandals" flip to 1: 3 of 9 changed, above the 20 % share: JUDGE_DRIFT.
"""

from __future__ import annotations

import math
import sys
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from opensearchpy import OpenSearch

from tests.conftest import JUDGE_MODEL
from tests.support.api import Api, search_configuration
from tests.support.processes import Proc, Server, Worker, free_port
from workbench.bench.llm_server import LLMServer
from workbench.store.indices import MONITOR_INDEX, MONITOR_RUN_INDEX

PRODUCTS = [
    ("a1", "red leather shoes", 1), ("a2", "red canvas shoes", 2),
    ("a3", "red leather boots shoes", 3), ("a4", "red shoes", 4), ("a5", "leather shoes", 5),
    ("b1", "leather boots", 6), ("b2", "red leather boots", 7), ("b3", "black boots", 8),
    ("c1", "red leather sandals", 9), ("c2", "red sandals", 10),
    ("c3", "red leather sandals strap", 11), ("c4", "foam sandals", 12),
]
QUERIES = ["shoes", "boots", "sandals"]
GOOD_TOP = {"shoes": ["a1", "a2", "a3"], "boots": ["a3", "b1", "b2"],
            "sandals": ["c1", "c2", "c3"]}
BAD_TOP = {"shoes": ["a5", "a4", "a3"], "boots": ["b3", "b2", "b1"],
           "sandals": ["c4", "c3", "c2"]}
IDEAL = 1 + 1 / math.log2(3)
GOOD_NDCG = 1.5 / IDEAL
BAD_NDCG = {"shoes": 0.5 / IDEAL, "boots": (1 / math.log2(3)) / IDEAL,
            "sandals": (1 / math.log2(3)) / IDEAL}
SORTED = '{"query":{"match":{"title":"%%SearchText%%"}},"sort":[{"rank":"%s"}]}'
JUDGE = {"judge": "token_overlap", "judgeOptions": {"threshold": 1.0},
         "contextFields": ["title"]}


@pytest.fixture(scope="module")
def case(api: Api, direct: OpenSearch, worker: Worker) -> Iterator[dict[str, str]]:
    index = f"test-mon-{uuid.uuid4().hex[:8]}"
    direct.indices.create(index=index, body={"mappings": {"properties": {
        "title": {"type": "text"}, "rank": {"type": "integer"}}}})
    for doc_id, title, rank in PRODUCTS:
        direct.index(index=index, id=doc_id, body={"title": title, "rank": rank})
    direct.indices.refresh(index=index)
    good = search_configuration(api, "good", index, SORTED % "asc")
    bad = search_configuration(api, "bad", index, SORTED % "desc")
    panel = api.srw("PUT", "/query_sets", {"name": "panel", "querySetQueries": [
        {"queryText": q, "referenceAnswer": "red leather"} for q in QUERIES]}
                    ).json["query_set_id"]
    unjudged = api.srw("PUT", "/query_sets", {"name": "partly", "querySetQueries": [
        *({"queryText": q, "referenceAnswer": "red leather"} for q in QUERIES[:2]),
        {"queryText": "sandals"}]}).json["query_set_id"]
    yield {"index": index, "good": good, "bad": bad, "panel": panel, "unjudged": unjudged}
    direct.indices.delete(index=index, ignore=[404])


def definition(case: dict[str, str], **extra: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"name": "tiny", "searchConfigurationId": case["good"],
                            "queries": {"querySetId": case["panel"]}, "judge": JUDGE, "k": 3,
                            "metrics": ["NDCG@3", "Precision@3"]}
    body.update(extra)
    return body


def create(api: Api, body: dict[str, Any]) -> str:
    reply = api.srw("PUT", "/monitors", body)
    assert reply.status == 200, reply.data
    assert set(reply.json) == {"monitor_id", "status"} and reply.json["status"] == "CREATED"
    return str(reply.json["monitor_id"])


def finished(api: Api, monitor_id: str, run_id: str, timeout: float = 60) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while True:
        runs = api.srw("GET", f"/monitors/{monitor_id}/runs").json["runs"]
        run = next((r for r in runs if r["id"] == run_id), None)
        if run is not None and run["status"] != "PROCESSING":
            return run
        assert time.monotonic() < deadline, runs
        time.sleep(0.2)


def run_now(api: Api, monitor_id: str) -> dict[str, Any]:
    reply = api.srw("POST", f"/monitors/{monitor_id}/_run")
    assert reply.status == 200, reply.data
    assert reply.json["status"] == "PROCESSING"
    return finished(api, monitor_id, reply.json["run_id"])


def values(run: dict[str, Any], metric: str) -> dict[str, float]:
    return {q["query"]: q["values"][metric] for q in run["queries"]}


# -- the resource -----------------------------------------------------------------------------

def test_create_get_list_search_delete(api: Api, case: dict[str, str],
                                       direct: OpenSearch) -> None:
    monitor_id = create(api, definition(case, schedule={"cron": "0 3 * * *"}))
    got = api.srw("GET", f"/monitors/{monitor_id}").json["hits"]["hits"]
    assert [h["_id"] for h in got] == [monitor_id]
    source = got[0]["_source"]
    assert {k: v for k, v in source.items() if k not in ("timestamp", "enabledTime")} == {
        "id": monitor_id, "name": "tiny", "description": "",
        "searchConfigurationId": case["good"], "queries": {"querySetId": case["panel"]},
        "judge": {"judge": "token_overlap", "judgeOptions": {"threshold": 1.0},
                  "contextFields": ["title"]},
        "judgmentList": [], "k": 3, "metrics": ["NDCG@3", "Precision@3"],
        "schedule": {"cron": "0 3 * * *", "timezone": "UTC"}, "alerts": [],
        "goldPairs": 20, "budget": None}
    listed = api.srw("GET", "/monitors").json["hits"]["hits"]
    assert monitor_id in [h["_id"] for h in listed]
    found = api.srw("POST", "/monitors/_search",
                    {"query": {"term": {"searchConfigurationId": case["good"]}}}).json
    assert monitor_id in [h["_id"] for h in found["hits"]["hits"]]
    run = run_now(api, monitor_id)
    deleted = api.srw("DELETE", f"/monitors/{monitor_id}")
    assert deleted.status == 200 and deleted.json["result"] == "deleted"
    assert api.srw("GET", f"/monitors/{monitor_id}").status == 404
    assert not direct.exists(index=MONITOR_RUN_INDEX, id=run["id"])  # its runs went with it
    assert api.srw("DELETE", f"/monitors/{monitor_id}").status == 404
    assert api.srw("POST", f"/monitors/{monitor_id}/_run").status == 404
    assert api.srw("GET", f"/monitors/{monitor_id}/runs").status == 404


def test_defaults_of_a_minimal_definition(api: Api, case: dict[str, str]) -> None:
    monitor_id = create(api, {"name": " m ", "searchConfigurationId": case["good"],
                              "queries": {"ubi": {"sampling": "topn"}},
                              "judge": {"modelId": JUDGE_MODEL},
                              "alerts": [{"metric": "NDCG@10", "drop": 0.05}]})
    source = api.srw("GET", f"/monitors/{monitor_id}").json["hits"]["hits"][0]["_source"]
    assert source["name"] == "m"
    assert source["queries"] == {"ubi": {"sampling": "topn", "size": 50, "window": "7d",
                                         "ubiQueriesIndex": "ubi_queries"}}
    assert (source["k"], source["metrics"], source["schedule"]) == (10, ["NDCG@10"], None)
    assert source["alerts"] == [{"metric": "NDCG@10", "drop": 0.05, "relative": False,
                                 "baseline": {"previousRuns": 5}, "persistence": 2,
                                 "minJudged": 0.8, "minQueries": 10, "alpha": 0.05}]
    assert api.srw("GET", f"/monitors/{monitor_id}/runs").json == {"runs": [], "total": 0}
    bad_size = api.srw("GET", f"/monitors/{monitor_id}/runs?size=0")
    assert (bad_size.status, bad_size.json["error"]["reason"]) == (
        400, "size must be an integer from 1 to 1000, got: 0")
    api.srw("DELETE", f"/monitors/{monitor_id}")


BAD_DEFINITIONS = [
    ({"name": ""}, "Invalid name: Text cannot be empty"),
    ({"searchConfigurationId": "nope"},
     "searchConfigurationId: search configuration [nope] does not exist"),
    ({"queries": {}}, "queries must have querySetId (a fixed panel) and/or ubi (a sample of "
                      "recent UBI queries)"),
    ({"queries": {"querySetId": "nope"}}, "queries.querySetId: query set [nope] does not exist"),
    ({"queries": {"ubi": {"sampling": "all"}}},
     "queries.ubi.sampling must be one of [pptss, topn, random], got: all"),
    ({"queries": {"ubi": {"sampling": "topn", "window": "7w"}}},
     "queries.ubi.window must be a number of days or hours such as 7d or 12h, got: 7w"),
    ({"judge": {"judge": "nope"}},
     "judge.judge: Unknown judge [nope]; use one of: llm, token_overlap, semantic"),
    ({"judge": {"judge": "token_overlap", "judgeOptions": {"threshold": 2}}},
     "judge.judgeOptions.threshold: threshold must be a number between 0 and 1, got: 2"),
    ({"judge": {"modelId": "m", "judge": "token_overlap"}},
     "judge must have exactly one of modelId (an LLM) and judge (a reference judge)"),
    ({"judgmentList": ["nope"]}, "judgmentList: judgment [nope] does not exist"),
    ({"k": 0}, "k must be an integer from 1 to 100, got: 0"),
    ({"metrics": ["NDCG@10"]}, "metrics: [NDCG@10] is not a pointwise metric at k=3; one of "
                               "[Coverage@3, Precision@3, Recall@3, MAP@3, MRR, DCG@3, NDCG@3, "
                               "HitRate@3, Judged@3, NDCG'@3, MAP'@3, Precision'@3]"),
    ({"schedule": {"cron": "every day"}}, "schedule.cron: failed to parse cron expression. "
     "For more information check out https://en.wikipedia.org/wiki/Cron. For example, "
     '"12 * * * *"'),
    ({"alerts": [{"metric": "MRR", "drop": 0.1}]},
     "alerts[0].metric must be one of the monitor's metrics [NDCG@3, Precision@3], got: MRR"),
    ({"alerts": [{"metric": "NDCG@3"}]}, "alerts[0].drop is required: the drop that matters"),
    ({"alerts": [{"metric": "NDCG@3", "drop": 0.1, "persistence": 0}]},
     "alerts[0].persistence must be an integer from 1 to 100, got: 0"),
    ({"alerts": [{"metric": "NDCG@3", "drop": 0.1, "baseline": {"runId": "nope"}}]},
     "alerts[0].baseline.runId: run [nope] does not exist"),
    ({"goldPairs": -1}, "goldPairs must be an integer from 0 to 1000, got: -1"),
    ({"budget": {"maxTokens": 0}}, "budget.maxTokens must be an integer from 1 to "
                                   "1000000000000, got: 0"),
]


@pytest.mark.parametrize(("change", "message"), BAD_DEFINITIONS)
def test_bad_definitions_are_400s_naming_the_field(api: Api, case: dict[str, str],
                                                   change: dict[str, Any],
                                                   message: str) -> None:
    reply = api.srw("PUT", "/monitors", definition(case, **change))
    assert reply.status == 400, reply.data
    error = reply.json["error"]
    assert reply.json["status"] == 400 and error["type"] == "illegal_argument_exception"
    assert error["reason"] == message
    assert error["root_cause"] == [{"type": error["type"], "reason": error["reason"]}]


def test_the_body_must_name_a_judge_and_queries(api: Api, case: dict[str, str]) -> None:
    body = definition(case)
    del body["judge"]
    reply = api.srw("PUT", "/monitors", body)
    assert (reply.status, reply.json["error"]["reason"]) == (
        400, 'judge is required: {"modelId": ...} (an LLM) or {"judge": "token_overlap", '
             '"judgeOptions": {...}}')


# -- runs -------------------------------------------------------------------------------------

def test_a_run_stores_exact_values_and_a_second_run_reuses_every_rating(
        api: Api, case: dict[str, str], direct: OpenSearch) -> None:
    monitor_id = create(api, definition(case))
    first = run_now(api, monitor_id)
    assert first["status"] == "COMPLETED" and first["state"] == "OK", first
    assert first["monitorId"] == monitor_id and first["trigger"] == "manual"
    assert [q["query"] for q in first["queries"]] == QUERIES
    assert {q["query"]: q["docIds"] for q in first["queries"]} == GOOD_TOP
    assert values(first, "NDCG@3") == pytest.approx(dict.fromkeys(QUERIES, GOOD_NDCG))
    assert values(first, "Precision@3") == pytest.approx(dict.fromkeys(QUERIES, 2 / 3))
    assert values(first, "Judged@3") == dict.fromkeys(QUERIES, 1.0)
    ndcg = first["metrics"]["NDCG@3"]
    assert ndcg["mean"] == pytest.approx(GOOD_NDCG) and ndcg["n"] == 3
    assert ndcg["ci95"] == pytest.approx([GOOD_NDCG, GOOD_NDCG])  # no spread: a point
    assert first["rated"] == {"pairs": 9, "new": 9, "reused": 0, "cached": 0, "unrated": 0}
    assert first["ratings"] == [
        {"query": f'{q}#{{"referenceAnswer":"red leather"}}', "docId": d,
         "rating": 0.0 if d in ("a2", "b1", "c2") else 1.0}
        for q in QUERIES for d in GOOD_TOP[q]]
    assert first["gold"] == {"pairs": 9, "changed": 0, "drift": False}
    assert first["decisions"] == [] and first["usage"] == {"judgeCalls": 3}
    gold = direct.get(index=MONITOR_INDEX, id=monitor_id)["_source"]["gold"]
    assert [(p["query"], p["docId"], p["rating"]) for p in gold["pairs"]] == [
        (r["query"].split("#")[0], r["docId"], r["rating"]) for r in first["ratings"]]

    second = run_now(api, monitor_id)
    assert second["rated"] == {"pairs": 9, "new": 0, "reused": 9, "cached": 0, "unrated": 0}
    assert second["ratings"] == []
    assert second["gold"] == {"pairs": 9, "changed": 0, "drift": False}
    assert values(second, "NDCG@3") == values(first, "NDCG@3")
    runs = api.srw("GET", f"/monitors/{monitor_id}/runs").json
    assert runs["total"] == 2 and [r["id"] for r in runs["runs"]] == [second["id"], first["id"]]
    assert [r["id"] for r in api.srw("GET", f"/monitors/{monitor_id}/runs?size=1").json[
        "runs"]] == [second["id"]]
    csv = api.srw("GET", f"/monitors/{monitor_id}/_report?format=csv")
    assert csv.status == 200 and csv.headers["Content-Type"].startswith("text/csv")
    lines = csv.text.splitlines()
    assert lines[0] == "runId,timestamp,status,state,metric,mean,ci95Low,ci95High,n"
    ndcg = first["metrics"]["NDCG@3"]
    assert ndcg["mean"] == pytest.approx(GOOD_NDCG) and ndcg["ci95"] == [ndcg["mean"]] * 2
    assert lines[1] == (f"{first['id']},{first['timestamp']},COMPLETED,OK,NDCG@3,"
                        f"{ndcg['mean']},{ndcg['mean']},{ndcg['mean']},3")
    assert len(lines) == 1 + 2 * 3  # two runs, three metrics each
    assert api.srw("GET", f"/monitors/{monitor_id}/_report?format=pdf").json["error"][
        "reason"] == "format must be one of [html, md, csv], got: pdf"
    api.srw("DELETE", f"/monitors/{monitor_id}")


def test_ratings_of_a_judgment_list_are_reused_never_asked_again(
        api: Api, case: dict[str, str]) -> None:
    """People rated "shoes" (by its text): a1 3, a2 0. The judge rates the seven other pairs;
    "shoes" gains [7, 0, 1] (a3 rated 1 by the judge): DCG = 7 + 1/2 = 7.5, the ideal [3, 1, 0]
    7 + 1/log2(3): NDCG@3 = 7.5 / 7.6309298 = 0.9828419."""
    imported = api.srw("PUT", "/judgments", {
        "name": "people", "type": "IMPORT_JUDGMENT", "judgmentRatings": [
            {"query": "shoes", "ratings": [{"docId": "a1", "rating": "3"},
                                           {"docId": "a2", "rating": "0"}]}]}
                       ).json["judgment_id"]
    monitor_id = create(api, definition(case, judgmentList=[imported]))
    run = run_now(api, monitor_id)
    assert run["rated"] == {"pairs": 9, "new": 7, "reused": 2, "cached": 0, "unrated": 0}
    assert [r["docId"] for r in run["ratings"]] == ["a3", "a3", "b1", "b2", "c1", "c2", "c3"]
    assert values(run, "NDCG@3") == pytest.approx({
        "shoes": 7.5 / (7 + 1 / math.log2(3)), "boots": GOOD_NDCG, "sandals": GOOD_NDCG})
    api.srw("DELETE", f"/monitors/{monitor_id}")
    api.srw("DELETE", f"/judgments/{imported}")


ALERT_RULE = {"metric": "NDCG@3", "drop": 0.1, "persistence": 2, "minQueries": 3}


def test_alert_when_the_configuration_gets_worse_and_not_when_unchanged(
        api: Api, case: dict[str, str]) -> None:
    body = definition(case, alerts=[ALERT_RULE])
    monitor_id = create(api, body)
    first, unchanged = run_now(api, monitor_id), run_now(api, monitor_id)
    assert first["decisions"][0]["reason"] == "no baseline yet"
    assert (first["state"], unchanged["state"]) == ("OK", "OK")
    kept = unchanged["decisions"][0]
    assert (kept["flagged"], kept["delta"], kept["pValue"], kept["sharedQueries"],
            kept["baselineRuns"]) == (False, 0.0, 1.0, 3, [first["id"]])
    # the configuration is swapped for a worse one (PUT replaces the definition)
    assert api.srw("PUT", f"/monitors/{monitor_id}",
                   {**body, "searchConfigurationId": case["bad"]}).json == {
        "monitor_id": monitor_id, "status": "UPDATED"}
    once, twice = run_now(api, monitor_id), run_now(api, monitor_id)
    assert values(once, "NDCG@3") == pytest.approx(BAD_NDCG)
    # new pairs: a5, a4, b3, c4 (a3, b1, b2, c2, c3 were rated by the first runs)
    assert once["rated"]["new"] == 4 and twice["rated"]["new"] == 0
    drop = sum(BAD_NDCG.values()) / 3 - GOOD_NDCG
    first_bad = once["decisions"][0]
    assert (once["state"], first_bad["flagged"], first_bad["consecutive"]) == ("OK", True, 1)
    assert first_bad["delta"] == pytest.approx(drop)
    assert first_bad["baselineRuns"] == [first["id"], unchanged["id"]]
    second_bad = twice["decisions"][0]
    assert (twice["state"], second_bad["flagged"], second_bad["consecutive"]) == (
        "ALERT", True, 2)
    assert second_bad["baselineRuns"] == [first["id"], unchanged["id"]]  # not the flagged one
    assert second_bad["pValue"] < 0.05
    api.srw("DELETE", f"/monitors/{monitor_id}")


def test_judge_drift_when_the_judge_changes(api: Api, case: dict[str, str]) -> None:
    body = definition(case, alerts=[ALERT_RULE])
    monitor_id = create(api, body)
    run_now(api, monitor_id)
    looser = {**JUDGE, "judgeOptions": {"threshold": 0.5}}
    assert api.srw("PUT", f"/monitors/{monitor_id}", {**body, "judge": looser}).status == 200
    drifted = run_now(api, monitor_id)
    assert drifted["gold"] == {"pairs": 9, "changed": 3, "drift": True}
    assert drifted["state"] == "JUDGE_DRIFT"
    assert drifted["rated"]["new"] == 0  # the search did not change: every pair was known
    api.srw("DELETE", f"/monitors/{monitor_id}")


def test_inconclusive_below_the_coverage_floor(api: Api, case: dict[str, str]) -> None:
    """"sandals" has no reference answer, so token_overlap cannot rate its hits: Judged@3 is
    (1 + 1 + 0) / 3 = 0.667, below the floor 0.8."""
    monitor_id = create(api, definition(case, queries={"querySetId": case["unjudged"]},
                                        alerts=[ALERT_RULE]))
    run = run_now(api, monitor_id)
    assert run["metrics"]["Judged@3"]["mean"] == pytest.approx(2 / 3)
    assert run["rated"] == {"pairs": 9, "new": 6, "reused": 0, "cached": 0, "unrated": 3}
    assert run["state"] == "INCONCLUSIVE"
    assert run["decisions"][0]["reason"] == "Judged 0.667 is below the floor 0.8"
    api.srw("DELETE", f"/monitors/{monitor_id}")


def test_a_run_that_cannot_search_ends_error_with_its_reason(
        api: Api, case: dict[str, str], direct: OpenSearch) -> None:
    monitor_id = create(api, definition(case))
    direct.update(index=MONITOR_INDEX, id=monitor_id, refresh=True,
                  body={"doc": {"searchConfigurationId": "gone"}})
    run = run_now(api, monitor_id)
    assert run["status"] == "ERROR"
    assert run["error"] == "SearchConfiguration [gone] does not exist"
    assert "state" not in run
    api.srw("DELETE", f"/monitors/{monitor_id}")
    gone = f"{case['index']}-gone"
    direct.index(index=gone, id="x", body={"title": "shoes", "rank": 1}, refresh=True)
    monitor_id = create(api, definition(case, searchConfigurationId=search_configuration(
        api, "gone", gone, SORTED % "asc")))
    direct.indices.delete(index=gone)
    run = run_now(api, monitor_id)
    assert run["status"] == "ERROR"
    assert run["error"].startswith("every search failed: "), run["error"]
    assert "index_not_found" in run["error"] or "no such index" in run["error"], run["error"]
    api.srw("DELETE", f"/monitors/{monitor_id}")


def test_an_llm_judge_second_run_makes_no_model_call(api: Api, case: dict[str, str],
                                                     llm: LLMServer) -> None:
    """The stand-in model rates the first run's nine pairs; the second run reuses them all
    (gold set off: re-rating it is a model call by design)."""
    monitor_id = create(api, definition(case, judge={"modelId": JUDGE_MODEL,
                                                      "contextFields": ["title"]},
                                        goldPairs=0, budget={"maxTokens": 100000}))
    first = run_now(api, monitor_id)
    assert first["status"] == "COMPLETED", first
    calls = llm.calls
    assert calls >= 3  # at least one call per query
    assert first["rated"]["new"] + first["rated"]["cached"] == 9
    second = run_now(api, monitor_id)
    assert llm.calls == calls  # no request at all
    assert second["rated"] == {"pairs": 9, "new": 0, "reused": 9, "cached": 0, "unrated": 0}
    assert second["usage"]["llmCalls"] == 0 and second["usage"]["totalTokens"] == 0
    assert "gold" not in second
    api.srw("DELETE", f"/monitors/{monitor_id}")


def test_a_ubi_sample_takes_the_queries_of_its_window(api: Api, case: dict[str, str],
                                                     direct: OpenSearch) -> None:
    """UBI queries: "sandals" 5 times 30 days ago, "shoes" 3 and "boots" 2 times an hour ago.
    The top queries of the last 7 days are shoes, boots; of the last 60 days sandals, shoes,
    boots. The panel's queries come first, the sample's others after them."""
    ubi = f"{case['index']}-ubi"
    direct.indices.create(index=ubi, body={"mappings": {"properties": {
        "user_query": {"type": "keyword"}, "timestamp": {"type": "date"}}}})
    now = time.time()
    for n, (text, days) in enumerate([("sandals", 30)] * 5 + [("shoes", 0)] * 3
                                     + [("boots", 0)] * 2):
        moment = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(now - days * 86400 - 3600))
        direct.index(index=ubi, id=str(n), body={"user_query": text, "timestamp": moment})
    direct.indices.refresh(index=ubi)
    try:
        for window, expected in (("7d", ["shoes", "boots"]),
                                 ("60d", ["sandals", "shoes", "boots"])):
            monitor_id = create(api, definition(case, queries={"ubi": {
                "sampling": "topn", "size": 10, "window": window, "ubiQueriesIndex": ubi}},
                goldPairs=0))
            run = run_now(api, monitor_id)
            assert run["status"] == "COMPLETED", run
            assert [q["query"] for q in run["queries"]] == expected
            # no reference answers: token_overlap rates nothing
            assert run["metrics"]["Judged@3"]["mean"] == 0.0
            api.srw("DELETE", f"/monitors/{monitor_id}")
        monitor_id = create(api, definition(case, queries={
            "querySetId": case["panel"], "ubi": {"sampling": "topn", "window": "60d",
                                                 "ubiQueriesIndex": ubi}}, goldPairs=0))
        run = run_now(api, monitor_id)
        assert [q["query"] for q in run["queries"]] == QUERIES  # all three already in the panel
        api.srw("DELETE", f"/monitors/{monitor_id}")
    finally:
        direct.indices.delete(index=ubi, ignore=[404])


def test_a_budget_leaves_pairs_unrated_and_the_run_inconclusive(
        api: Api, case: dict[str, str], llm: LLMServer, priced: str) -> None:
    """A one-token budget pays for no call; with a priced model and no budget the run's usage
    carries its cost."""
    monitor_id = create(api, definition(case, judge={"modelId": priced}, goldPairs=0,
                                        budget={"maxTokens": 1}, alerts=[ALERT_RULE]))
    run = run_now(api, monitor_id)
    assert run["status"] == "COMPLETED", run
    assert llm.calls == 0
    assert run["rated"] == {"pairs": 9, "new": 0, "reused": 0, "cached": 0, "unrated": 9}
    assert run["state"] == "INCONCLUSIVE"
    assert run["usage"]["llmCalls"] == 0 and run["usage"]["cost"] == 0
    api.srw("DELETE", f"/monitors/{monitor_id}")
    monitor_id = create(api, definition(case, judge={"modelId": priced}, goldPairs=0))
    run = run_now(api, monitor_id)
    assert run["usage"]["llmCalls"] == llm.calls > 0
    tokens = (run["usage"]["inputTokens"], run["usage"]["outputTokens"])
    assert tokens[0] > 0
    assert run["usage"]["cost"] == pytest.approx((tokens[0] * 2.5 + tokens[1] * 10.0) / 1e6)
    api.srw("DELETE", f"/monitors/{monitor_id}")


def test_an_llm_judge_re_rates_its_gold_set_past_the_cache(api: Api, case: dict[str, str],
                                                           llm: LLMServer) -> None:
    """Three gold pairs (the first query's three results): the second run asks the model about
    those only, past the judgment cache, and the stand-in (deterministic) answers the same."""
    monitor_id = create(api, definition(case, judge={"modelId": JUDGE_MODEL,
                                                      "contextFields": ["title"]},
                                        goldPairs=3))
    first = run_now(api, monitor_id)
    assert first["gold"] == {"pairs": 3, "changed": 0, "drift": False}
    before = len(llm.requests)
    second = run_now(api, monitor_id)
    asked = llm.requests[before:]
    shown = " ".join(r.user or "" for r in asked)
    assert [d for d, *_ in PRODUCTS if f"::{d}" in shown] == ["a1", "a2", "a3"]
    assert second["rated"]["new"] == 0 and second["rated"]["cached"] == 0
    assert second["gold"] == {"pairs": 3, "changed": 0, "drift": False}
    assert second["state"] == "OK" and second["usage"]["llmCalls"] >= 1
    api.srw("DELETE", f"/monitors/{monitor_id}")


def test_a_model_that_fails_every_call_ends_the_run_error_with_its_usage(
        api: Api, case: dict[str, str], llm: LLMServer) -> None:
    llm.fail(500, times=1000)
    monitor_id = create(api, definition(case, judge={"modelId": JUDGE_MODEL}, goldPairs=0))
    run = run_now(api, monitor_id)
    assert run["status"] == "ERROR", run
    assert run["error"].startswith("the model rated nothing: "), run["error"]
    # a call is counted once, its retries (the requests the stand-in saw) included
    assert 0 < run["usage"]["llmCalls"] <= llm.calls
    assert "state" not in run and "queries" not in run
    api.srw("DELETE", f"/monitors/{monitor_id}")


# -- the scheduler and the gauges -------------------------------------------------------------

def test_each_fire_time_starts_one_run_whatever_the_schedulers(
        api: Api, case: dict[str, str], env: dict[str, str], direct: OpenSearch,
        celery: Any) -> None:
    """Two schedulers over one monitor with a cron every 5 minutes: nothing before the first
    fire time, one run at it (the second scheduler finds it claimed), and one run, not a
    backlog, for several fire times missed. (Only this monitor is fired: a whole ``tick`` at a
    time to come would also fire, and mark as handled, the other monitors of the cluster.)"""
    from datetime import UTC, datetime, timedelta

    from croniter import croniter

    from workbench.config import Config
    from workbench.monitors.scheduling import MonitorScheduler
    from workbench.services import Services

    monitor_id = create(api, definition(case, schedule={"cron": "*/5 * * * *"}, goldPairs=0))
    monitor = direct.get(index=MONITOR_INDEX, id=monitor_id)["_source"]
    enabled_ms = monitor["enabledTime"]
    enabled = datetime.fromtimestamp(enabled_ms / 1000, UTC)
    fire = croniter("*/5 * * * *", enabled).get_next(datetime)
    one, other = (MonitorScheduler(Services(Config.from_env(env))) for _ in range(2))

    def at(scheduler: MonitorScheduler, moment: datetime) -> list[str]:
        started = scheduler.fire_if_due(monitor, moment)
        return [started] if started else []

    try:
        assert at(one, fire - timedelta(seconds=1)) == []
        started = at(one, fire + timedelta(seconds=2))
        assert len(started) == 1
        assert at(other, fire + timedelta(seconds=3)) == []
        assert at(one, fire + timedelta(seconds=30)) == []
        later = at(other, fire + timedelta(minutes=17))
        assert len(later) == 1
        for run_id in (*started, *later):
            run = finished(api, monitor_id, run_id)
            assert (run["status"], run["trigger"]) == ("COMPLETED", "schedule")
    finally:
        api.srw("DELETE", f"/monitors/{monitor_id}")


def test_the_scheduler_process_runs_a_monitor_on_its_cron(api: Api, case: dict[str, str],
                                                          env: dict[str, str]) -> None:
    """The real ``workbench scheduler`` process with an every-minute cron (waits <= 80 s)."""
    monitor_id = create(api, definition(case, schedule={"cron": "* * * * *"}))
    process = Proc([sys.executable, "-m", "workbench.cli", "scheduler"],
                   dict(env, WORKBENCH_SCHEDULER_INTERVAL="1"), "workbench-scheduler")
    try:
        deadline = time.monotonic() + 80
        runs: list[dict[str, Any]] = []
        while time.monotonic() < deadline and not runs:
            time.sleep(1)
            runs = [r for r in api.srw("GET", f"/monitors/{monitor_id}/runs").json["runs"]
                    if r["status"] == "COMPLETED"]
        assert runs, process.log()[-3000:]
        assert runs[0]["trigger"] == "schedule"
        assert values(runs[0], "NDCG@3") == pytest.approx(dict.fromkeys(QUERIES, GOOD_NDCG))
    finally:
        process.stop()
        api.srw("DELETE", f"/monitors/{monitor_id}")


@pytest.fixture(scope="module")
def metered(env: dict[str, str], tmp_path_factory: pytest.TempPathFactory
            ) -> Iterator[dict[str, Any]]:
    port = free_port()
    with_metrics = dict(env, WORKBENCH_METRICS_PORT=str(port),
                        WORKBENCH_METRICS_DIR=str(tmp_path_factory.mktemp("metrics")),
                        WORKBENCH_QUEUE=f"monitor-metrics-{uuid.uuid4().hex[:8]}")
    server = Server(with_metrics)
    worker = Worker(with_metrics)
    yield {"api": Api(server.url), "url": f"http://127.0.0.1:{port}/metrics"}
    worker.stop()
    server.stop()


def test_the_gauges_move(metered: dict[str, Any], case: dict[str, str]) -> None:
    from tests.integration.test_metrics import scrape, settle, value

    api = metered["api"]
    body = definition(case, alerts=[ALERT_RULE])
    monitor_id = create(api, body)
    run_now(api, monitor_id)
    samples = settle(metered["url"], "workbench_monitor_runs_total",
                     {"monitor": monitor_id, "state": "OK"}, 1)
    assert value(samples, "workbench_monitor_value", monitor=monitor_id,
                 metric="NDCG@3") == pytest.approx(GOOD_NDCG)
    assert value(samples, "workbench_monitor_value", monitor=monitor_id,
                 metric="Precision@3") == pytest.approx(2 / 3)
    assert value(samples, "workbench_monitor_state", monitor=monitor_id) == 0
    api.srw("PUT", f"/monitors/{monitor_id}", {**body, "judge": {
        **JUDGE, "judgeOptions": {"threshold": 0.5}}})
    run_now(api, monitor_id)
    samples = settle(metered["url"], "workbench_monitor_runs_total",
                     {"monitor": monitor_id, "state": "JUDGE_DRIFT"}, 1)
    assert value(samples, "workbench_monitor_state", monitor=monitor_id) == 3
    assert value(samples, "workbench_monitor_runs_total", monitor=monitor_id,
                 state="OK") == 1
    assert value(samples, "workbench_monitor_cost_total", monitor=monitor_id) == 0
    assert scrape(metered["url"])  # the listener still answers
    api.srw("DELETE", f"/monitors/{monitor_id}")
