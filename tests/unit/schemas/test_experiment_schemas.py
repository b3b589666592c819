"""The request-body schemas of experiments (issue 21): the exact 400 reasons the integration
tests pin (test_experiments.py, test_bad_input.py, test_lenient_creates.py), their order, the
reads asked of the cluster (none after the first error), and the hybrid search body's rule."""

from __future__ import annotations

from typing import Any

import pytest
from marshmallow import Schema

from workbench.errors import BadRequest
from workbench.schemas.body import load
from workbench.schemas.experiments import (
    ExperimentPatchSchema,
    ExperimentSchema,
    HybridExperimentSchema,
    HybridSearchSchema,
    Lookups,
    PairwiseExperimentSchema,
    PointwiseExperimentSchema,
    experiment_schema,
)

# what the create reads of a query set: its status, absent for a manual or sampled set
QUERY_SETS: dict[str, dict[str, Any]] = {"qs": {}, "empty": {}, "done": {"status": "COMPLETED"},
                                         "making": {"status": "PROCESSING"},
                                         "failed": {"status": "ERROR"}}
CONFIGS = {"c1", "c2", "c3"}
JUDGMENTS = {"j1": "COMPLETED", "j2": "PROCESSING", "bad": "ERROR"}


class Cluster:
    """The reads a body's ids need, recorded."""

    def __init__(self) -> None:
        self.asked: list[tuple[str, str]] = []

    def lookups(self) -> Lookups:
        def query_set(entity_id: str) -> dict[str, Any] | None:
            self.asked.append(("query_set", entity_id))
            return QUERY_SETS.get(entity_id)

        def configuration(entity_id: str) -> dict[str, Any] | None:
            self.asked.append(("search_configuration", entity_id))
            return {"index": "i"} if entity_id in CONFIGS else None

        def judgment(entity_id: str) -> dict[str, Any] | None:
            self.asked.append(("judgment", entity_id))
            status = JUDGMENTS.get(entity_id)
            return None if status is None else {"status": status}

        return Lookups(query_set, configuration, judgment)


def pointwise(**change: Any) -> dict[str, Any]:
    body = {"type": "POINTWISE_EVALUATION", "querySetId": "qs", "searchConfigurationList": ["c1"],
            "judgmentList": ["j1"], "size": 5, **change}
    return {k: v for k, v in body.items() if v is not None}


def create(body: dict[str, Any], cluster: Cluster | None = None) -> dict[str, Any]:
    return load(experiment_schema(body, (cluster or Cluster()).lookups()), body)


def reason(body: dict[str, Any], cluster: Cluster | None = None) -> str:
    with pytest.raises(BadRequest) as caught:
        create(body, cluster)
    assert type(caught.value) is BadRequest
    assert (caught.value.status, caught.value.error_type) == (400, "illegal_argument_exception")
    return caught.value.reason


# -- PUT /experiments ---------------------------------------------------------------------------

@pytest.mark.parametrize(("body", "schema"), [
    ({"type": "PAIRWISE_COMPARISON"}, PairwiseExperimentSchema),
    ({"type": "POINTWISE_EVALUATION"}, PointwiseExperimentSchema),
    ({"type": "HYBRID_OPTIMIZER"}, HybridExperimentSchema),
    ({"type": "LLM_EVALUATION"}, ExperimentSchema),
    ({"type": ["POINTWISE_EVALUATION"]}, ExperimentSchema),
    ({}, ExperimentSchema),
])
def test_the_type_picks_the_schema(body: dict[str, Any], schema: type[Schema]) -> None:
    assert type(experiment_schema(body, Cluster().lookups())) is schema


def test_a_valid_body_loads_trimmed_with_blank_texts_absent() -> None:
    fields = create(pointwise(name="  named  ", description="   ", unknown="ignored"))
    assert fields == {"type": "POINTWISE_EVALUATION", "name": "named", "description": None,
                      "size": 5, "querySetId": "qs", "searchConfigurationList": ["c1"],
                      "judgmentList": ["j1"]}
    pairwise = create({"type": "PAIRWISE_COMPARISON", "querySetId": "qs", "size": 3,
                       "searchConfigurationList": ["c1", "c2"]})
    assert (pairwise["name"], pairwise["judgmentList"]) == (None, [])


def test_a_query_set_with_no_queries_is_accepted() -> None:
    """As by the plugin (a set sampled from an empty UBI index): the experiment completes with
    no results (test_experiments.py, test_an_experiment_on_a_query_set_with_no_queries_...)."""
    assert create(pointwise(querySetId="empty"))["querySetId"] == "empty"


