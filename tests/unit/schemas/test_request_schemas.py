"""The request-body schemas of query sets and search configurations (issue 21): exact reasons,
field order, defaults and lenient readings, without any service. That the OpenAPI document's
request bodies name the same fields is tests/unit/api/test_openapi_request_bodies.py's."""

from __future__ import annotations

from typing import Any

import pytest

from tests.support.bodies import reason
from workbench.errors import BadRequest
from workbench.schemas.body import load
from workbench.schemas.query_sets import (
    ManualQuerySetSchema,
    QuerySetLimitExceeded,
    SampledQuerySetSchema,
)
from workbench.schemas.search_configurations import SearchConfigurationSchema

QUERY = '{"query": {"match": {"title": "%SearchText%"}}}'


def no_query_rule(query: Any) -> str | None:
    return None if isinstance(query, str) else "query is required"


# -- PUT /query_sets ---------------------------------------------------------------------------

def manual(**body: Any) -> dict[str, Any]:
    return load(ManualQuerySetSchema(maximum=3), body)


def test_manual_defaults_and_stripping() -> None:
    fields = manual(name="  n ", querySetQueries=[{"queryText": "a", "x": 1, "y": None}, "b"],
                    unknown="ignored")
    assert fields == {"name": "n", "description": "", "sampling": "manual",
                      "querySetQueries": [{"queryText": "a", "customFields": {"x": "1"}},
                                          {"queryText": "b", "customFields": {}}]}


def test_manual_queries_as_one_string() -> None:
    text = 'first\n\n{"queryText": "second", "referenceAnswer": "r"}\n'
    assert manual(name="n", querySetQueries=text)["querySetQueries"] == [
        {"queryText": "first", "customFields": {}},
        {"queryText": "second", "customFields": {"referenceAnswer": "r"}}]
    assert manual(name="n", querySetQueries='["a"]')["querySetQueries"] == [
        {"queryText": "a", "customFields": {}}]


@pytest.mark.parametrize(("body", "expected"), [
    ({}, "Invalid name: Text cannot be null"),
    ({"name": 7}, "Field 'name' must be a string"),
    ({"name": ""}, "Invalid name: Text cannot be empty"),
    ({"name": "n" * 51}, "Invalid name: Text exceeds maximum length of 50 characters"),
    ({"name": 'a"b'}, "Invalid name: Text contains invalid characters (quotes, backslashes, "
                      "or HTML tags are not allowed)"),
    ({"name": "n", "description": 3}, "Field 'description' must be a string"),
    ({"name": "n", "description": "d" * 251},
     "Invalid description: Text exceeds maximum length of 250 characters"),
    ({"name": "n", "sampling": "topn"}, "Support sampling as manual only. sampling: topn"),
    ({"name": "n", "sampling": None}, "Support sampling as manual only. sampling: None"),
    ({"name": "n"}, "querySetQueries is required"),
    ({"name": "n", "querySetQueries": "  "},
     "querySetQueries must hold at least one query, got an empty string"),
    ({"name": "n", "querySetQueries": "[1,"}, "querySetQueries is not a valid JSON array"),
    ({"name": "n", "querySetQueries": "a\n{x"}, "querySetQueries line 2 is not valid JSON"),
    ({"name": "n", "querySetQueries": 5}, "querySetQueries must be a list of query objects"),
    ({"name": "n", "querySetQueries": [None]}, "Query object cannot be null"),
    ({"name": "n", "querySetQueries": [1]}, "Query object must be a JSON object with queryText"),
    ({"name": "n", "querySetQueries": [{}]}, "queryText is required"),
    ({"name": "n", "querySetQueries": [{"queryText": "a\nb"}]},
     "Invalid queryText: Text contains reserved characters (newline is not allowed in QuerySet "
     "values)"),
    ({"name": "n", "querySetQueries": [{"queryText": "a", " k": "v"}]},
     "Invalid field name ' k': Key cannot have leading or trailing whitespace"),
    ({"name": "n", "querySetQueries": [{"queryText": "a", "k": "<b>"}]},
     "Invalid value for field 'k': Text contains invalid characters (quotes, backslashes, or "
     "HTML tags are not allowed)"),
    # the first field in order wins, as when the fields were checked one by one
    ({"name": None, "description": 3, "sampling": "x"}, "Invalid name: Text cannot be null"),
    ({"name": "n", "description": 3, "sampling": "x"}, "Field 'description' must be a string"),
    ({"name": None, "querySetQueries": ["a"] * 4}, "Invalid name: Text cannot be null"),
])
def test_manual_reasons(body: dict[str, Any], expected: str) -> None:
    assert reason(ManualQuerySetSchema(maximum=3), body) == expected


