"""The ``_evaluate`` request-body schemas in both shapes and the batch body (issue 21): exact
reasons (those the integration tests pin over HTTP), the order fields are checked in, and the
defaults, without any service."""

from __future__ import annotations

from typing import Any

import pytest

from tests.support.bodies import reason
from workbench.errors import BadRequest
from workbench.schemas.body import load
from workbench.schemas.evaluate import BatchSchema, entry_body
from workbench.schemas.evaluate_brief import BriefEvaluateSchema
from workbench.schemas.evaluate_workbench import Source, WorkbenchEvaluateSchema

MODEL = "test-judge"


def no_query_rule(query: str, field: str) -> str | None:
    return None


def refuse_query(query: str, field: str) -> str | None:
    return f"query is not valid JSON: {field}"


# -- the workbench's shape ---------------------------------------------------------------------

def workbench(**change: Any) -> dict[str, Any]:
    body = {"queryText": "red shoes", "hits": [{"id": "r1", "title": "red shoes"}],
            "judge": "llm", "modelId": MODEL, **change}
    return {k: v for k, v in body.items() if v is not None}


def workbench_reason(body: dict[str, Any], query_check: Any = no_query_rule) -> str:
    return reason(WorkbenchEvaluateSchema(query_check=query_check), body)


def test_workbench_defaults() -> None:
    fields = load(WorkbenchEvaluateSchema(query_check=no_query_rule),
                  {"query": "red shoes", "hits": [{"_id": 7, "_source": {"title": "t"}},
                                                  {"id": "b", "title": "u", "x": 1}],
                   "threshold": 0.3, "judgeOptions": {"threshold": 0.5}, "unknown": 1})
    assert fields == {
        "queryText": "red shoes", "referenceAnswer": (), "k": 10, "judge": "llm", "debug": False,
        "shown": None, "expectedIds": None, "expectedRelevant": None,
        "judgeOptions": ({"threshold": 0.5}, frozenset()), "contextSufficiency": False,
        "source": Source(hits=[("7", {"title": "t"}), ("b", {"title": "u", "x": 1})])}


def test_workbench_reads_what_is_given() -> None:
    fields = load(WorkbenchEvaluateSchema(query_check=no_query_rule), workbench(
        referenceAnswer=["a", " ", "b"], k=3, judge=None, debug=True, fields=["title"],
        expectedIds=["d1", 2, "d1"], expectedRelevant=4, contextSufficiency=True,
        hits=[{"id": "r1", "title": "t", "body": "b"}]))
    assert fields["referenceAnswer"] == ("a", "b") and fields["k"] == 3
    assert fields["judge"] == "llm"  # a null judge is left out by workbench(): absent
    assert fields["debug"] is True and fields["shown"] == ["title"]
    assert fields["expectedIds"] == ["d1", "2"] and fields["expectedRelevant"] == 4
    assert fields["judgeOptions"] == ({"modelId": MODEL}, frozenset({"modelId"}))
    assert fields["contextSufficiency"] is True
    assert fields["source"] == Source(hits=[("r1", {"title": "t"})])
    explicit_null = load(WorkbenchEvaluateSchema(query_check=no_query_rule),
                         {**workbench(), "judge": None})
    assert explicit_null["judge"] is None


def test_workbench_sources() -> None:
    schema = WorkbenchEvaluateSchema(query_check=no_query_rule)
    body = workbench(hits=None)
    assert load(schema, {**body, "searchConfigurationId": "c1", "index": 3})["source"] == \
        Source(config_id="c1")
    search = {"query": {"match": {"t": "%SearchText%"}}}
    assert load(schema, {**body, "index": "products", "searchQuery": search})["source"] == \
        Source(config={"index": "products", "query": '{"query": {"match": {"t": "%SearchText%"}}}',
                       "searchPipeline": ""})
    assert workbench_reason({**body, "index": "products", "searchQuery": "{"},
                            refuse_query) == "searchQuery: query is not valid JSON: searchQuery"


