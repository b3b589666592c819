"""Query sets over HTTP against the real cluster: shapes, validation, sampling on ESCI UBI data."""

from __future__ import annotations

import json
import re
import uuid
from collections import Counter
from typing import Any

import numpy as np
import pytest
from opensearchpy import OpenSearch
from scipy import stats as scistats

from tests.support.api import Api
from tests.support.data import ESCI

INDEX = "search-relevance-queryset"
UUID = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$")
TIMESTAMP = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$")
BAD_CHARS = "Text contains invalid characters (quotes, backslashes, or HTML tags are not allowed)"


def unique(prefix: str = "qs") -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


def ubi_query_counts() -> Counter[str]:
    """user_query frequencies computed straight from the raw NDJSON, independently of the
    workbench."""
    counts: Counter[str] = Counter()
    with (ESCI / "ubi_queries_events.ndjson").open() as lines:
        for action_line in lines:
            action = json.loads(action_line)
            doc = json.loads(next(lines))
            if action["index"]["_index"] == "ubi_queries" and "user_query" in doc:
                counts[doc["user_query"]] += 1
    return counts


def create_manual(api: Api, queries: list[Any], **extra: Any) -> str:
    reply = api.srw("PUT", "/query_sets", {"name": unique(), "querySetQueries": queries, **extra})
    assert reply.status == 200, reply.data
    return str(reply.json["query_set_id"])


# -- creation and reading -----------------------------------------------------------------------

def test_put_manual_query_set_and_read_it_back(api: Api) -> None:
    name = unique()
    reply = api.srw("PUT", "/query_sets", {
        "name": name, "description": "Hand-made set", "sampling": "manual",
        "querySetQueries": [
            {"queryText": "red shoes"},
            {"queryText": "tv", "referenceAnswer": "a television", "category": "electronics"},
            {"queryText": 42, "rank": 1.5, "fresh": True, "ignored": None},
            {"queryText": "red shoes"},
        ],
    })
    assert reply.status == 200
    assert set(reply.json) == {"query_set_id", "query_set_result"}
    assert reply.json["query_set_result"] == "CREATED"
    qs_id = reply.json["query_set_id"]
    assert UUID.match(qs_id)

    got = api.srw("GET", f"/query_sets/{qs_id}")
    assert got.status == 200
    body = got.json
    assert set(body) >= {"took", "timed_out", "_shards", "hits"}
    assert body["hits"]["total"] == {"value": 1, "relation": "eq"}
    (hit,) = body["hits"]["hits"]
    assert hit["_index"] == INDEX and hit["_id"] == qs_id
    source = hit["_source"]
    # the plugin's fields, then the set's kind (the plugin branch's generated sets name it)
    assert list(source) == ["id", "name", "description", "sampling", "timestamp",
                            "querySetQueries", "type"]
    assert source["type"] == "manual_query_set"
    assert source["id"] == qs_id
    assert (source["name"], source["description"], source["sampling"]) == (
        name, "Hand-made set", "manual")
    assert TIMESTAMP.match(source["timestamp"])
    assert source["querySetQueries"] == [
        {"queryText": "red shoes", "customFields": {}},
        {"queryText": "tv", "customFields": {"referenceAnswer": "a television",
                                             "category": "electronics"}},
        {"queryText": "42", "customFields": {"rank": "1.5", "fresh": "true"}},
        {"queryText": "red shoes", "customFields": {}},
    ]


def test_dashboards_string_forms_of_the_queries(api: Api, direct: OpenSearch) -> None:
    ndjson = ('{"queryText": "laptop", "referenceAnswer": "a computer"}\n\n'
              '{"queryText": "desk"}\nplain line\n')
    qs_id = create_manual(api, ndjson)  # type: ignore[arg-type]
    stored = direct.get(index=INDEX, id=qs_id)["_source"]["querySetQueries"]
    assert stored == [
        {"queryText": "laptop", "customFields": {"referenceAnswer": "a computer"}},
        {"queryText": "desk", "customFields": {}},
        {"queryText": "plain line", "customFields": {}},
    ]
    as_json = create_manual(api, json.dumps([{"queryText": "a"}, {"queryText": "b"}]))  # type: ignore[arg-type]
    assert [q["queryText"] for q in
            direct.get(index=INDEX, id=as_json)["_source"]["querySetQueries"]] == ["a", "b"]


