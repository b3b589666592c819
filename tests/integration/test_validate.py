"""``GET experiments/{id}/validate`` against the real cluster, with the signatures of the Jackson
vectors (tests/unit/experiments/signature_vectors.json, scripts/signature_vectors.sh): an
experiment written into the indices as the plugin writes it validates, one the workbench runs
stores the signature the plugin computes for the same inputs, one that stored the workbench's
former signature still validates, and drift is answered with the plugin's statuses and
messages."""

from __future__ import annotations

import copy
import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from opensearchpy import OpenSearch

from tests.support.api import Api, search_configuration
from tests.support.processes import Worker
from tests.support.waiting import finished
from workbench.experiments.signature import legacy_signature
from workbench.store.indices import (
    EXPERIMENT_INDEX,
    JUDGMENT_INDEX,
    QUERY_SET_INDEX,
    SEARCH_CONFIG_INDEX,
)

VECTORS = json.loads((Path(__file__).parents[1] / "unit" / "experiments"
                      / "signature_vectors.json").read_text("utf-8"))
CASES = {case["name"]: case for case in VECTORS["cases"]}
NOW = "2026-01-01T00:00:00.000Z"
VALID = {"status": "VALID", "drifted_inputs": [],
         "message": "Experiment inputs match the stored execution fingerprint."}


class Planted:
    """A case's documents written straight into the indices, as the plugin stores them, and an
    experiment that ran on them."""

    def __init__(self, direct: OpenSearch, name: str,
                 signature: dict[str, str] | None = None) -> None:
        case = copy.deepcopy(CASES[name])
        self.direct, tag = direct, uuid.uuid4().hex[:8]
        self.query_set = f"qs-{tag}"
        self.configs = [f"sc{n}-{tag}" for n in range(len(case["searchConfigurations"]))]
        self.judgments = [f"j{n}-{tag}" for n in range(len(case["judgments"]))]
        self.docs: list[tuple[str, str, dict[str, Any]]] = [
            (QUERY_SET_INDEX, self.query_set, {**case["querySet"], "id": self.query_set,
                                               "timestamp": NOW, "description": "",
                                               "sampling": "manual"})]
        for doc_id, config in zip(self.configs, case["searchConfigurations"], strict=True):
            self.docs.append((SEARCH_CONFIG_INDEX, doc_id,
                              {**config, "id": doc_id, "timestamp": NOW}))
        for doc_id, judgment in zip(self.judgments, case["judgments"], strict=True):
            self.docs.append((JUDGMENT_INDEX, doc_id, {**judgment, "id": doc_id,
                                                       "timestamp": NOW}))
        self.experiment = f"e-{tag}"
        self.docs.append((EXPERIMENT_INDEX, self.experiment, {
            "id": self.experiment, "timestamp": NOW, "name": f"POINTWISE_EVALUATION-{tag}",
            "description": "", "type": "POINTWISE_EVALUATION", "status": "COMPLETED",
            "querySetId": self.query_set, "searchConfigurationList": self.configs,
            "judgmentList": self.judgments, "size": 10, "isScheduled": False,
            "scheduledExperimentJobId": None, "results": [],
            "inputSignature": signature or case["inputSignature"]}))
        for index, doc_id, doc in self.docs:
            direct.index(index=index, id=doc_id, body=doc, refresh=True)

    def source(self, index: str, doc_id: str) -> dict[str, Any]:
        return next(doc for i, d, doc in self.docs if (i, d) == (index, doc_id))

    def rewrite(self, index: str, doc_id: str, **changes: Any) -> None:
        self.direct.index(index=index, id=doc_id, refresh=True,
                          body={**self.source(index, doc_id), **changes})

    def delete(self, index: str, doc_id: str) -> None:
        self.direct.delete(index=index, id=doc_id, refresh=True)

    def remove(self) -> None:
        for index, doc_id, _ in self.docs:
            self.direct.delete(index=index, id=doc_id, refresh=True, ignore=[404])


@pytest.fixture
def planted(direct: OpenSearch) -> Iterator[list[Planted]]:
    made: list[Planted] = []
    yield made
    for one in made:
        one.remove()


def validate(api: Api, experiment: str) -> Any:
    reply = api.srw("GET", f"/experiments/{experiment}/validate")
    assert reply.status == 200, reply.data
    return reply.json


@pytest.mark.parametrize("name", [
    "laptop and tv", "nested objects whose keys are not sorted",
    "a Mustache template that is not JSON, and bodies that are not objects", "a missing pipeline",
    "doubles whose shortest form older JDKs miss", "empty lists",
    "two of each, a legacy query text"])
def test_an_experiment_the_plugin_wrote_validates(api: Api, direct: OpenSearch,
                                                  planted: list[Planted], name: str) -> None:
    planted.append(Planted(direct, name))
    assert validate(api, planted[-1].experiment) == VALID