@pytest.mark.parametrize("change, expected", [
    ({"judge": "oracle", "k": 0}, "k must be a positive integer, got: 0"),
    ({"k": 10**40}, f"k must be at most 10000, got: {10**40}"),
    ({"k": None, "debug": "yes"}, "debug must be true or false"),
    ({"hits": [{"title": "no id"}]}, "hits[0] has no id"),
    ({"hits": [{"id": " "}]}, "hits[0] has no id"),
    ({"hits": ["x"]}, "hits[0] must be an object"),
    ({"hits": []}, 'hits must be a non-empty list of {"id": ..., "<field>": ...}'),
    ({"hits": None, "index": None}, "give hits, a searchConfigurationId, or an index and a "
                                    "searchQuery"),
    ({"hits": None, "index": "i"}, "give hits, a searchConfigurationId, or an index and a "
                                   "searchQuery"),
    ({"hits": None, "searchConfigurationId": 3}, "Field 'searchConfigurationId' must be a string"),
    ({"hits": None, "index": ["i"]}, "Field 'index' must be a string"),
    ({"queryText": ""}, "queryText is required"),
    ({"queryText": "  ", "k": 0}, "queryText is required"),
    ({"queryText": 3}, "Field 'queryText' must be a string"),
    ({"queryText": None, "query": 3}, "Field 'query' must be a string"),
    ({"referenceAnswer": [], "k": 0}, "referenceAnswer must be a string or a non-empty list of "
                                      "strings"),
    ({"fields": "title"}, "fields must be a non-empty list of field names"),
    ({"expectedIds": []}, "expectedIds must be a non-empty list of at most 100000 document ids "
                          "(non-blank strings or integers)"),
    ({"expectedIds": "d2"}, "expectedIds must be a non-empty list of at most 100000 document ids "
                            "(non-blank strings or integers)"),
    ({"expectedIds": [True]}, "expectedIds must be a non-empty list of at most 100000 document "
                              "ids (non-blank strings or integers)"),
    ({"expectedRelevant": 0}, "expectedRelevant must be a positive integer, got: 0"),
    ({"expectedRelevant": "3"}, "expectedRelevant must be a positive integer, got: 3"),
    ({"expectedIds": ["a", "b"], "expectedRelevant": 1, "judgeOptions": []},
     "expectedRelevant (1) is less than the number of expectedIds (2)"),
    ({"judgeOptions": [], "contextSufficiency": "yes"}, "judgeOptions must be an object"),
    ({"contextSufficiency": "yes"}, "contextSufficiency must be true or false"),
    ({"contextSufficiency": True, "modelId": None, "referenceAnswer": "r"},
     "contextSufficiency needs a modelId (the model that judges it)"),
    ({"contextSufficiency": True, "referenceAnswer": " "},
     "contextSufficiency needs a referenceAnswer (what the results must hold)"),
    ({"contextSufficiency": True, "hits": []},
     "contextSufficiency needs a referenceAnswer (what the results must hold)"),
])
def test_workbench_bad_bodies(change: dict[str, Any], expected: str) -> None:
    assert workbench_reason(workbench(**change)) == expected


# -- the retrieval-evaluation API's shape ------------------------------------------------------

def brief(**change: Any) -> dict[str, Any]:
    body = {"query": {"inputs": {"text": "red shoes"}}, "eval": {"fields": ["text"]},
            "hits": [{"id": "a", "text": "red shoes"}, {"id": "b", "text": "hat"}],
            "modelId": MODEL, **change}
    return {k: v for k, v in body.items() if v is not None}


def test_brief_defaults() -> None:
    fields = load(BriefEvaluateSchema(), brief(eval=None, debug=True))
    assert fields == {
        "query": "red shoes", "eval": {"fields": ["text"], "debug": True},
        "hits": [("a", {"text": "red shoes"}), ("b", {"text": "hat"})], "k": 2, "judge": "llm",
        "judgeOptions": ({"modelId": MODEL, "scale": "1-4"}, frozenset({"modelId"})),
        "referenceAnswer": ()}
    other = load(BriefEvaluateSchema(), brief(modelId=None, judge="token_overlap", k=1,
                                              judgeOptions={"scale": "0-3"},
                                              referenceAnswer="r"))
    assert other["k"] == 1 and other["judge"] == "token_overlap"
    assert other["judgeOptions"] == ({"scale": "0-3"}, frozenset())
    assert other["referenceAnswer"] == ("r",)