def test_a_judgment_still_being_generated_is_accepted() -> None:
    assert create(pointwise(judgmentList=["j2"]))["judgmentList"] == ["j2"]


@pytest.mark.parametrize(("change", "expected"), [
    # tests/integration/test_experiments.py::test_bad_input
    ({"type": None}, "Invalid or missing experiment type"),
    ({"type": "LLM_EVALUATION"}, "Invalid or missing experiment type"),
    ({"querySetId": "nope"}, "QuerySet [nope] does not exist"),
    ({"querySetId": "making"}, "QuerySet [making] is still being generated (status "
                               "PROCESSING); run the experiment once it is COMPLETED"),
    ({"querySetId": "failed"}, "QuerySet [failed] has no queries to run: its generation "
                               "ended ERROR"),
    ({"searchConfigurationList": ["nope"]}, "SearchConfiguration [nope] does not exist"),
    ({"judgmentList": ["nope"]}, "Judgment [nope] does not exist"),
    ({"judgmentList": []}, "judgmentList is required for POINTWISE_EVALUATION"),
    ({"size": None}, "size is required"),
    ({"size": 0}, "size must be a positive integer, got: 0"),
    ({"name": 7}, "Field 'name' must be a string"),
    ({"name": "n" * 51}, "Invalid name: Text exceeds maximum length of 50 characters"),
    ({"description": "d" * 251},
     "Invalid description: Text exceeds maximum length of 250 characters"),
    # test_lenient_creates.py: a judgment that ended ERROR
    ({"judgmentList": ["bad"]}, "Judgment [bad] is not COMPLETED (status: ERROR)"),
    # test_bad_input.py::test_numbers_are_bounded_naming_the_field
    ({"size": 10**40}, f"size must be at most 10000, got: {10**40}"),
    ({"size": True}, "size must be a positive integer, got: True"),
    ({"querySetId": "  "}, "QuerySet ID cannot be null or empty"),
    ({"querySetId": None}, "QuerySet ID cannot be null or empty"),
    ({"searchConfigurationList": "c1"}, "searchConfigurationList must be a list of ids"),
    ({"searchConfigurationList": [""]}, "SearchConfiguration ID cannot be null or empty"),
    ({"searchConfigurationList": []},
     "searchConfigurationList must name at least one search configuration"),
    ({"searchConfigurationList": None},
     "searchConfigurationList must name at least one search configuration"),
    ({"judgmentList": "j1"}, "judgmentList must be a list of ids"),
    ({"judgmentList": [3]}, "Judgment ID cannot be null or empty"),
    ({"description": ["d"]}, "Field 'description' must be a string"),
    ({"name": 'a"b'}, "Invalid name: Text contains invalid characters (quotes, backslashes, "
                      "or HTML tags are not allowed)"),
])
def test_pointwise_reasons(change: dict[str, Any], expected: str) -> None:
    assert reason(pointwise(**change)) == expected


def test_pairwise_compares_exactly_two_configurations() -> None:
    body = {"type": "PAIRWISE_COMPARISON", "querySetId": "qs", "size": 3}
    assert reason({**body, "searchConfigurationList": ["c1"]}) == (
        "PAIRWISE_COMPARISON requires exactly 2 search configurations, got: 1")
    assert reason({**body, "searchConfigurationList": ["c1", "c2", "c3"]}) == (
        "PAIRWISE_COMPARISON requires exactly 2 search configurations, got: 3")
    assert reason(body) == "PAIRWISE_COMPARISON requires exactly 2 search configurations, got: 0"
    # a judgment list given to a pairwise comparison is still checked
    assert reason({**body, "searchConfigurationList": ["c1", "c2"], "judgmentList": ["x"]}) == (
        "Judgment [x] does not exist")
    # test_bad_input.py: the size is checked before any id
    assert reason({"type": "PAIRWISE_COMPARISON", "size": 10_001, "querySetId": "q"}) == (
        "size must be at most 10000, got: 10001")


def test_hybrid_needs_judgments() -> None:
    assert reason({"type": "HYBRID_OPTIMIZER", "querySetId": "qs", "size": 3,
                   "searchConfigurationList": ["c1"]}) == (
        "judgmentList is required for HYBRID_OPTIMIZER")