def test_a_signature_of_the_former_form_still_validates(api: Api, direct: OpenSearch,
                                                         planted: list[Planted]) -> None:
    case = CASES["laptop and tv"]
    former = legacy_signature(case["querySet"], case["judgments"], case["searchConfigurations"])
    assert set(former.values()).isdisjoint(case["inputSignature"].values())
    one = Planted(direct, "laptop and tv", former)
    planted.append(one)
    assert validate(api, one.experiment) == VALID
    one.rewrite(QUERY_SET_INDEX, one.query_set, querySetQueries=[{"queryText": "tv"}])
    assert validate(api, one.experiment) == {
        "status": "DRIFTED", "drifted_inputs": ["query_set"],
        "message": "QuerySet has changed since execution."}


def test_drift_is_answered_as_the_plugin_answers_it(api: Api, direct: OpenSearch,
                                                     planted: list[Planted]) -> None:
    one = Planted(direct, "two of each, a legacy query text")
    planted.append(one)
    assert validate(api, one.experiment) == VALID
    first, second = one.configs
    one.rewrite(SEARCH_CONFIG_INDEX, second, searchPipeline="another")
    assert validate(api, one.experiment) == {
        "status": "DRIFTED", "drifted_inputs": ["search_configurations"],
        "message": "Search configuration data has changed since execution."}
    one.rewrite(JUDGMENT_INDEX, one.judgments[1], judgmentRatings=[])
    assert validate(api, one.experiment) == {
        "status": "DRIFTED", "drifted_inputs": ["judgment_list", "search_configurations"],
        "message": "One or more experiment inputs have changed since execution."}

    one.delete(JUDGMENT_INDEX, one.judgments[0])
    assert validate(api, one.experiment) == {
        "status": "DRIFTED", "drifted_inputs": ["judgment_list"],
        "message": "One or more judgments have changed or are no longer available."}
    one.delete(SEARCH_CONFIG_INDEX, first)  # the configurations are read before the judgments
    assert validate(api, one.experiment) == {
        "status": "DRIFTED", "drifted_inputs": ["search_configurations"],
        "message": "One or more search configurations have changed or are no longer available."}
    one.delete(QUERY_SET_INDEX, one.query_set)
    assert validate(api, one.experiment) == {
        "status": "DRIFTED", "drifted_inputs": ["query_set"],
        "message": "QuerySet has changed or is no longer available."}

    experiment = one.source(EXPERIMENT_INDEX, one.experiment)
    for signature in (None, {"query_set": "a", "judgment_list": "b"}):
        one.rewrite(EXPERIMENT_INDEX, one.experiment, inputSignature=signature)
        assert validate(api, one.experiment) == {
            "status": "UNAVAILABLE", "drifted_inputs": [],
            "message": "Experiment input signature is not available for this experiment "
                       "(legacy or in-flight run)."}
    assert experiment["inputSignature"]
    api.srw("GET", "/experiments/missing-experiment/validate").error(
        404, "Experiment not found: missing-experiment")


def test_a_workbench_run_stores_the_plugins_signature(api: Api, direct: OpenSearch,
                                                      worker: Worker) -> None:
    """The same inputs made through the API: the run's signature is the one Jackson wrote."""
    case = CASES["made through the workbench's API"]
    (config,) = case["searchConfigurations"]
    index = config["index"]
    direct.indices.delete(index=index, ignore=[404])
    direct.indices.create(index=index, body={"mappings": {"properties": {
        "title": {"type": "text"}}}})
    made: list[tuple[str, str]] = []
    try:
        for doc_id, title in (("a", "tv laptop"), ("b", "tv")):
            direct.index(index=index, id=doc_id, body={"title": title}, refresh=True)
        query_set = api.srw("PUT", "/query_sets", {
            "name": "signature vectors", "querySetQueries": [
                {"queryText": e["queryText"]} for e in case["querySet"]["querySetQueries"]]}
        ).json["query_set_id"]
        made.append((QUERY_SET_INDEX, query_set))
        (judgment_doc,) = case["judgments"]
        judgment = api.srw("PUT", "/judgments", {
            "name": "signature vectors", "type": "IMPORT_JUDGMENT",
            "judgmentRatings": judgment_doc["judgmentRatings"]}).json["judgment_id"]
        made.append((JUDGMENT_INDEX, judgment))
        finished(api, f"/judgments/{judgment}", 120)
        configuration = search_configuration(api, "signature vectors", index, config["query"])
        made.append((SEARCH_CONFIG_INDEX, configuration))
        reply = api.srw("PUT", "/experiments", {
            "type": "POINTWISE_EVALUATION", "querySetId": query_set,
            "searchConfigurationList": [configuration], "judgmentList": [judgment],
            "size": 5})
        assert reply.status == 200, reply.data
        experiment = reply.json["experiment_id"]
        made.append((EXPERIMENT_INDEX, experiment))
        done = finished(api, f"/experiments/{experiment}", 180)
        assert done["status"] == "COMPLETED", done["results"]
        assert done["inputSignature"] == case["inputSignature"]
        assert validate(api, experiment) == VALID
    finally:
        for entity_index, doc_id in made:
            if entity_index == EXPERIMENT_INDEX:  # with its evaluation results
                api.srw("DELETE", f"/experiments/{doc_id}")
            else:
                direct.delete(index=entity_index, id=doc_id, refresh=True, ignore=[404])
        direct.indices.delete(index=index, ignore=[404])
