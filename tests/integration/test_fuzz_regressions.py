"""Regressions found by the fuzz stage (scripts/fuzz.py: schemathesis against the OpenAPI
document). Each test is one reproduction that used to answer a 5xx or an answer the document
does not describe."""

from __future__ import annotations

import pytest

from tests.support.api import Api

SEARCHABLE = ["query_sets", "search_configurations", "judgments", "experiments"]


@pytest.mark.parametrize("collection", SEARCHABLE)
@pytest.mark.parametrize("method", ["GET", "POST"])
def test_a_search_body_the_cluster_fails_to_parse_is_a_400(api: Api, collection: str,
                                                           method: str) -> None:
    """The cluster answers 500 ``illegal_state_exception`` for ``"_source": [null]`` (its
    parser meets a null where it wants text); the body is the client's, so it is a 400."""
    reply = api.srw(method, f"/{collection}/_search",
                    {"query": {"match_all": {}}, "size": 5, "_source": [None, None]})
    assert reply.status == 400, reply.data[:300]
    assert reply.json["status"] == 400
    assert reply.json["error"]["type"] == "illegal_state_exception"
    assert "VALUE_NULL" in reply.json["error"]["reason"]


@pytest.mark.parametrize("section", [[None, None], 5, "x", True])
@pytest.mark.parametrize("scope", ["persistent", "transient"])
def test_a_settings_section_that_is_not_an_object_is_a_400(api: Api, scope: str,
                                                           section: object) -> None:
    """Was a 500 (``'list' object has no attribute 'items'``) next to a workbench key, and the
    cluster's own 500 (a ClassCastException) without one."""
    for other in ({"plugins.search_relevance.stats_enabled": True}, {}):
        body = {("transient" if scope == "persistent" else "persistent"): other, scope: section}
        reply = api.call("PUT", "/_cluster/settings", body)
        assert reply.status == 400, reply.data[:300]
        assert reply.json["error"]["type"] == "settings_exception"
        assert reply.json["error"]["reason"].startswith("Failed to load settings from [")


def test_an_unknown_model_in_evaluate_is_a_400_naming_it(api: Api) -> None:
    """Was a 502 (as if the LLM had failed); the request names no model, so it is a 400."""
    reply = api.srw("POST", "/_evaluate", {"queryText": "wallet", "judge": "llm", "modelId": "1",
                                           "hits": [{"id": "a", "title": "a wallet"}]})
    reply.error(400, "model [1] is neither registered with the workbench (WORKBENCH_MODELS / "
                     "WORKBENCH_MODELS_FILE or the models route) nor available through ML "
                     "Commons (HTTP 400: no "
                     "handler found for uri [/_plugins/_ml/models/1/_predict] and method [POST])",
                "illegal_argument_exception")


@pytest.mark.parametrize("threshold", [{}, "0.5", 2, True])
def test_a_bad_threshold_is_a_400_for_every_judge(api: Api, threshold: object) -> None:
    """Was a 500 with the llm judge, which does not use a threshold but took it unchecked."""
    for judge in ("llm", "token_overlap"):
        reply = api.srw("POST", "/_evaluate", {
            "queryText": "wallet", "judge": judge, "modelId": "test-judge",
            "referenceAnswer": "a wallet", "threshold": threshold,
            "hits": [{"id": "a", "title": "a wallet"}]})
        reply.error(400, f"threshold must be a number between 0 and 1, got: {threshold}",
                    "illegal_argument_exception")