def test_list_sorts_and_pages_from_the_body(api: Api) -> None:
    ids = [create_manual(api, [{"queryText": f"q{i}"}]) for i in range(3)]
    listed = api.srw("GET", "/query_sets")
    assert listed.status == 200
    hits = listed.json["hits"]["hits"]
    assert listed.json["hits"]["max_score"] is None
    assert all(h["_score"] is None and len(h["sort"]) == 1 for h in hits)
    assert all(h["_id"] == h["_source"]["id"] for h in hits)
    stamps = [h["sort"][0] for h in hits]
    assert stamps == sorted(stamps, reverse=True)  # default: timestamp descending
    assert [h["_id"] for h in hits[:3]] == ids[::-1]

    two = api.srw("GET", "/query_sets", {"size": 2, "sort": {"timestamp": {"order": "asc"}}})
    asc = [h["sort"][0] for h in two.json["hits"]["hits"]]
    assert len(asc) == 2 and asc == sorted(asc)
    other = api.srw("GET", "/query_sets", {"size": 2, "sort": {"timestamp": {"order": "ASC"}}})
    desc = [h["sort"][0] for h in other.json["hits"]["hits"]]
    assert desc == sorted(desc, reverse=True)  # only the exact "asc" sorts ascending


def test_search_endpoint_takes_any_dsl(api: Api) -> None:
    name = unique("findme")
    api.srw("PUT", "/query_sets", {"name": name, "querySetQueries": [{"queryText": "x"}]})
    for method in ("GET", "POST"):
        found = api.srw(method, "/query_sets/_search", {"query": {"term": {"name": name}}})
        assert found.status == 200
        assert [h["_source"]["name"] for h in found.json["hits"]["hits"]] == [name]
    default = api.srw("GET", "/query_sets/_search")
    assert default.status == 200 and len(default.json["hits"]["hits"]) <= 10
    bad = api.srw("POST", "/query_sets/_search", {"query": {"no_such_query": {}}})
    assert bad.status == 400
    assert bad.json["error"]["type"] in ("parsing_exception", "x_content_parse_exception")


def test_get_unknown_id_is_404(api: Api) -> None:
    missing = str(uuid.uuid4())
    api.srw("GET", f"/query_sets/{missing}").error(
        404, f"Document not found: {missing}", "resource_not_found_exception")


def test_delete_answers_the_delete_response(api: Api) -> None:
    qs_id = create_manual(api, [{"queryText": "x"}])
    deleted = api.srw("DELETE", f"/query_sets/{qs_id}")
    assert deleted.status == 200
    body = deleted.json
    assert (body["_index"], body["_id"], body["result"]) == (INDEX, qs_id, "deleted")
    assert body["forced_refresh"] is True
    assert {"_version", "_shards", "_seq_no", "_primary_term"} <= set(body)
    assert api.srw("GET", f"/query_sets/{qs_id}").status == 404
    again = api.srw("DELETE", f"/query_sets/{qs_id}")
    assert again.status == 404 and again.json["result"] == "not_found"


def test_delete_is_refused_while_an_experiment_uses_the_set(api: Api,
                                                            direct: OpenSearch) -> None:
    qs_id = create_manual(api, [{"queryText": "x"}])
    experiment_ids = [str(uuid.uuid4()) for _ in range(4)]
    for exp_id in experiment_ids:
        direct.index(index=".plugins-search-relevance-experiment", id=exp_id, refresh=True,
                     body={"id": exp_id, "querySetId": qs_id, "type": "POINTWISE_EVALUATION",
                           "status": "COMPLETED", "searchConfigurationList": []})
    try:
        refused = api.srw("DELETE", f"/query_sets/{qs_id}")
        assert refused.status == 409
        reason = refused.reason
        prefix = "query set cannot be deleted as it is currently used by experiments with ids "
        assert reason.startswith(prefix)
        listed = reason.removeprefix(prefix).split(", ")
        assert len(listed) == 3 and set(listed) <= set(experiment_ids)
        assert api.srw("GET", f"/query_sets/{qs_id}").status == 200
    finally:
        for exp_id in experiment_ids:
            direct.delete(index=".plugins-search-relevance-experiment", id=exp_id, refresh=True)
    assert api.srw("DELETE", f"/query_sets/{qs_id}").status == 200


