"""Bad input answers a 4xx, as OpenSearch would, through the real server: never a 500, never a
hung worker. Where the cluster has an answer of its own (406, non-boolean flags, nesting depth) the
workbench's is compared with the one the real node gives.

Each case was a reproduction: a 1 MB value hung a worker in the log filter; JSON nested 1000 deep,
an unpaired surrogate, ``Infinity``/``1e400`` and a cron that never fires were 500s; ``text/plain``
bodies, ``pretty=maybe``, an experiment ``size`` of 10^40 and ``querySetQueries: ""`` were
accepted.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable
from typing import Any

import pytest
import urllib3
from opensearchpy import OpenSearch

from tests.support.api import SRW, Api, Reply
from tests.support.processes import Server
from workbench.schemas.request_json import MAX_DEPTH, MAX_STRING_CHARS
from workbench.telemetry.logs import MAX_MESSAGE_CHARS

MB = 1_000_000
QUERY = '{"query":{"match":{"title":"%SearchText%"}}}'
http = urllib3.PoolManager(retries=False, timeout=120)


def direct_call(opensearch_url: str, method: str, target: str, body: bytes | None = None,
                headers: dict[str, str] | None = None) -> urllib3.BaseHTTPResponse:
    """The real node's own answer, for comparison."""
    return http.request(method, opensearch_url + target, body=body, headers=headers or {})


def assert_400(reply: Reply, *fragments: str, error_type: str | None = None) -> None:
    """A 400 in OpenSearch's envelope whose reason holds every fragment (the field's name)."""
    assert reply.status == 400, (reply.status, reply.data[:300])
    error = reply.json["error"]
    assert reply.json["status"] == 400
    assert error["root_cause"] and error["type"] and error["reason"]
    for fragment in fragments:
        assert fragment in error["reason"], error["reason"]
    if error_type:
        assert error["type"] == error_type


# -- every route that reads a JSON body -----------------------------------------------------------

BODY_ROUTES = [
    ("PUT", SRW + "/query_sets"), ("POST", SRW + "/query_sets"), ("GET", SRW + "/query_sets"),
    ("POST", SRW + "/query_sets/_search"),
    ("PUT", SRW + "/search_configurations"), ("GET", SRW + "/search_configurations"),
    ("POST", SRW + "/search_configurations/_search"),
    ("PUT", SRW + "/judgments"), ("GET", SRW + "/judgments"),
    ("POST", SRW + "/judgments/_search"), ("PUT", SRW + "/judgments/some-id"),
    ("POST", SRW + "/judgments/_compare"),
    ("PUT", SRW + "/experiments"), ("GET", SRW + "/experiments"),
    ("POST", SRW + "/experiments/_search"), ("PATCH", SRW + "/experiments/some-id"),
    ("POST", SRW + "/experiments/schedule"), ("GET", SRW + "/experiments/schedule"),
    ("POST", SRW + "/_evaluate"),
    ("PUT", "/_cluster/settings"),
]
ROUTE_IDS = [f"{m} {p.removeprefix(SRW)}" for m, p in BODY_ROUTES]


@pytest.mark.parametrize(("method", "path"), BODY_ROUTES, ids=ROUTE_IDS)
def test_json_nested_a_thousand_deep_is_a_400_like_opensearchs(api: Api, opensearch_url: str,
                                                              method: str, path: str) -> None:
    deep = '{"a":' * 1000 + "1" + "}" * 1000
    reply = api.call(method, path, raw=('{"persistent":' + deep + "}").encode())
    assert reply.status == 400, reply.data[:300]
    error = reply.json["error"]
    # OpenSearch's own answer to the same body where it parses it to a map (an ingest
    # pipeline): parse_exception "Failed to parse content to map", caused by
    # stream_constraints_exception; the workbench's limit is lower than Jackson's 1000
    theirs = direct_call(opensearch_url, "PUT", "/_ingest/pipeline/test-deep-never-created",
                         ('{"description":' + deep + "}").encode(),
                         {"Content-Type": "application/json"})
    assert theirs.status == 400
    expected = json.loads(theirs.data)["error"]
    assert (error["type"], error["reason"]) == (expected["type"], expected["reason"]) == \
        ("parse_exception", "Failed to parse content to map")
    assert error["caused_by"]["type"] == expected["caused_by"]["type"] == \
        "stream_constraints_exception"
    assert error["caused_by"]["reason"] == \
        f"Document nesting depth ({MAX_DEPTH + 1}) exceeds the maximum allowed ({MAX_DEPTH})"
    assert error["root_cause"] == [error["caused_by"]]