def test_fields_are_checked_in_order_and_nothing_after_the_first_error() -> None:
    cluster = Cluster()
    bad_everywhere = {"type": "X", "name": 7, "size": 0, "querySetId": "nope",
                      "searchConfigurationList": "c", "judgmentList": "j"}
    assert reason(bad_everywhere, cluster) == "Invalid or missing experiment type"
    assert cluster.asked == []
    cluster = Cluster()
    assert reason(pointwise(size=0, querySetId="nope"), cluster) == (
        "size must be a positive integer, got: 0")
    assert cluster.asked == []
    cluster = Cluster()
    assert reason(pointwise(querySetId="nope", judgmentList="j"), cluster) == (
        "QuerySet [nope] does not exist")
    assert cluster.asked == [("query_set", "nope")]
    cluster = Cluster()
    assert reason(pointwise(searchConfigurationList=["c1", "nope", "c2"], judgmentList=["x"]),
                  cluster) == "SearchConfiguration [nope] does not exist"
    assert cluster.asked == [("query_set", "qs"), ("search_configuration", "c1"),
                             ("search_configuration", "nope")]


def test_a_schema_instance_can_be_loaded_again_after_an_error() -> None:
    schema = experiment_schema(pointwise(), Cluster().lookups())
    with pytest.raises(BadRequest):
        load(schema, pointwise(size=0))
    assert load(schema, pointwise())["size"] == 5


def test_the_clusters_own_errors_are_raised_as_they_are() -> None:
    class Down(Exception):
        pass

    def unreachable(entity_id: str) -> list[Any] | None:
        raise Down(entity_id)

    lookups = Lookups(unreachable, lambda _: None, lambda _: None)
    with pytest.raises(Down):
        load(experiment_schema(pointwise(), lookups), pointwise())
    with pytest.raises(BadRequest):  # an earlier field's 400 comes first
        load(experiment_schema(pointwise(), lookups), pointwise(size=None))


# -- PATCH /experiments/{id} --------------------------------------------------------------------

def patch_reason(body: dict[str, Any]) -> str:
    with pytest.raises(BadRequest) as caught:
        load(ExperimentPatchSchema(), body)
    assert caught.value.status == 400
    return caught.value.reason


def test_patch_loads_only_the_fields_given() -> None:
    assert load(ExperimentPatchSchema(), {"name": " renamed "}) == {"name": "renamed"}
    assert load(ExperimentPatchSchema(), {"description": "  "}) == {"description": ""}
    assert load(ExperimentPatchSchema(), {"description": None, "x": 1}) == {"description": ""}
    assert load(ExperimentPatchSchema(), {"name": "n", "description": "d"}) == {
        "name": "n", "description": "d"}


@pytest.mark.parametrize(("body", "expected"), [
    # tests/integration/test_experiments.py::test_validate_patch_and_cascading_delete
    ({}, "At least one of 'name' or 'description' must be provided for update"),
    ({"other": "x"}, "At least one of 'name' or 'description' must be provided for update"),
    ({"name": "n" * 51}, "Invalid name: Text exceeds maximum length of 50 characters"),
    ({"description": 5}, "Field 'description' must be a string"),
    ({"name": None}, "Invalid name: Text cannot be empty"),
    ({"name": "   ", "description": 5}, "Invalid name: Text cannot be empty"),
    ({"name": 3}, "Field 'name' must be a string"),
])
def test_patch_reasons(body: dict[str, Any], expected: str) -> None:
    assert patch_reason(body) == expected


# -- the search body of a HYBRID_OPTIMIZER configuration ----------------------------------------

TWO = [{"match": {"title": "x"}}, {"match_all": {}}]


def test_hybrid_search_body_loads_its_two_clauses() -> None:
    assert load(HybridSearchSchema(), {"query": {"hybrid": {"queries": TWO}}, "size": 3}) == {
        "query": TWO}


@pytest.mark.parametrize(("body", "expected"), [
    # tests/integration/test_experiments.py: the job's reasons, the plugin's words
    ({"query": {"match": {"title": "x"}}},
     "query in search configuration does must be of type hybrid"),
    ({"query": {"hybrid": {"queries": TWO[:1]}}},
     "invalid hybrid query: expected exactly [2] sub-queries but found [1]"),
    ({"query": {"hybrid": {"other": "x"}}},
     "hybrid query in search configuration does not have queries"),
    ({"size": 3, "aggs": {}}, "query in search configuration does not have query"),
    ({"query": {"hybrid": {"queries": TWO}}, "search_pipeline": {}},
     "search pipeline is not allowed in search request"),
    ({"query": {"hybrid": {"queries": TWO}, "match_all": {}}},
     "query in search configuration does must be of type hybrid"),
    ({"query": {"hybrid": {"queries": TWO[:1]}}, "search_pipeline": None},
     "invalid hybrid query: expected exactly [2] sub-queries but found [1]"),
])
def test_hybrid_search_body_reasons(body: dict[str, Any], expected: str) -> None:
    with pytest.raises(BadRequest) as caught:
        load(HybridSearchSchema(), body)
    assert caught.value.reason == expected
