"""Metrics that see the holes of a judgment list, through real runs (docs/algorithms.md,
"Condensed metrics and Judged@k"): the ``condensedMetrics`` every pointwise and hybrid evaluation
result stores, worked out by hand and against ir_measures; the summary's Judged@k and condensed
rows, ``?metric=`` on them, and its ``judged_spread`` and ``condensed_disagrees`` warnings, which
a fully judged experiment does not get and results stored without condensed values do not
either."""

from __future__ import annotations

import math
import uuid
from collections.abc import Iterator
from typing import Any

import ir_measures
import pytest
from ir_measures import AP, Judged, P, nDCG
from opensearchpy import OpenSearch

from tests.integration.test_experiments import EVALUATIONS, by_experiment, create, wait
from tests.support.api import Api, search_configuration
from tests.support.processes import Worker

K = 3
STANDARD = ["Coverage@3", "Precision@3", "Recall@3", "MAP@3", "MRR", "DCG@3", "NDCG@3",
            "HitRate@3"]
CONDENSED = ["Judged@3", "NDCG'@3", "MAP'@3", "Precision'@3"]
LOG2_3 = math.log2(3)

# Six shoes ranked 1..6: "by rank asc" finds a, b, c (k = 3), "by rank desc" finds f, e, d.
DOCS = [(doc, 1 + i) for i, doc in enumerate("abcdef")]
# The list with holes rates only a, b, c (made for "by rank asc") and d.
HOLED = {"a": 2, "b": 1, "c": 0, "d": 3}
FULL = {**HOLED, "e": 0, "f": 0}

# Worked by hand, for both lists (e and f rated 0 add nothing to the ratings' statistics):
# ratings sorted 0, 1, 2, 3 (the full list: 0, 0, 0, 1, 2, 3); threshold T = max(0.5 * 3, P90)
# = 3 with P90 the top rating, so only d is relevant, R = 1. Ideal top 3: 3, 2, 1, so
# IDCG@3 = 7 + 3/log2(3) + 1/2 (gain 2^r - 1, discount log2(rank + 1)).
IDCG = 7 + 3 / LOG2_3 + 0.5
# "by rank asc", a, b, c, all judged: DCG@3 = 3/1 + 1/log2(3) + 0; d not found, so MAP and
# Precision are 0. Everything judged: the condensed list is the list.
ASC = {"Judged@3": 1.0, "NDCG'@3": (3 + 1 / LOG2_3) / IDCG, "MAP'@3": 0.0, "Precision'@3": 0.0}
# "by rank desc", f, e, d with the holed list: one judged of three, Judged@3 = 1/3. Standard:
# f, e count as irrelevant, d's gain 7 at rank 3: NDCG@3 = (7/2) / IDCG, MAP@3 = (1/3) / 1,
# Precision@3 = 1/3. Condensed: f and e dropped, the list is d alone: NDCG'@3 = 7 / IDCG,
# MAP'@3 = (1/1) / 1 = 1, Precision'@3 = 1 / min(3, 1) = 1.
DESC_HOLED = {"Judged@3": 1 / 3, "NDCG'@3": 7 / IDCG, "MAP'@3": 1.0, "Precision'@3": 1.0}
# With the full list f and e are judged (rated 0): the condensed values are the standard ones.
DESC_FULL = {"Judged@3": 1.0, "NDCG'@3": 3.5 / IDCG, "MAP'@3": 1 / 3, "Precision'@3": 1 / 3}
# So on the holed list "by rank asc" wins NDCG@3 (0.3866 against 0.3726) and "by rank desc"
# wins NDCG'@3 (0.7453 against 0.3866); their Judged@3 differ by 2/3.
JUDGED_SPREAD_MESSAGE = (
    "mean Judged@3 differs by 0.67 between [by rank asc] (1.00) and [by rank desc] (0.33), more "
    "than 0.10: the standard metrics count unjudged hits as irrelevant and so favour [by rank "
    "asc]; compare on NDCG'@3, or fill the holes by judging the unjudged hits")
DISAGREES_MESSAGE = (
    "[by rank asc] wins on NDCG@3 (0.3866) but [by rank desc] wins on NDCG'@3 (0.7453), which "
    "leaves unjudged hits out: the ranking on NDCG@3 may come from the holes of the judgment "
    "list rather than from the search")