# -- bad input ----------------------------------------------------------------------------------

@pytest.mark.parametrize("body, status, reason", [
    ({"querySetQueries": [{"queryText": "x"}]}, 400, "Invalid name: Text cannot be null"),
    ({"name": "", "querySetQueries": [{"queryText": "x"}]}, 400,
     "Invalid name: Text cannot be empty"),
    ({"name": "n" * 51, "querySetQueries": [{"queryText": "x"}]}, 400,
     "Invalid name: Text exceeds maximum length of 50 characters"),
    ({"name": "a <b>", "querySetQueries": [{"queryText": "x"}]}, 400, f"Invalid name: {BAD_CHARS}"),
    ({"name": 7, "querySetQueries": [{"queryText": "x"}]}, 400, "Field 'name' must be a string"),
    ({"name": "ok", "description": "d" * 251, "querySetQueries": [{"queryText": "x"}]}, 400,
     "Invalid description: Text exceeds maximum length of 250 characters"),
    ({"name": "ok", "description": 'say "x"', "querySetQueries": [{"queryText": "x"}]}, 400,
     f"Invalid description: {BAD_CHARS}"),
    ({"name": "ok", "sampling": "topn", "querySetQueries": [{"queryText": "x"}]}, 400,
     "Support sampling as manual only. sampling: topn"),
    ({"name": "ok"}, 400, "querySetQueries is required"),
    ({"name": "ok", "querySetQueries": 5}, 400, "querySetQueries must be a list of query objects"),
    ({"name": "ok", "querySetQueries": [None]}, 400, "Query object cannot be null"),
    ({"name": "ok", "querySetQueries": [{"reference": "x"}]}, 400, "queryText is required"),
    ({"name": "ok", "querySetQueries": [{"queryText": None}]}, 400, "queryText is required"),
    ({"name": "ok", "querySetQueries": [{"queryText": ""}]}, 400,
     "Invalid queryText: Text cannot be empty"),
    ({"name": "ok", "querySetQueries": [{"queryText": "a\nb"}]}, 400,
     "Invalid queryText: Text contains reserved characters (newline is not allowed in QuerySet "
     "values)"),
    ({"name": "ok", "querySetQueries": [{"queryText": 'say "x"'}]}, 400,
     f"Invalid queryText: {BAD_CHARS}"),
    ({"name": "ok", "querySetQueries": [{"queryText": "x" * 2001}]}, 400,
     "Invalid queryText: Text exceeds maximum length of 2000 characters"),
    ({"name": "ok", "querySetQueries": [{"queryText": "x", " k": "v"}]}, 400,
     "Invalid field name ' k': Key cannot have leading or trailing whitespace"),
    ({"name": "ok", "querySetQueries": [{"queryText": "x", "k" * 51: "v"}]}, 400,
     f"Invalid field name '{'k' * 51}': Key exceeds maximum length of 50 characters"),
    ({"name": "ok", "querySetQueries": [{"queryText": "x", "": "v"}]}, 400,
     "Invalid field name '': Key cannot be empty"),
    ({"name": "ok", "querySetQueries": [{"queryText": "x", "ref": "a<b"}]}, 400,
     f"Invalid value for field 'ref': {BAD_CHARS}"),
    ({"name": "ok", "querySetQueries": [{"queryText": "x", "ref": "a\rb"}]}, 400,
     "Invalid value for field 'ref': Text contains reserved characters (newline is not allowed "
     "in QuerySet values)"),
])
def test_manual_query_set_bad_input(api: Api, direct: OpenSearch, body: dict[str, Any],
                                    status: int, reason: str) -> None:
    before = direct.count(index=INDEX)["count"]
    api.srw("PUT", "/query_sets", body).error(status, reason)
    assert direct.count(index=INDEX)["count"] == before  # nothing stored