@pytest.mark.parametrize(("method", "path"), BODY_ROUTES, ids=ROUTE_IDS)
def test_text_plain_and_no_content_type_are_406_like_opensearch(
        api: Api, opensearch_url: str, index_name: str, method: str, path: str) -> None:
    for content_type in ("text/plain", "application/x-www-form-urlencoded", None):
        headers = {"Content-Type": content_type} if content_type else {}
        ours = http.request(method, api.base + path, body=b'{"name": "x"}', headers=headers)
        theirs = direct_call(opensearch_url, "PUT", f"/{index_name}/_doc/1", b'{"name": "x"}',
                             headers)
        assert (ours.status, ours.data) == (theirs.status, theirs.data) == (406, json.dumps(
            {"error": f"Content-Type header [{content_type or ''}] is not supported",
             "status": 406}, separators=(",", ":")).encode())
        assert ours.headers["Content-Type"] == theirs.headers["Content-Type"]


def test_json_types_are_read_and_unreadable_ones_are_a_clear_406(api: Api) -> None:
    body = b'{"size": 1}'
    for content_type in ("application/json; charset=UTF-8", "application/x-ndjson",
                         "application/vnd.opensearch+json;compatible-with=7", "application/*"):
        reply = api.call("GET", SRW + "/query_sets", raw=body,
                         headers={"Content-Type": content_type})
        assert reply.status == 200, (content_type, reply.data[:200])
    for content_type in ("application/yaml", "application/cbor", "application/smile"):
        reply = api.call("GET", SRW + "/query_sets", raw=body,
                         headers={"Content-Type": content_type})
        assert reply.status == 406
        assert reply.json == {"error": f"Content-Type header [{content_type}] is not supported "
                                       "by the workbench: send the body as application/json",
                              "status": 406}
    # no body, no content type: nothing to refuse
    reply = api.call("GET", SRW + "/query_sets", headers={"Content-Type": ""})
    assert reply.status == 200


def test_the_pass_through_keeps_the_clusters_own_answers(api: Api, opensearch_url: str,
                                                         index_name: str) -> None:
    """Paths the workbench does not serve are the cluster's to judge, byte for byte."""
    for method, target, body, headers in [
        ("PUT", f"/{index_name}/_doc/1", b"{}", {"Content-Type": "text/plain"}),
        ("GET", "/_cluster/health?pretty=maybe", None, {}),
        ("POST", f"/{index_name}/_search", b'{"size": Infinity}',
         {"Content-Type": "application/json"}),
    ]:
        ours = http.request(method, api.base + target, body=body, headers=headers)
        theirs = direct_call(opensearch_url, method, target, body, headers)
        assert (ours.status, ours.data) == (theirs.status, theirs.data)


# -- flags ------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", ["pretty", "human", "error_trace"])
@pytest.mark.parametrize(("method", "path"), [
    ("GET", SRW + "/query_sets"), ("PUT", SRW + "/query_sets"), ("GET", "/_cluster/settings"),
    ("GET", SRW + "/stats"), ("GET", SRW + "/no_such_route"),
])
def test_non_boolean_flags_are_a_400_like_opensearchs(api: Api, opensearch_url: str,
                                                      direct: OpenSearch, name: str,
                                                      method: str, path: str) -> None:
    before = direct.count(index="search-relevance-queryset", ignore=[404]).get("count")
    name_value = f"flag-{uuid.uuid4().hex[:8]}"
    reply = api.call(method, path, {"name": name_value, "querySetQueries": [{"queryText": "a"}]},
                     params={name: "maybe"})
    theirs = direct_call(opensearch_url, "GET", f"/_cluster/health?{name}=maybe")
    assert reply.status == theirs.status == 400
    assert reply.json == json.loads(theirs.data) == {
        "error": {"root_cause": [{"type": "illegal_argument_exception", "reason":
                                  "Failed to parse value [maybe] as only [true] or [false] are "
                                  "allowed."}],
                  "type": "illegal_argument_exception",
                  "reason": "Failed to parse value [maybe] as only [true] or [false] are allowed."},
        "status": 400}
    # refused before the handler ran: nothing was created
    direct.indices.refresh(index="search-relevance-queryset", ignore=[404])
    assert direct.count(index="search-relevance-queryset", ignore=[404]).get("count") == before
    for good in ("true", "false", ""):
        assert api.call("GET", SRW + "/query_sets", params={name: good}).status == 200