def judgment(api: Api, name: str, ratings: dict[str, int]) -> str:
    reply = api.srw("PUT", "/judgments", {
        "name": name, "type": "IMPORT_JUDGMENT", "judgmentRatings": [
            {"query": "shoe", "ratings": [{"docId": d, "rating": str(r)}
                                          for d, r in ratings.items()]}]})
    assert reply.status == 200, reply.data
    judgment_id = str(reply.json["judgment_id"])
    wait(api, f"/judgments/{judgment_id}")
    return judgment_id


@pytest.fixture(scope="module")
def shoes(api: Api, direct: OpenSearch, worker: Worker) -> Iterator[dict[str, Any]]:
    index = f"test-holes-{uuid.uuid4().hex[:6]}"
    direct.indices.create(index=index, body={"mappings": {"properties": {
        "title": {"type": "text"}, "description": {"type": "text"},
        "rank": {"type": "integer"}}}})
    for doc, rank in DOCS:
        direct.index(index=index, id=doc, body={
            "title": f"shoe {doc}", "description": "a shoe" if rank % 2 else "a boot",
            "rank": rank})
    direct.indices.refresh(index=index)
    asc = search_configuration(api, "by rank asc", index,
                               '{"query":{"match":{"title":"%SearchText%"}},'
                               '"sort":[{"rank":"asc"}]}')
    desc = search_configuration(api, "by rank desc", index,
                                '{"query":{"match":{"title":"%SearchText%"}},'
                                '"sort":[{"rank":"desc"}]}')
    hybrid = search_configuration(api, "shoe hybrid", index,
                                  '{"query":{"hybrid":{"queries":['
                                  '{"match":{"title":"%SearchText%"}},'
                                  '{"match":{"description":"%SearchText%"}}]}}}')
    query_set = api.srw("PUT", "/query_sets", {"name": "shoes", "querySetQueries": [
        {"queryText": "shoe"}]}).json["query_set_id"]
    holed, full = judgment(api, "holed", HOLED), judgment(api, "full", FULL)

    def run(judgment_id: str, kind: str = "POINTWISE_EVALUATION") -> str:
        configs = [hybrid] if kind == "HYBRID_OPTIMIZER" else [asc, desc]
        experiment_id = create(api, {"type": kind, "querySetId": query_set,
                                     "searchConfigurationList": configs,
                                     "judgmentList": [judgment_id], "size": K})
        assert wait(api, f"/experiments/{experiment_id}")["status"] == "COMPLETED"
        return experiment_id

    yield {"asc": asc, "desc": desc, "run": run, "holed": holed, "full": full}
    direct.indices.delete(index=index)


def stored(direct: OpenSearch, experiment_id: str) -> dict[str, dict[str, Any]]:
    """Configuration id -> its one evaluation result (one query)."""
    return {e["searchConfigurationId"]: e for e in by_experiment(direct, EVALUATIONS,
                                                                  experiment_id)}


def as_map(entries: list[dict[str, Any]]) -> dict[str, float]:
    return {m["metric"]: m["value"] for m in entries}


def summary(api: Api, experiment_id: str, **params: str) -> dict[str, Any]:
    reply = api.srw("GET", f"/experiments/{experiment_id}/_summary", params=params)
    assert reply.status == 200, reply.data
    return reply.json