def test_body_problems_are_400_not_500(api: Api) -> None:
    missing = api.call("PUT", "/_plugins/_search_relevance/query_sets", raw=b"")
    missing.error(400, "request body is required", "parse_exception")
    broken = api.call("PUT", "/_plugins/_search_relevance/query_sets", raw=b"{not json")
    assert broken.status == 400 and broken.json["error"]["type"] == "parse_exception"
    array = api.call("PUT", "/_plugins/_search_relevance/query_sets", raw=b"[1, 2]")
    array.error(400, "request body must be a JSON object", "parse_exception")


def test_too_many_queries_is_403(api: Api, direct: OpenSearch) -> None:
    before = direct.count(index=INDEX)["count"]
    queries = [{"queryText": f"q{i}"} for i in range(1001)]
    api.srw("PUT", "/query_sets", {"name": "big", "querySetQueries": queries}).error(
        403, "Query Set Limit Exceeded.")
    assert direct.count(index=INDEX)["count"] == before
    exactly = api.srw("PUT", "/query_sets", {"name": "max", "querySetQueries": queries[:1000]})
    assert exactly.status == 200


@pytest.mark.parametrize("body, status, reason", [
    ({"name": "s", "sampling": "weighted", "querySetSize": 5}, 400,
     "Unknown sampler type: weighted"),
    ({"name": "s", "sampling": "topn", "querySetSize": 0}, 400,
     "querySetSize must be a positive integer, got: 0"),
    ({"name": "s", "sampling": "topn", "querySetSize": -3}, 400,
     "querySetSize must be a positive integer, got: -3"),
    ({"name": "s", "sampling": "topn", "querySetSize": "10"}, 400, "querySetSize must be a number"),
    ({"name": "s", "sampling": "topn", "querySetSize": 1001}, 403, "Query Set Limit Exceeded."),
    ({"name": "s", "sampling": "topn", "ubiQueriesIndex": "no-such-ubi-index"}, 409,
     "UBI queries index does not exist"),
    ({"sampling": "topn"}, 400, "Invalid name: Text cannot be null"),
    ({"name": "n" * 2001, "sampling": "topn"}, 400,
     "Invalid name: Text exceeds maximum length of 2000 characters"),
])
def test_sampled_query_set_bad_input(api: Api, ubi_data: None, direct: OpenSearch,
                                     body: dict[str, Any], status: int, reason: str) -> None:
    before = direct.count(index=INDEX)["count"]
    api.srw("POST", "/query_sets", body).error(status, reason)
    assert direct.count(index=INDEX)["count"] == before


def test_ubi_index_without_user_query_is_409(api: Api, direct: OpenSearch,
                                             index_name: str) -> None:
    mapping = {"mappings": {"properties": {"q": {"type": "keyword"}}}}
    direct.indices.create(index=index_name, body=mapping)
    api.srw("POST", "/query_sets", {"name": "s", "sampling": "topn",
                                    "ubiQueriesIndex": index_name}).error(
        409, "UBI queries index does not exist", "search_relevance_exception")


def test_long_sampled_names_are_allowed_up_to_2000(api: Api, ubi_data: None) -> None:
    reply = api.srw("POST", "/query_sets", {"name": "n" * 60, "sampling": "topn",
                                            "querySetSize": 2})
    assert reply.status == 200


# -- sampling on the ESCI UBI data --------------------------------------------------------------

def sampled(api: Api, direct: OpenSearch, sampler: str, size: int, **extra: Any) -> list[str]:
    reply = api.srw("POST", "/query_sets", {"name": unique(sampler), "sampling": sampler,
                                            "querySetSize": size, **extra})
    assert reply.status == 200, reply.data
    source = direct.get(index=INDEX, id=reply.json["query_set_id"])["_source"]
    assert source["sampling"] == sampler
    assert all(e["customFields"] == {} for e in source["querySetQueries"])
    direct.delete(index=INDEX, id=source["id"], refresh=True)
    return [e["queryText"] for e in source["querySetQueries"]]


