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


def test_a_model_that_cannot_be_called_as_set_up_is_a_400(api: Api) -> None:
    """Was a 502: a Bedrock model registered without a region, on a server whose environment
    names none, fails before anything reaches AWS; so does an OpenAI model whose key variable
    is unset. Fixing the model helps, not trying again: ``_predict`` and ``_evaluate`` answer
    400 naming the model."""
    import uuid

    bedrock, openai = (f"unusable-{uuid.uuid4().hex[:8]}" for _ in range(2))
    for body in ({"id": bedrock, "provider": "bedrock", "model": "anthropic.claude-v2"},
                 {"id": openai, "provider": "openai", "model": "m",
                  "endpoint": "http://127.0.0.1:9/v1", "apiKeyEnv": "WB_UNSET_KEY_VARIABLE"}):
        assert api.srw("PUT", "/models", body).status == 200
    try:
        predict = {"parameters": {"messages": [{"role": "user", "content": "hi"}]}}
        reply = api.call("POST", f"/_plugins/_ml/models/{bedrock}/_predict", predict)
        assert reply.status == 400, reply.data[:300]
        # Without a region in the environment the client cannot be made; with one, the call
        # finds no AWS credentials: either way nothing reached AWS.
        assert reply.reason in (
            f"model [{bedrock}]: cannot create a Bedrock client: You must specify a region.",
            f"model [{bedrock}]: no AWS credentials found for Bedrock"), reply.reason
        reply = api.call("POST", f"/_plugins/_ml/models/{openai}/_predict", predict)
        reply.error(400, f"model [{openai}]: environment variable WB_UNSET_KEY_VARIABLE "
                         "(api_key_env) is not set or empty", "illegal_argument_exception")
        evaluated = api.srw("POST", "/_evaluate", {
            "queryText": "x", "judge": "llm", "modelId": openai,
            "hits": [{"id": "a", "title": "x"}]})
        evaluated.error(400, f"model [{openai}]: environment variable WB_UNSET_KEY_VARIABLE "
                             "(api_key_env) is not set or empty", "illegal_argument_exception")
    finally:
        for model in (bedrock, openai):
            api.srw("DELETE", f"/models/{model}")


@pytest.mark.parametrize("path", ["/experiments/schedule", "/query_sets", "/judgments"])
@pytest.mark.parametrize("field", [".", "", "a..b", "title."])
def test_a_list_sorted_on_no_field_name_is_a_400(api: Api, path: str, field: str) -> None:
    """The cluster fails a sort on "." with a 500 (``array_index_out_of_bounds_exception``)."""
    api.srw("GET", path, {"sort": {field: {"order": "asc"}}}).error(
        400, f"sort field [{field}] is not a field name", "illegal_argument_exception")