def test_holes_stored_summarised_and_warned(api: Api, direct: OpenSearch,
                                            shoes: dict[str, Any]) -> None:
    experiment_id = shoes["run"](shoes["holed"])
    results = stored(direct, experiment_id)
    asc, desc = results[shoes["asc"]], results[shoes["desc"]]
    assert (asc["documentIds"], desc["documentIds"]) == (["a", "b", "c"], ["f", "e", "d"])
    for doc, expected in ((asc, ASC), (desc, DESC_HOLED)):
        # The plugin's list and the exact one as before, the condensed ones in their own list.
        assert [m["metric"] for m in doc["metrics"]] == STANDARD
        assert [m["metric"] for m in doc["exactMetrics"]] == STANDARD
        assert [m["metric"] for m in doc["condensedMetrics"]] == CONDENSED
        assert as_map(doc["condensedMetrics"]) == pytest.approx(expected, rel=1e-12)
    assert as_map(desc["exactMetrics"])["NDCG@3"] == pytest.approx(3.5 / IDCG, rel=1e-12)
    assert as_map(desc["metrics"])["NDCG@3"] == 0.37  # the plugin's rounding, unchanged

    got = summary(api, experiment_id)
    rows = {c["searchConfigurationId"]: c for c in got["configurations"]}
    for config, expected in ((shoes["asc"], ASC), (shoes["desc"], DESC_HOLED)):
        metrics = rows[config]["metrics"]
        assert list(metrics) == STANDARD + CONDENSED
        assert {name: metrics[name]["mean"] for name in CONDENSED} == pytest.approx(
            expected, rel=1e-12)
        assert metrics["Judged@3"]["n"] == 1
    # Comparisons: the standard metrics, the main one first (a condensed one when asked for).
    assert [c["metric"] for c in got["comparisons"]] == ["NDCG@3", *[
        m for m in STANDARD if m != "NDCG@3"]]

    # "by rank desc" has 1 of its 3 hits judged: the existing coverage warning, then the two.
    assert [w["code"] for w in got["warnings"]] == [
        "low_judgment_coverage", "judged_spread", "condensed_disagrees"]
    spread, disagrees = got["warnings"][1:]
    assert spread == {
        "level": "warning", "code": "judged_spread", "metric": "Judged@3",
        "spread": pytest.approx(2 / 3, rel=1e-12), "margin": 0.1,
        "mostJudged": {"searchConfigurationId": shoes["asc"], "variantId": None,
                       "name": "by rank asc", "mean": 1.0},
        "leastJudged": {"searchConfigurationId": shoes["desc"], "variantId": None,
                        "name": "by rank desc", "mean": pytest.approx(1 / 3, rel=1e-12)},
        "message": JUDGED_SPREAD_MESSAGE}
    assert disagrees == {
        "level": "warning", "code": "condensed_disagrees", "metric": "NDCG@3",
        "condensedMetric": "NDCG'@3",
        "standardWinner": {"searchConfigurationId": shoes["asc"], "variantId": None,
                           "name": "by rank asc",
                           "mean": pytest.approx(ASC["NDCG'@3"], rel=1e-12)},
        "condensedWinner": {"searchConfigurationId": shoes["desc"], "variantId": None,
                            "name": "by rank desc",
                            "mean": pytest.approx(7 / IDCG, rel=1e-12)},
        "message": DISAGREES_MESSAGE}

    # ?metric= takes the condensed names: comparisons lead with it, its twin is checked.
    primed = summary(api, experiment_id, metric="NDCG'@3")
    assert primed["metric"] == "NDCG'@3"
    assert [c["metric"] for c in primed["comparisons"]] == ["NDCG'@3", *STANDARD]
    nprime = primed["comparisons"][0]
    assert (nprime["baseline"], nprime["candidate"]) == (shoes["asc"], shoes["desc"])
    assert nprime["meanDelta"] == pytest.approx(7 / IDCG - ASC["NDCG'@3"], abs=1e-9)
    assert [w["message"] for w in primed["warnings"][1:]] == [JUDGED_SPREAD_MESSAGE,
                                                              DISAGREES_MESSAGE]
    # MAP@3: desc wins both MAP@3 (1/3 against 0) and MAP'@3 (1 against 0): no disagreement.
    on_map = summary(api, experiment_id, metric="MAP@3")
    assert [w["code"] for w in on_map["warnings"]] == ["low_judgment_coverage", "judged_spread"]
    # A metric without a condensed twin: NDCG@3 is checked.
    assert [w["message"] for w in summary(api, experiment_id, metric="MRR")["warnings"][1:]] == [
        JUDGED_SPREAD_MESSAGE, DISAGREES_MESSAGE]
    api.srw("GET", f"/experiments/{experiment_id}/_summary", params={"metric": "NDCG'@10"}).error(
        400, "metric [NDCG'@10] is not a metric of this experiment; expected one of "
             f"[{', '.join(STANDARD + CONDENSED)}]")


