"""The experiment input signature equals the plugin's byte for byte (the vectors Jackson 3 wrote,
scripts/signature_vectors.sh), and ``/validate`` answers as the plugin does."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
from opensearchpy.exceptions import NotFoundError

from workbench.experiments.signature import (
    canonical_inputs,
    legacy_signature,
    search_body,
    signature,
    validate,
)
from workbench.store.indices import JUDGMENT_INDEX, QUERY_SET_INDEX, SEARCH_CONFIG_INDEX

VECTORS = json.loads((Path(__file__).parent / "signature_vectors.json").read_text("utf-8"))
CASES = {case["name"]: case for case in VECTORS["cases"]}


@pytest.mark.parametrize("name", list(CASES))
def test_the_canonical_json_and_hashes_are_jacksons(name: str) -> None:
    case = CASES[name]
    inputs = (case["querySet"], case["judgments"], case["searchConfigurations"])
    assert canonical_inputs(*inputs) == case["canonical"]
    assert signature(*inputs) == case["inputSignature"]


def test_the_vectors_cover_the_traps() -> None:
    canonical = "".join(text for case in VECTORS["cases"] for text in case["canonical"].values())
    for trap in ("café", "😀", "\\u001F", "\\u0007", "1.0E-5", "1.2345678E7", "100.0",
                 "12345678901234567890", '\\"Infinity\\"', "{{query_string}}",
                 '"pipeline":"my-pipeline"', '{"rows":[]}', '"queries":[]'):
        assert trap in canonical, trap
    assert "Java 2" in VECTORS["generator"]  # Java 19+ doubles, as in OpenSearch 3


def test_the_issue_example() -> None:
    """The query set ["laptop", "tv"]: the plugin's hash, and the workbench's former one."""
    case = CASES["laptop and tv"]
    inputs = (case["querySet"], case["judgments"], case["searchConfigurations"])
    assert signature(*inputs)["query_set"].startswith("d16b559f")
    assert legacy_signature(*inputs)["query_set"].startswith("02a3bb21")


def test_a_query_body_keeps_its_key_order_and_loses_from_size_profile() -> None:
    assert search_body(' {"size":3,"query":{"z":1,"a":2.50},"from":1,"profile":true}\n') == \
        '{"query":{"z":1,"a":2.5}}'
    assert search_body('{"query":{"match":{"t":"{{query_string}}"}},"size":{{size}}}') == \
        '{"query":{"match":{"t":"{{query_string}}"}},"size":{{size}}}'
    assert search_body('{"a":NaN}') == '{"a":NaN}'
    assert search_body('{"a":1e400}') == '{"a":"Infinity"}'
    assert search_body(None) == ""


@pytest.mark.parametrize(("rating", "text"), [
    ({"rating": "1", "docId": "a\x1f\x01"}, '{"docId":"a\\u001F\\u0001","rating":"1"}'),
    ({"docId": "\\u001f", "rating": 2}, '{"docId":"\\\\u001f","rating":2}'),
    ({"\uff5e": 1, "\U0001F600": 2}, '{"\U0001F600":2,"\uff5e":1}'),
    ({"docId": "d", "rating": 1e-05, "x": True, "y": None},
     '{"docId":"d","rating":1.0E-5,"x":true,"y":null}'),
])
def test_a_rating_is_written_as_jackson_writes_it(rating: dict[str, Any], text: str) -> None:
    (row,) = json.loads(canonical_inputs({}, [{"judgmentRatings": [
        {"query": "q", "ratings": [rating]}]}], [])["judgment_list"])[0]["rows"]
    assert canonical_inputs({}, [{"judgmentRatings": [{"query": "q", "ratings": [rating]}]}],
                            [])["judgment_list"] == '[{"rows":[{"query":"q","ratings":[' + text \
        + "]}]}]"
    assert row["ratings"] == [rating]


# -- validate ---------------------------------------------------------------------------------

class Cluster:
    """The three input indices, enough for ``Repository.get_source``."""

    def __init__(self, docs: dict[tuple[str, str], dict[str, Any]]) -> None:
        self.docs = docs
        self.asked: list[tuple[str, str]] = []

    def get(self, index: str, params: Any = None, **where: str) -> dict[str, Any]:
        key = (index, where["id"])
        self.asked.append(key)
        if key not in self.docs:
            raise NotFoundError(404, "not_found", {"found": False})
        return {"_index": index, "_id": key[1], "found": True, "_seq_no": 0,
                "_primary_term": 1, "_source": copy.deepcopy(self.docs[key])}


CASE = CASES["query set entries: legacy text, custom fields, no text"]


def world(name: str = CASE["name"]) -> tuple[Cluster, dict[str, Any]]:
    case = copy.deepcopy(CASES[name])
    docs = {(QUERY_SET_INDEX, "qs"): case["querySet"]}
    for n, config in enumerate(case["searchConfigurations"]):
        docs[(SEARCH_CONFIG_INDEX, f"c{n}")] = config
    for n, judgment in enumerate(case["judgments"]):
        docs[(JUDGMENT_INDEX, f"j{n}")] = judgment
    experiment = {"id": "e", "type": "POINTWISE_EVALUATION", "status": "COMPLETED",
                  "querySetId": "qs",
                  "searchConfigurationList": [
                      f"c{n}" for n in range(len(case["searchConfigurations"]))],
                  "judgmentList": [f"j{n}" for n in range(len(case["judgments"]))], "size": 10,
                  "inputSignature": dict(case["inputSignature"])}
    return Cluster(docs), experiment


def answer(status: str, drifted: list[str], message: str) -> dict[str, Any]:
    return {"status": status, "drifted_inputs": drifted, "message": message}


VALID = answer("VALID", [], "Experiment inputs match the stored execution fingerprint.")


def test_a_signature_the_plugin_wrote_validates() -> None:
    cluster, experiment = world()
    assert validate(cluster, experiment) == VALID  # type: ignore[arg-type]


@pytest.mark.parametrize("name", ["laptop and tv", "numbers as strings and as numbers, floats"])
def test_a_signature_the_workbench_stored_before_still_validates(name: str) -> None:
    cluster, experiment = world(name)
    case = CASES[name]
    experiment["inputSignature"] = legacy_signature(
        case["querySet"], case["judgments"], case["searchConfigurations"])
    assert set(experiment["inputSignature"].values()).isdisjoint(case["inputSignature"].values())
    assert validate(cluster, experiment) == VALID  # type: ignore[arg-type]
    cluster.docs[(JUDGMENT_INDEX, "j0")]["judgmentRatings"][0]["ratings"][0]["rating"] = "4"
    assert validate(cluster, experiment) == answer(  # type: ignore[arg-type]
        "DRIFTED", ["judgment_list"], "Judgment data has changed since execution.")


@pytest.mark.parametrize("stored", [None, {}, "abc", {"query_set": "a", "judgment_list": "b"},
                                    {"query_set": "a", "judgment_list": "b",
                                     "search_configurations": None}])
def test_without_the_three_hashes_the_signature_is_unavailable(stored: Any) -> None:
    cluster, experiment = world()
    experiment["inputSignature"] = stored
    assert validate(cluster, experiment) == answer(  # type: ignore[arg-type]
        "UNAVAILABLE", [], "Experiment input signature is not available for this experiment "
                           "(legacy or in-flight run).")
    assert cluster.asked == []


def test_a_query_set_that_is_gone_is_the_only_input_named() -> None:
    cluster, experiment = world()
    for key in [(QUERY_SET_INDEX, "qs"), (SEARCH_CONFIG_INDEX, "c1"), (JUDGMENT_INDEX, "j0")]:
        del cluster.docs[key]
    assert validate(cluster, experiment) == answer(  # type: ignore[arg-type]
        "DRIFTED", ["query_set"], "QuerySet has changed or is no longer available.")
    assert cluster.asked == [(QUERY_SET_INDEX, "qs")]


def test_an_empty_query_set_id_is_a_query_set_gone() -> None:
    cluster, experiment = world()
    experiment["querySetId"] = ""
    assert validate(cluster, experiment)["drifted_inputs"] == ["query_set"]  # type: ignore[arg-type]
    assert cluster.asked == []


def test_the_first_configuration_gone_stops_the_check() -> None:
    cluster, experiment = world()
    del cluster.docs[(SEARCH_CONFIG_INDEX, "c0")]
    del cluster.docs[(JUDGMENT_INDEX, "j1")]
    cluster.docs[(QUERY_SET_INDEX, "qs")]["querySetQueries"] = []  # changed, but not compared
    assert validate(cluster, experiment) == answer(  # type: ignore[arg-type]
        "DRIFTED", ["search_configurations"],
        "One or more search configurations have changed or are no longer available.")
    assert cluster.asked == [(QUERY_SET_INDEX, "qs"), (SEARCH_CONFIG_INDEX, "c0")]


def test_a_judgment_gone_is_named_alone() -> None:
    cluster, experiment = world()
    del cluster.docs[(JUDGMENT_INDEX, "j1")]
    cluster.docs[(SEARCH_CONFIG_INDEX, "c1")]["index"] = "changed"
    assert validate(cluster, experiment) == answer(  # type: ignore[arg-type]
        "DRIFTED", ["judgment_list"],
        "One or more judgments have changed or are no longer available.")


@pytest.mark.parametrize(("change", "drifted", "message"), [
    ("query_set", ["query_set"], "QuerySet has changed since execution."),
    ("judgment_list", ["judgment_list"], "Judgment data has changed since execution."),
    ("search_configurations", ["search_configurations"],
     "Search configuration data has changed since execution."),
    ("all", ["query_set", "judgment_list", "search_configurations"],
     "One or more experiment inputs have changed since execution."),
    ("two", ["query_set", "search_configurations"],
     "One or more experiment inputs have changed since execution."),
])
def test_changed_inputs_drift(change: str, drifted: list[str], message: str) -> None:
    cluster, experiment = world()
    if change in ("query_set", "all", "two"):
        cluster.docs[(QUERY_SET_INDEX, "qs")]["querySetQueries"].append({"queryText": "new"})
    if change in ("judgment_list", "all"):
        cluster.docs[(JUDGMENT_INDEX, "j0")]["judgmentRatings"].pop()
    if change in ("search_configurations", "all", "two"):
        cluster.docs[(SEARCH_CONFIG_INDEX, "c0")]["searchPipeline"] = "other"
    assert validate(cluster, experiment) == answer(  # type: ignore[arg-type]
        "DRIFTED", drifted, message)


def test_what_the_plugin_ignores_does_not_drift() -> None:
    """Names, ids, custom fields, key order and from/size/profile are not hashed."""
    cluster, experiment = world()
    cluster.docs[(QUERY_SET_INDEX, "qs")]["name"] = "renamed"
    cluster.docs[(QUERY_SET_INDEX, "qs")]["querySetQueries"][1]["customFields"] = {"a": "b"}
    cluster.docs[(JUDGMENT_INDEX, "j0")]["status"] = "ERROR"
    cluster.docs[(SEARCH_CONFIG_INDEX, "c0")]["query"] = \
        ' {"size": 7, "query":{"match":{"title":"%SearchText%"}}, "from": 2}'
    cluster.docs[(SEARCH_CONFIG_INDEX, "c1")]["name"] = "renamed"
    assert validate(cluster, experiment) == VALID  # type: ignore[arg-type]