def test_manual_limit_is_checked_before_the_queries() -> None:
    with pytest.raises(QuerySetLimitExceeded) as caught:
        manual(name="n", querySetQueries=[None] * 4)
    assert (caught.value.status, caught.value.reason) == (403, "Query Set Limit Exceeded.")
    assert len(manual(name="n", querySetQueries=["a"] * 3)["querySetQueries"]) == 3


# -- POST /query_sets --------------------------------------------------------------------------

def sampled(**body: Any) -> dict[str, Any]:
    return load(SampledQuerySetSchema(maximum=100), body)


def test_sampled_defaults() -> None:
    assert sampled(name="n" * 60) == {"name": "n" * 60, "description": "", "querySetSize": 10,
                                      "ubiQueriesIndex": "ubi_queries", "sampling": "pptss"}
    assert sampled(name="n", querySetSize=2.9, ubiQueriesIndex="", sampling="topn")[
        "querySetSize"] == 2
    assert sampled(name="n", ubiQueriesIndex=None)["ubiQueriesIndex"] == "ubi_queries"
    assert sampled(name="n", ubiQueriesIndex="mine")["ubiQueriesIndex"] == "mine"


@pytest.mark.parametrize(("body", "expected"), [
    ({}, "Invalid name: Text cannot be null"),
    ({"name": "n" * 2001}, "Invalid name: Text exceeds maximum length of 2000 characters"),
    ({"name": "n", "querySetSize": "10"}, "querySetSize must be a number"),
    ({"name": "n", "querySetSize": None}, "querySetSize must be a number"),
    ({"name": "n", "querySetSize": True}, "querySetSize must be a number"),
    ({"name": "n", "querySetSize": 0}, "querySetSize must be a positive integer, got: 0"),
    ({"name": "n", "querySetSize": 0.5}, "querySetSize must be a positive integer, got: 0.5"),
    ({"name": "n", "ubiQueriesIndex": 3}, "Field 'ubiQueriesIndex' must be a string"),
    ({"name": "n", "sampling": "weighted"}, "Unknown sampler type: weighted"),
    ({"name": "n", "sampling": None}, "Unknown sampler type: None"),
    ({"name": "n", "ubiQueriesIndex": 3, "sampling": "x"},
     "Field 'ubiQueriesIndex' must be a string"),
])
def test_sampled_reasons(body: dict[str, Any], expected: str) -> None:
    assert reason(SampledQuerySetSchema(maximum=100), body) == expected


def test_sampled_limit_comes_after_the_size_rules_and_before_the_index() -> None:
    with pytest.raises(QuerySetLimitExceeded):
        sampled(name="n", querySetSize=101, ubiQueriesIndex=3, sampling="x")
    assert reason(SampledQuerySetSchema(maximum=100),
                  {"name": None, "querySetSize": 101}) == "Invalid name: Text cannot be null"


# -- PUT /search_configurations ----------------------------------------------------------------

def configuration(query_check: Any = no_query_rule, **body: Any) -> dict[str, Any]:
    return load(SearchConfigurationSchema(query_check=query_check), body)


def test_configuration_fields_stripped_and_defaulted() -> None:
    fields = configuration(name=" c ", index=" products ", query=f" {QUERY} ", extra=1)
    assert fields == {"name": "c", "description": "", "index": "products", "query": QUERY,
                      "searchPipeline": ""}
    assert configuration(name="c", index="i", query=QUERY, searchPipeline=" p ",
                         description=" d ")["searchPipeline"] == "p"


@pytest.mark.parametrize(("body", "expected"), [
    ({"index": "i", "query": QUERY}, "Invalid name: Text cannot be null"),
    ({"name": "c", "description": "d" * 251, "index": "i", "query": QUERY},
     "Invalid description: Text exceeds maximum length of 250 characters"),
    ({"name": "c", "query": QUERY}, "index is required"),
    ({"name": "c", "index": "  ", "query": QUERY}, "index is required"),
    ({"name": "c", "index": 12, "query": QUERY}, "Field 'index' must be a string"),
    ({"name": "c", "index": "i"}, "query is required"),
    ({"name": "c", "index": "i", "query": QUERY, "searchPipeline": 3},
     "Field 'searchPipeline' must be a string"),
    ({"name": "c", "index": "i", "searchPipeline": 3}, "query is required"),
])
def test_configuration_reasons(body: dict[str, Any], expected: str) -> None:
    assert reason(SearchConfigurationSchema(query_check=no_query_rule), body) == expected


def test_configuration_query_rule_is_the_one_given_and_its_errors_keep_their_order() -> None:
    def refusing(query: Any) -> str | None:
        raise BadRequest("too deep [query]")

    with pytest.raises(BadRequest, match=r"too deep \[query\]"):
        configuration(refusing, name="c", index="i", query=QUERY)
    # an earlier field's error still wins over an exception raised by a later field
    assert reason(SearchConfigurationSchema(query_check=refusing),
                  {"name": "c", "query": QUERY}) == "index is required"