# -- one-megabyte values --------------------------------------------------------------------------

def _big_value_cases(big: str, index: str) -> list[tuple[str, str, dict[str, Any], str]]:
    """(method, SRW path, body, field) with ``big`` in that field."""
    return [
        ("PUT", "/search_configurations", {"name": "n", "index": big, "query": QUERY}, "index"),
        ("PUT", "/search_configurations", {"name": "n", "index": index, "query": QUERY,
                                           "searchPipeline": big}, "searchPipeline"),
        ("PUT", "/experiments", {"type": "POINTWISE_EVALUATION", "size": 5, "querySetId": big,
                                 "searchConfigurationList": ["c"], "judgmentList": ["j"]},
         "querySetId"),
        ("POST", "/experiments/schedule", {"experimentId": big, "cronExpression": "0 1 * * *"},
         "experimentId"),
        ("POST", "/experiments/schedule", {"experimentId": "x",
                                           "cronExpression": "0 1 * * " + big}, "cronExpression"),
        ("PUT", "/query_sets", {"name": big, "querySetQueries": [{"queryText": "a"}]}, "name"),
        ("PUT", "/query_sets", {"name": "n", "querySetQueries": [{"queryText": "a", big: "b"}]},
         "querySetQueries[0]"),
        ("POST", "/query_sets", {"name": "n", "ubiQueriesIndex": big}, "ubiQueriesIndex"),
        ("PUT", "/judgments", {"name": "n", "type": "LLM_JUDGMENT", "modelId": big,
                               "querySetId": "q", "searchConfigurationList": ["c"]}, "modelId"),
        ("PUT", "/judgments", {"name": "n", "type": "UBI_JUDGMENT", "clickModel": "coec",
                               "maxRank": 5, "ubiEventsIndex": big}, "ubiEventsIndex"),
        ("PUT", "/judgments", {"name": "n", "type": "IMPORT_JUDGMENT", "judgmentRatings": [
            {"query": "q", "ratings": [{"docId": "d", "rating": "1" * len(big) + "x"}]}]},
         "rating"),
        ("POST", "/judgments/_compare", {"referenceJudgmentId": big, "candidateJudgmentId": "x"},
         "referenceJudgmentId"),
        ("POST", "/_evaluate", {"queryText": "q", "judge": "token_overlap",
                                "referenceAnswer": "a", "index": big,
                                "searchQuery": {"query": {"match": {"t": "%SearchText%"}}}},
         "index"),
    ]


def test_a_megabyte_in_any_field_is_a_quick_400(api: Api, server: Server, index_name: str,
                                                direct: OpenSearch) -> None:
    direct.indices.create(index=index_name)
    logged = len(server.log())
    for method, path, body, field in _big_value_cases("a" * MB, index_name):
        reply = api.srw(method, path, body)
        assert_400(reply, field, "is too long")
        assert len(reply.data) < 10_000  # the value is not echoed whole
    # the workers are still there, and nothing long was logged
    assert api.srw("GET", "/query_sets", params={"size": "1"}).status == 200
    lines = server.log()[logged:].splitlines()
    assert max((len(line) for line in lines), default=0) < MAX_MESSAGE_CHARS + 200


def test_values_just_under_the_string_limit_are_4xx_too(api: Api, server: Server,
                                                        index_name: str,
                                                        direct: OpenSearch) -> None:
    """Under the parser's limit, each field's own rule answers (ids and index names longer than
    OpenSearch allows do not exist; a cron has a length limit of its own)."""
    direct.indices.create(index=index_name)
    logged = len(server.log())
    started = time.monotonic()
    for method, path, body, _ in _big_value_cases("a" * (MAX_STRING_CHARS - 100), index_name):
        reply = api.srw(method, path, body)
        assert 400 <= reply.status < 500, (path, reply.status, reply.data[:300])
        assert len(reply.data) < 10_000
    assert time.monotonic() - started < 60  # generous; each took seconds to hours before
    lines = server.log()[logged:].splitlines()
    assert max((len(line) for line in lines), default=0) < MAX_MESSAGE_CHARS + 200


