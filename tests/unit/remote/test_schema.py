"""The bodies of remote search configurations and of execute (workbench/schemas/
remote_search.py): defaults, the first bad field's exact 400, unknown fields, the password's
three states; the route's rules are stand-ins that record what they were asked."""

from __future__ import annotations

from typing import Any

import pytest

from workbench.errors import BadRequest
from workbench.remote import mapping, templates
from workbench.schemas.body import load
from workbench.schemas.remote_search import (
    RemoteExecuteSchema,
    RemoteRules,
    RemoteSearchConfigurationSchema,
)

BASE = {"name": "staging", "connectionUrl": "http://staging:9200/p/_search",
        "queryTemplate": '{"query": {"match": {"title": "%SearchText%"}}}'}


def rules(asked: list[str] | None = None, url_error: str | None = None,
          password_error: str | None = None) -> RemoteRules:
    def connection_url(url: str) -> str | None:
        if asked is not None:
            asked.append(url)
        return url_error

    return RemoteRules(connection_url=connection_url, password=lambda _: password_error,
                       query_template=templates.check, response_template=mapping.normalise)


def loaded(body: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
    return load(RemoteSearchConfigurationSchema(rules(**kwargs)), body)


def reason(body: dict[str, Any], **kwargs: Any) -> str:
    with pytest.raises(BadRequest) as caught:
        loaded(body, **kwargs)
    assert caught.value.status == 400
    return caught.value.reason


def test_defaults() -> None:
    assert loaded(BASE) == {
        "name": "staging", "description": "", "connectionUrl": "http://staging:9200/p/_search",
        "username": None, "queryTemplate": BASE["queryTemplate"],
        "responseTemplate": "opensearch", "maxRequestsPerSecond": 10.0,
        "maxConcurrentRequests": 5, "cacheDurationMinutes": 60, "refreshCache": False,
        "metadata": {}}


def test_every_field_given() -> None:
    body = {**BASE, "description": "d", "username": "u", "password": "p",
            "queryTemplate": {"query": {"match": {"title": "${queryText}"}}},
            "responseTemplate": '{"preset": "solr", "score": "$.s"}',
            "maxRequestsPerSecond": 0.5, "maxConcurrentRequests": 64,
            "cacheDurationMinutes": 0, "refreshCache": True, "metadata": {"team": "x"}}
    out = loaded(body)
    assert out["queryTemplate"] == '{"query": {"match": {"title": "${queryText}"}}}'
    assert out["responseTemplate"] == {"preset": "solr", "score": "$.s"}
    assert (out["password"], out["maxRequestsPerSecond"], out["cacheDurationMinutes"],
            out["refreshCache"], out["metadata"]) == ("p", 0.5, 0, True, {"team": "x"})


def test_the_password_absent_null_or_empty() -> None:
    assert "password" not in loaded(BASE)
    assert loaded({**BASE, "password": None})["password"] is None
    assert loaded({**BASE, "password": ""})["password"] is None
    assert reason({**BASE, "password": "p"}, password_error="password cannot be stored: x") \
        == "password cannot be stored: x"
    assert loaded({**BASE, "password": None}, password_error="never asked")["password"] is None


@pytest.mark.parametrize(("change", "expected"), [
    ({"extra": 1}, "extra is not a field of a remote search configuration; allowed: [name, "
                   "description, connectionUrl, username, password, queryTemplate, "
                   "responseTemplate, maxRequestsPerSecond, maxConcurrentRequests, "
                   "cacheDurationMinutes, refreshCache, metadata]"),
    ({"connectionUrl": None}, "connectionUrl is required: the full search URL, such as "
                              "http://host:9200/products/_search"),
    ({"connectionUrl": "ftp://h/x"}, "connectionUrl must be an http or https URL with a host, "
                                     "got: ftp://h/x"),
    ({"connectionUrl": "http:///x"}, "connectionUrl must be an http or https URL with a host, "
                                     "got: http:///x"),
    ({"connectionUrl": "http://h:port/x"}, "connectionUrl must be an http or https URL with a "
                                           "host, got: http://h:port/x"),
    ({"connectionUrl": 5}, "connectionUrl must be a non-empty string"),
    ({"username": "a:b"}, "username must be a string of at most 256 characters without ':'"),
    ({"queryTemplate": None}, "queryTemplate is required: the search body (a JSON object) or "
                              "query string, with %SearchText% where the query text goes"),
    ({"queryTemplate": '{"query": {"match_all": {}}}'}, templates.MISSING_PLACEHOLDER),
    ({"queryTemplate": 7}, "queryTemplate must be a non-empty string or a JSON object"),
    ({"responseTemplate": "vespa"}, "responseTemplate: unknown preset [vespa]; one of "
                                    "opensearch, elasticsearch, solr"),
    ({"maxRequestsPerSecond": 0}, "maxRequestsPerSecond must be a number from 0.1 to 1000, "
                                  "got: 0"),
    ({"maxRequestsPerSecond": "5"}, 'maxRequestsPerSecond must be a number from 0.1 to 1000, '
                                    'got: "5"'),
    ({"maxConcurrentRequests": 65}, "maxConcurrentRequests must be an integer from 1 to 64, "
                                    "got: 65"),
    ({"maxConcurrentRequests": 2.5}, "maxConcurrentRequests must be an integer from 1 to 64, "
                                     "got: 2.5"),
    ({"cacheDurationMinutes": -1}, "cacheDurationMinutes must be an integer from 0 to 10080, "
                                   "got: -1"),
    ({"refreshCache": "yes"}, 'refreshCache must be true or false, got: "yes"'),
    ({"metadata": []}, "metadata must be an object"),
])
def test_the_first_bad_field_is_the_400(change: dict[str, Any], expected: str) -> None:
    assert reason({**BASE, **change}) == expected


def test_fields_are_checked_in_order_and_the_policy_only_for_a_good_url() -> None:
    asked: list[str] = []
    assert reason({**BASE, "extra": 1, "name": ""}, asked=asked).startswith("extra is not")
    assert reason({"connectionUrl": "x"}, asked=asked) == "Invalid name: Text cannot be null"
    assert asked == []
    assert reason(BASE, asked=asked, url_error="connectionUrl is refused") == \
        "connectionUrl is refused"
    assert asked == ["http://staging:9200/p/_search"]


def test_execute_bodies() -> None:
    assert load(RemoteExecuteSchema(), {"remoteConfigId": " r1 ", "queryText": "shoe"}) == \
        {"remoteConfigId": "r1", "queryText": "shoe", "size": 10, "query": None}
    assert load(RemoteExecuteSchema(), {"remoteConfigId": "r", "queryText": "s", "size": 100,
                                        "query": {"q": 1}})["query"] == {"q": 1}
    for body, expected in [
        ({"queryText": "s"}, "remoteConfigId is required: the id of a remote search "
                             "configuration"),
        ({"remoteConfigId": "r"}, "queryText is required: a non-empty string"),
        ({"remoteConfigId": "r", "queryText": "s", "size": 0},
         "size must be an integer from 1 to 100, got: 0"),
        ({"remoteConfigId": "r", "queryText": "s", "query": 3},
         "query must be a non-empty string or a JSON object"),
        ({"remoteConfigId": "r", "queryText": "s", "index": "x"},
         "index is not a field of a remote search execute body; allowed: [remoteConfigId, "
         "queryText, size, query]"),
    ]:
        with pytest.raises(BadRequest) as caught:
            load(RemoteExecuteSchema(), body)
        assert caught.value.reason == expected