def test_a_fully_judged_experiment_gets_no_warning(api: Api, direct: OpenSearch,
                                                   shoes: dict[str, Any]) -> None:
    experiment_id = shoes["run"](shoes["full"])
    results = stored(direct, experiment_id)
    for config, expected in ((shoes["asc"], ASC), (shoes["desc"], DESC_FULL)):
        doc = results[config]
        assert as_map(doc["condensedMetrics"]) == pytest.approx(expected, rel=1e-12)
        exact = as_map(doc["exactMetrics"])
        # Nothing left out: each condensed metric is its standard twin, bit for bit.
        for twin in ("NDCG", "MAP", "Precision"):
            assert as_map(doc["condensedMetrics"])[f"{twin}'@3"] == exact[f"{twin}@3"]
    got = summary(api, experiment_id)
    assert got["warnings"] == []
    assert [c["metrics"]["Judged@3"]["mean"] for c in got["configurations"]] == [1.0, 1.0]


def test_results_stored_without_condensed_values(api: Api, direct: OpenSearch,
                                                 shoes: dict[str, Any]) -> None:
    """As an earlier workbench (or the plugin) stored them: the summary lists the standard
    metrics only, warns of no hole, and a condensed ``metric`` is a 400 saying why."""
    experiment_id = shoes["run"](shoes["holed"])
    direct.update_by_query(index=EVALUATIONS, refresh=True, body={
        "query": {"term": {"experimentId": experiment_id}},
        "script": {"source": "ctx._source.remove('condensedMetrics')", "lang": "painless"}})
    assert all("condensedMetrics" not in e
               for e in by_experiment(direct, EVALUATIONS, experiment_id))
    got = summary(api, experiment_id)
    assert [list(c["metrics"]) for c in got["configurations"]] == [STANDARD, STANDARD]
    assert [w["code"] for w in got["warnings"]] == ["low_judgment_coverage"]
    assert len(got["comparisons"]) == len(STANDARD)
    api.srw("GET", f"/experiments/{experiment_id}/_summary", params={"metric": "Judged@3"}).error(
        400, f"metric [Judged@3] is not stored in the results of experiment [{experiment_id}]: "
             "they were written before the workbench computed condensed metrics; run the "
             "experiment again to have them")


def test_hybrid_results_store_them_as_ir_measures_computes_them(
        api: Api, direct: OpenSearch, shoes: dict[str, Any]) -> None:
    experiment_id = shoes["run"](shoes["holed"], "HYBRID_OPTIMIZER")
    evaluations = by_experiment(direct, EVALUATIONS, experiment_id)
    assert len(evaluations) == 82
    # The independent reference: trec_eval's judged-only measures (-J) and ir_measures'
    # Judged@k on each variant's stored list; relevance level 3 is the threshold above.
    qrels = {"shoe": HOLED}
    measures = [Judged @ K, nDCG(gains={0: 0, 1: 1, 2: 3, 3: 7}, judged_only=True) @ K,
                AP(rel=3, judged_only=True) @ K, P(rel=3, judged_only=True) @ K]
    lists = set()
    for doc in evaluations:
        ids = doc["documentIds"]
        lists.add(tuple(ids))
        run = {"shoe": {d: float(len(ids) - i) for i, d in enumerate(ids)}}
        ref = {m.measure: m.value for m in ir_measures.iter_calc(measures[:1], qrels, run)}
        ref.update({m.measure: m.value for m in ir_measures.pytrec_eval.iter_calc(
            measures[1:], qrels, run)})
        mine = as_map(doc["condensedMetrics"])
        assert [m["metric"] for m in doc["exactMetrics"]] == STANDARD
        assert mine["Judged@3"] == pytest.approx(ref[measures[0]], abs=1e-12)
        assert mine["NDCG'@3"] == pytest.approx(ref[measures[1]], abs=1e-12)
        assert mine["MAP'@3"] == pytest.approx(ref[measures[2]], abs=1e-12)
        depth = min(K, sum(d in HOLED for d in ids))  # trec_eval's P divides by k
        assert mine["Precision'@3"] * depth / K == pytest.approx(ref[measures[3]], abs=1e-12)
    assert len(lists) > 1  # the variants rank differently: more than one list checked
    got = summary(api, experiment_id)
    assert all(list(c["metrics"]) == STANDARD + CONDENSED for c in got["configurations"])
    assert list(got["best"]) == ["NDCG@3", *[m for m in STANDARD if m != "NDCG@3"]]
    judged = summary(api, experiment_id, metric="Judged@3")
    best = judged["best"]["Judged@3"]
    assert list(judged["best"]) == ["Judged@3", *STANDARD] and best["mean"] == max(
        c["metrics"]["Judged@3"]["mean"] for c in judged["configurations"])