@pytest.mark.parametrize("change, expected", [
    ({"query": {}}, "query.inputs.text is required"),
    ({"query": {"inputs": {"text": "  "}}}, "query.inputs.text is required"),
    ({"query": {"inputs": "red"}}, 'query.inputs must be an object: {"text": "..."}'),
    ({"query": {"inputs": {"text": 3}}}, "query.inputs.text must be a string"),
    ({"query": {"inputs": {}}, "eval": []}, "query.inputs.text is required"),
    ({"eval": {"fields": []}}, "eval.fields must be a non-empty list of field names"),
    ({"eval": {"fields": "text"}}, "eval.fields must be a non-empty list of field names"),
    ({"eval": {"debug": "yes"}}, "eval.debug must be true or false"),
    ({"eval": []}, 'eval must be an object: {"fields": [...], "debug": false}'),
    ({"debug": 1, "hits": None}, "debug must be true or false"),
    ({"hits": None}, "hits is required: this request shape judges the hits it is given"),
    ({"hits": [{"id": "a", "text": "x"}, {"id": "b", "text": "y"}, {"text": "z"}]},
     "hits[2] has no id"),
    ({"hits": [{"id": "a", "title": "x"}]}, "hits[0] has none of the fields in eval.fields "
                                            "(text)"),
    ({"hits": [{"id": "a", "title": "x"}], "k": 0},
     "hits[0] has none of the fields in eval.fields (text)"),
    ({"modelId": None}, "modelId is required: this request shape names no model, so give the "
                        "workbench's modelId (a registered model or an ML Commons model id)"),
    ({"modelId": None, "judgeOptions": {"modelId": " "}},
     "modelId is required: this request shape names no model, so give the workbench's modelId "
     "(a registered model or an ML Commons model id)"),
    ({"k": 0, "modelId": None}, "k must be a positive integer, got: 0"),
    ({"judgeOptions": "x", "referenceAnswer": 3}, "judgeOptions must be an object"),
    ({"referenceAnswer": 3}, "referenceAnswer must be a string or a non-empty list of strings"),
])
def test_brief_bad_bodies(change: dict[str, Any], expected: str) -> None:
    assert reason(BriefEvaluateSchema(), brief(**change)) == expected


# -- the batch ---------------------------------------------------------------------------------

ENTRY = {"queryText": "x", "hits": [{"id": "1", "t": "x"}]}


def test_batch_keeps_the_shared_settings_given() -> None:
    fields = load(BatchSchema(), {"queries": [ENTRY, 3], "modelId": MODEL, "k": 5,
                                  "judge": None, "fields": ["t"], "judgeOptions": {"scale": "1-4"}})
    assert fields == {"queries": [ENTRY, 3], "modelId": MODEL, "k": 5, "fields": ["t"],
                      "judgeOptions": {"scale": "1-4"}}
    assert load(BatchSchema(), {"queries": [ENTRY], "modelId": None}) == {"queries": [ENTRY]}


@pytest.mark.parametrize("body, expected", [
    ({"queries": []}, "queries must be a non-empty list of evaluations (each an _evaluate body, "
                      "in either shape)"),
    ({"queries": {"a": 1}, "size": 3}, "queries must be a non-empty list of evaluations (each "
                                       "an _evaluate body, in either shape)"),
    ({"queries": [ENTRY], "size": 3, "modelId": 3},
     "Unknown field [size] of a batch: give queries and the shared settings judge, modelId, k, "
     "fields, judgeOptions"),
    ({"queries": [ENTRY], "modelId": 3}, "Field 'modelId' must be a string"),
    ({"queries": [ENTRY], "fields": [], "judgeOptions": 1},
     "fields must be a non-empty list of field names"),
    ({"queries": [ENTRY], "judgeOptions": 1, "modelId": 3}, "judgeOptions must be an object"),
])
def test_batch_bad_bodies(body: dict[str, Any], expected: str) -> None:
    assert reason(BatchSchema(), body) == expected


def test_a_batch_entry_is_an_object() -> None:
    assert entry_body(0, ENTRY) is ENTRY
    with pytest.raises(BadRequest) as caught:
        entry_body(1, 3)
    assert caught.value.reason == "queries[1] must be an object (an _evaluate body)"