# -- strings, numbers, crons ----------------------------------------------------------------------

@pytest.mark.parametrize(("method", "path", "body", "where"), [
    ("PUT", "/query_sets", {"name": "x\ud800", "querySetQueries": [{"queryText": "a"}]},
     "[name]"),
    ("PUT", "/query_sets", {"name": "x", "sampling": "\udfff",
                            "querySetQueries": [{"queryText": "a"}]}, "[sampling]"),
    ("PUT", "/query_sets", {"name": "x", "querySetQueries": [
        {"queryText": "a"}, {"queryText": "b"}, {"queryText": "c"}, {"queryText": "d\ud800"}]},
     "[querySetQueries[3].queryText]"),
    ("PUT", "/query_sets", {"name": "x", "querySetQueries": json.dumps(
        [{"queryText": "a"}, {"queryText": "b"}, {"queryText": "c"}, {"queryText": "d\ud800"}])},
     "[querySetQueries[3].queryText]"),
    ("PUT", "/search_configurations", {"name": "x", "index": "i\ud800", "query": QUERY},
     "[index]"),
    ("PUT", "/judgments", {"name": "x", "type": "IMPORT_JUDGMENT", "judgmentRatings": [
        {"query": "q", "ratings": [{"docId": "\ud800", "rating": "1"}]}]},
     "[judgmentRatings[0].ratings[0].docId]"),
])
def test_an_unpaired_surrogate_is_a_400_naming_the_field(api: Api, method: str, path: str,
                                                         body: dict[str, Any],
                                                         where: str) -> None:
    reply = api.srw(method, path, body)
    assert_400(reply, where, "unpaired surrogate")
    reply.data.decode("utf-8")  # the answer itself is valid UTF-8


def test_an_unpaired_surrogate_in_cluster_settings(api: Api) -> None:
    reply = api.call("PUT", "/_cluster/settings", {"persistent": {
        "plugins.search_relevance.workbench_enabled": "\ud800"}})
    assert_400(reply, "[persistent.plugins.search_relevance.workbench_enabled]")


@pytest.mark.parametrize(("raw", "error_type", "reason"), [
    ('{"name": "s", "querySetSize": Infinity}', "json_parse_exception",
     "Non-standard token 'Infinity' in [querySetSize]: numbers must be finite"),
    ('{"name": "s", "querySetSize": NaN}', "json_parse_exception",
     "Non-standard token 'NaN' in [querySetSize]: numbers must be finite"),
    ('{"name": "s", "querySetSize": 1e400}', "input_coercion_exception",
     "Numeric value (1e400) out of range in [querySetSize]: numbers must be finite"),
])
def test_non_finite_query_set_size_is_a_400(api: Api, raw: str, error_type: str,
                                            reason: str) -> None:
    reply = api.srw("POST", "/query_sets", raw=raw.encode())
    reply.error(400, reason, error_type)


@pytest.mark.parametrize(("method", "path", "body", "reason"), [
    ("PUT", "/experiments", {"type": "POINTWISE_EVALUATION", "size": 10**40, "querySetId": "q"},
     f"size must be at most 10000, got: {10**40}"),
    ("PUT", "/experiments", {"type": "PAIRWISE_COMPARISON", "size": 10_001, "querySetId": "q"},
     "size must be at most 10000, got: 10001"),
    ("PUT", "/judgments", {"name": "j", "type": "LLM_JUDGMENT", "modelId": "m",
                           "size": 10**40}, f"size must be at most 10000, got: {10**40}"),
    ("PUT", "/judgments", {"name": "j", "type": "UBI_JUDGMENT", "clickModel": "coec",
                           "maxRank": 10**40}, f"maxRank must be at most 10000, got: {10**40}"),
    ("POST", "/_evaluate", {"queryText": "q", "judge": "token_overlap", "referenceAnswer": "a",
                            "k": 10**40, "hits": [{"id": "1"}]},
     f"k must be at most 10000, got: {10**40}"),
    ("GET", "/query_sets", {"size": 10**40}, f"size must be at most 10000, got: {10**40}"),
    ("GET", "/experiments", {"size": -1}, "size must be a non-negative integer, got: -1"),
])
def test_numbers_are_bounded_naming_the_field(api: Api, method: str, path: str,
                                              body: dict[str, Any], reason: str) -> None:
    api.srw(method, path, body).error(400, reason)


