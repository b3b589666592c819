"""The input signature of an experiment that names remote search configurations (issue 47):
a remote configuration hashes as its definition without the password; ``/validate`` reads it
from the remote index; local configurations hash exactly as before (the plugin's vectors)."""

from __future__ import annotations

import copy
import hashlib
from typing import Any

from tests.unit.experiments.test_signature import CASES, Cluster
from workbench.experiments.signature import configurations_json, signature, validate
from workbench.store.indices import (
    JUDGMENT_INDEX,
    QUERY_SET_INDEX,
    REMOTE_CONFIG_INDEX,
    SEARCH_CONFIG_INDEX,
)

LOCAL = {"id": "c", "name": "n", "index": "products", "query": '{"query":{"match_all":{}}}',
         "searchPipeline": ""}
REMOTE = {"id": "r", "name": "remote", "description": "d",
          "connectionUrl": "http://127.0.0.1:9200/products/_search", "username": "ann",
          "passwordEncrypted": "gAAAA-secret", "passwordSet": True,
          "queryTemplate": '{"query":{"match":{"title":"%SearchText%"}}}',
          "responseTemplate": {"preset": "solr", "id": "$.sku"},
          "maxRequestsPerSecond": 10, "maxConcurrentRequests": 5, "cacheDurationMinutes": 60,
          "refreshCache": False, "metadata": {}, "timestamp": "2026-11-29T11:00:00.000Z"}
# written by hand: keys sorted, no spaces, the template object's keys sorted too
REMOTE_JSON = ('{"connectionUrl":"http://127.0.0.1:9200/products/_search",'
               '"queryTemplate":"{\\"query\\":{\\"match\\":{\\"title\\":\\"%SearchText%\\"}}}",'
               '"responseTemplate":{"id":"$.sku","preset":"solr"},'
               '"type":"remote","username":"ann"}')


def test_a_remote_configuration_is_its_definition_without_the_password() -> None:
    assert configurations_json([LOCAL, REMOTE]) == (
        '[{"index":"products","pipeline":"","query":"{\\"query\\":{\\"match_all\\":{}}}"},'
        + REMOTE_JSON + "]")


def test_a_preset_name_and_no_username() -> None:
    doc = {**REMOTE, "responseTemplate": "opensearch"}
    del doc["username"]
    assert configurations_json([doc]) == (
        '[{"connectionUrl":"http://127.0.0.1:9200/products/_search",'
        '"queryTemplate":"{\\"query\\":{\\"match\\":{\\"title\\":\\"%SearchText%\\"}}}",'
        '"responseTemplate":"opensearch","type":"remote","username":null}]')


def test_what_does_not_change_the_searches_does_not_change_the_hash() -> None:
    base = signature({}, [], [REMOTE])["search_configurations"]
    assert base == hashlib.sha256(("[" + REMOTE_JSON + "]").encode()).hexdigest()
    for change in ({"passwordEncrypted": "other"}, {"passwordSet": False}, {"name": "x"},
                   {"maxRequestsPerSecond": 1}, {"cacheDurationMinutes": 0},
                   {"refreshCache": True}, {"timestamp": "2027-01-01T00:00:00.000Z"}):
        assert signature({}, [], [{**REMOTE, **change}])["search_configurations"] == base
    for change in ({"connectionUrl": "http://127.0.0.1:9201/products/_search"},
                   {"username": "bob"}, {"queryTemplate": "q=%SearchText%"},
                   {"responseTemplate": "opensearch"}):
        assert signature({}, [], [{**REMOTE, **change}])["search_configurations"] != base


def _world() -> tuple[Cluster, dict[str, Any]]:
    case = copy.deepcopy(CASES["query set entries: legacy text, custom fields, no text"])
    docs = {(QUERY_SET_INDEX, "qs"): case["querySet"], (SEARCH_CONFIG_INDEX, "c"): LOCAL,
            (REMOTE_CONFIG_INDEX, "r"): REMOTE}
    for n, judgment in enumerate(case["judgments"]):
        docs[(JUDGMENT_INDEX, f"j{n}")] = judgment
    judgments = case["judgments"]
    experiment = {"id": "e", "type": "POINTWISE_EVALUATION", "status": "COMPLETED",
                  "querySetId": "qs", "searchConfigurationList": ["c", "r"],
                  "remoteSearchConfigurationIds": ["r"],
                  "judgmentList": [f"j{n}" for n in range(len(judgments))], "size": 10,
                  "inputSignature": signature(case["querySet"], judgments, [LOCAL, REMOTE])}
    return Cluster(docs), experiment


def test_validate_reads_a_remote_configuration_from_the_remote_index() -> None:
    cluster, experiment = _world()
    assert validate(cluster, experiment) == {  # type: ignore[arg-type]
        "status": "VALID", "drifted_inputs": [],
        "message": "Experiment inputs match the stored execution fingerprint."}
    assert (REMOTE_CONFIG_INDEX, "r") in cluster.asked
    assert (SEARCH_CONFIG_INDEX, "r") not in cluster.asked


def test_a_changed_or_deleted_remote_configuration_drifts() -> None:
    cluster, experiment = _world()
    cluster.docs[(REMOTE_CONFIG_INDEX, "r")] = {**REMOTE, "passwordEncrypted": "changed"}
    assert validate(cluster, experiment)["status"] == "VALID"  # type: ignore[arg-type]
    cluster.docs[(REMOTE_CONFIG_INDEX, "r")] = {**REMOTE, "queryTemplate": "q=%SearchText%"}
    assert validate(cluster, experiment) == {  # type: ignore[arg-type]
        "status": "DRIFTED", "drifted_inputs": ["search_configurations"],
        "message": "Search configuration data has changed since execution."}
    del cluster.docs[(REMOTE_CONFIG_INDEX, "r")]
    assert validate(cluster, experiment) == {  # type: ignore[arg-type]
        "status": "DRIFTED", "drifted_inputs": ["search_configurations"],
        "message": "One or more search configurations have changed or are no longer "
                   "available."}