def test_topn_returns_the_most_frequent_queries_in_order(api: Api, ubi_data: None,
                                                         direct: OpenSearch) -> None:
    counts = ubi_query_counts()
    ranked = sorted((q for q in counts if q.strip()), key=lambda q: (-counts[q], q))
    assert ranked[:2] == ["gold", "wireless earbuds"]  # the data's known head
    assert sampled(api, direct, "topn", 20) == ranked[:20]
    assert sampled(api, direct, "topn", 1000) == ranked  # all 174 distinct queries


def test_topn_reads_the_given_ubi_index(api: Api, direct: OpenSearch, index_name: str) -> None:
    direct.indices.create(index=index_name, body={"mappings": {"properties": {
        "user_query": {"type": "keyword"}}}})
    for i, q in enumerate(["a", "b", "b", "c", "c", "c", "", "  "]):
        direct.index(index=index_name, id=str(i), body={"user_query": q})
    direct.indices.refresh(index=index_name)
    assert sampled(api, direct, "topn", 10, ubiQueriesIndex=index_name) == ["c", "b", "a"]


DRAWS = 60
SIZE = 10


def inclusion_counts(api: Api, direct: OpenSearch, sampler: str) -> Counter[str]:
    seen: Counter[str] = Counter()
    for _ in range(DRAWS):
        queries = sampled(api, direct, sampler, SIZE)
        assert len(queries) == SIZE and len(set(queries)) == SIZE  # distinct, as many as asked
        seen.update(queries)
    return seen


def test_random_sampling_is_uniform_over_distinct_queries(api: Api, ubi_data: None,
                                                          direct: OpenSearch) -> None:
    counts = ubi_query_counts()
    distinct = sorted(q for q in counts if q.strip())
    seen = inclusion_counts(api, direct, "random")
    assert set(seen) <= set(distinct)
    observed = np.array([seen[q] for q in distinct], dtype=float)
    expected = np.full(len(distinct), DRAWS * SIZE / len(distinct))
    # Uniform: the inclusion counts fit equal expectations, and do not follow frequency.
    assert scistats.chisquare(observed, expected).pvalue > 1e-4
    frequency = np.array([counts[q] for q in distinct])
    assert abs(scistats.spearmanr(frequency, observed).statistic) < 0.35
    head = [q for q in distinct if counts[q] >= sorted(frequency)[-10]]
    assert np.mean([seen[q] for q in head]) < 3 * expected[0]


def test_pptss_sampling_is_proportional_to_frequency(api: Api, ubi_data: None,
                                                     direct: OpenSearch) -> None:
    counts = ubi_query_counts()
    queries = list(counts)
    weights = np.array([counts[q] for q in queries], dtype=float)
    probabilities = weights / weights.sum()
    # Independent reference: simulate successive frequency-weighted draws without repeats.
    rng = np.random.default_rng(7)
    simulated: Counter[str] = Counter()
    runs = 4000
    for _ in range(runs):
        picked: list[str] = []
        while len(picked) < SIZE:
            q = queries[rng.choice(len(queries), p=probabilities)]
            if q not in picked:
                picked.append(q)
        simulated.update(picked)
    seen = inclusion_counts(api, direct, "pptss")
    observed = np.array([seen[q] for q in queries], dtype=float)
    expected = np.array([simulated[q] * DRAWS / runs for q in queries])
    assert scistats.pearsonr(expected, observed).statistic > 0.8
    uniform = np.full(len(queries), DRAWS * SIZE / len(queries))
    assert scistats.chisquare(observed, uniform).pvalue < 1e-10  # clearly not uniform
    # Pool the rare queries so every bin expects at least 5, then test the fit.
    order = np.argsort(-expected)
    bins_obs, bins_exp, acc_o, acc_e = [], [], 0.0, 0.0
    for i in order:
        acc_o += observed[i]
        acc_e += expected[i]
        if acc_e >= 5:
            bins_obs.append(acc_o)
            bins_exp.append(acc_e)
            acc_o = acc_e = 0.0
    bins_obs[-1] += acc_o
    bins_exp[-1] += acc_e
    scale = sum(bins_obs) / sum(bins_exp)
    assert scistats.chisquare(bins_obs, np.array(bins_exp) * scale).pvalue > 1e-4
    assert seen["gold"] > DRAWS * 0.4  # the most frequent query is in most samples