@pytest.mark.parametrize(("key", "value", "reason"), [
    ("query_set.maximum", 2**31, f"Failed to parse value [{2**31}] for setting "
                                 "[plugins.search_relevance.query_set.maximum]"),
    ("query_set.maximum", str(10**40), f"Failed to parse value [{10**40}] for setting "
                                       "[plugins.search_relevance.query_set.maximum]"),
    ("scheduled_experiments_timeout", "99999999999999999999d",
     "failed to parse [99999999999999999999d], fractional time values are not supported"),
    ("scheduled_experiments_timeout", "-5s",
     "failed to parse setting [plugins.search_relevance.scheduled_experiments_timeout] with value "
     "[-5s] as a time value: negative durations are not supported"),
])
def test_settings_are_bounded_as_opensearch_bounds_its_own(api: Api, opensearch_url: str,
                                                          key: str, value: Any,
                                                          reason: str) -> None:
    reply = api.call("PUT", "/_cluster/settings",
                     {"transient": {f"plugins.search_relevance.{key}": value}})
    reply.error(400, reason, "illegal_argument_exception")
    # the same words as the node's for a setting of its own of the same kind
    own = "search.max_buckets" if key == "query_set.maximum" else "search.default_search_timeout"
    theirs = direct_call(opensearch_url, "PUT", "/_cluster/settings", json.dumps(
        {"transient": {own: value}}).encode(), {"Content-Type": "application/json"})
    assert json.loads(theirs.data)["error"]["reason"] == \
        reason.replace(f"plugins.search_relevance.{key}", own)


def test_a_cron_that_never_fires_is_a_400(api: Api) -> None:
    for cron in ("0 0 30 2 *", "0 0 31 4,6,9,11 *"):
        api.srw("POST", "/experiments/schedule", {"experimentId": "x", "cronExpression": cron}
                ).error(400, f"cronExpression [{cron}] never fires: no date matches it")
    cron = "0 " + "1," * 600 + "2 * * *"
    reply = api.srw("POST", "/experiments/schedule", {"experimentId": "x", "cronExpression": cron})
    reply.error(400, f"cronExpression is too long: {len(cron)} characters, at most 1000 are "
                "allowed")


@pytest.mark.parametrize("queries", ["", "   ", "\n\n"])
def test_blank_query_set_queries_are_a_400(api: Api, queries: str,
                                           direct: OpenSearch) -> None:
    before = direct.count(index="search-relevance-queryset")["count"]
    api.srw("PUT", "/query_sets", {"name": "blank", "querySetQueries": queries}).error(
        400, "querySetQueries must hold at least one query, got an empty string")
    direct.indices.refresh(index="search-relevance-queryset")
    assert direct.count(index="search-relevance-queryset")["count"] == before


def test_nothing_here_answers_500(api: Api) -> None:
    """A last sweep over the reproductions: each route with each bad body, none a 5xx."""
    bad: list[Callable[[], Reply]] = [
        lambda: api.srw("PUT", "/query_sets", raw=b'{"name": "x", "querySetQueries": "[' +
                        b"[" * 2000 + b']"}'),
        lambda: api.srw("PUT", "/search_configurations", {
            "name": "x", "index": "i", "query": '{"query": {"match": {"t": "%SearchText%"}}, '
                                                '"x": ' + "[" * 5000 + "]" * 5000 + "}"}),
        lambda: api.srw("PUT", "/search_configurations", {
            "name": "x", "index": "i", "query": "{{" + " " * 90_000}),
        lambda: api.srw("POST", "/_evaluate", raw=b'{"queryText": "q", "judge": "token_overlap", '
                        b'"referenceAnswer": "a", "hits": [{"id": "1", "t": 1e400}]}'),
    ]
    for call in bad:
        reply = call()
        assert 400 <= reply.status < 500, reply.data[:300]
