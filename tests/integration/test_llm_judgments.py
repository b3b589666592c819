"""LLM judgments end to end: HTTP -> worker -> real searches -> the stand-in LLM -> stored ratings.

The LLM server speaks the OpenAI chat-completions shape; the provider code under test is the code
users run. Its default answer is a deterministic word-overlap judge, so the ratings a job stores
can be checked against what the server answered for each recorded prompt.
"""

from __future__ import annotations

import json
import signal
import time
import uuid
from collections.abc import Iterator
from typing import Any

import psutil
import pytest
from opensearchpy import OpenSearch

from tests.conftest import JUDGE_MODEL, LLM_KEY
from tests.support.api import Api
from tests.support.processes import Server, Worker
from tests.support.waiting import finished
from workbench.bench import llm_server as fake
from workbench.bench.llm_server import LLMServer
from workbench.judgments.llm import job
from workbench.llm.base import messages_string
from workbench.llm.structured import mode
from workbench.llm.tokens import count_tokens
from workbench.store.indices import JUDGMENT_INDEX

PRODUCTS = [
    ("p1", "red running shoes", "lightweight shoes for running", "shoes"),
    ("p2", "blue running shoes", "shoes for the road", "shoes"),
    ("p3", "red wool hat", "a warm hat", "hats"),
    ("p4", "wireless earbuds with charging case", "earbuds without wires", "audio"),
    ("p5", "noise cancelling wireless headphones", "over-ear headphones", "audio"),
    ("p6", "red shoes for kids", "small red shoes", "shoes"),
    ("p7", "leather wallet", "a wallet made of leather", "accessories"),
    ("p8", "usb charging cable", "a cable for charging phones", "cables"),
]
REFERENCE = {"referenceAnswer": "earbuds without wires", "category": "audio"}
EARBUDS_KEY = 'wireless earbuds#{"referenceAnswer":"earbuds without wires","category":"audio"}'


@pytest.fixture(scope="module")
def setup(api: Api, direct: OpenSearch) -> Iterator[dict[str, Any]]:
    index = f"test-llm-products-{uuid.uuid4().hex[:6]}"
    direct.indices.create(index=index)
    for doc_id, title, description, category in PRODUCTS:
        direct.index(index=index, id=doc_id, body={
            "title": title, "description": description, "category": category, "price": 10})
    direct.indices.refresh(index=index)
    query_set = api.srw("PUT", "/query_sets", {"name": "llm set", "querySetQueries": [
        {"queryText": "red shoes"},
        {"queryText": "wireless earbuds", **REFERENCE},
        {"queryText": "charging cable"},
    ]}).json["query_set_id"]
    titles = api.srw("PUT", "/search_configurations", {
        "name": "titles", "index": index,
        "query": '{"query":{"match":{"title":"%SearchText%"}}}'}).json["search_configuration_id"]
    descriptions = api.srw("PUT", "/search_configurations", {
        "name": "descriptions", "index": index,
        "query": '{"query":{"match":{"description":"%queryText%"}}}',
    }).json["search_configuration_id"]
    yield {"index": index, "querySetId": query_set, "configs": [titles, descriptions]}
    direct.indices.delete(index=index)


def body(setup: dict[str, Any], **fields: Any) -> dict[str, Any]:
    out = {"name": f"llm-{uuid.uuid4().hex[:8]}", "type": "LLM_JUDGMENT", "modelId": JUDGE_MODEL,
           "querySetId": setup["querySetId"], "searchConfigurationList": setup["configs"],
           "size": 3, "contextFields": ["title"]}
    out.update(fields)
    return out


def run(api: Api, payload: dict[str, Any], timeout: float = 120) -> dict[str, Any]:
    reply = api.srw("PUT", "/judgments", payload)
    assert reply.status == 200, reply.data
    return finished(api, f"/judgments/{reply.json['judgment_id']}", timeout)


def direct_hits(direct: OpenSearch, index: str, field: str, text: str) -> list[str]:
    hits = direct.search(index=index, body={"query": {"match": {field: text}}, "size": 3})
    return [h["_id"] for h in hits["hits"]["hits"]]


def answered(request: fake.RecordedRequest) -> dict[str, str]:
    """What the stand-in judge answered for a recorded prompt: docId -> stored rating."""
    out = {}
    for rating in fake.judge(request.system, request.user, request.response_format):
        doc_id = str(rating["id"]).split("::", 1)[1]
        score = rating["rating_score"]
        out[doc_id] = ("1.0" if score == "RELEVANT" else "0.0") if isinstance(score, str) \
            else repr(float(score))
    return out


def ratings_of(judgment: dict[str, Any]) -> dict[str, dict[str, str]]:
    return {e["query"]: {r["docId"]: r["rating"] for r in e["ratings"]}
            for e in judgment["judgmentRatings"]}


def test_llm_judgment_end_to_end(api: Api, worker: Worker, setup: dict[str, Any],
                                 llm: LLMServer, direct: OpenSearch) -> None:
    done = run(api, body(setup))
    assert done["status"] == "COMPLETED", done["metadata"]
    metadata = done["metadata"]
    assert {k: metadata[k] for k in (
        "modelId", "querySetId", "size", "searchConfigurationList", "tokenLimit",
        "contextFields", "ignoreFailure", "promptTemplate", "llmJudgmentRatingType",
        "totalQueries", "successfulQueries", "failedQueries")} == {
        "modelId": JUDGE_MODEL, "querySetId": setup["querySetId"], "size": 3,
        "searchConfigurationList": setup["configs"], "tokenLimit": 4000,
        "contextFields": ["title"], "ignoreFailure": False,
        "promptTemplate": "SearchText: {{searchText}}; Hits: {{hits}}",
        "llmJudgmentRatingType": "SCORE0_1", "totalQueries": 3, "successfulQueries": 3,
        "failedQueries": 0}
    assert "lastFailureReason" not in metadata
    usage = metadata["usage"]
    assert usage["llmCalls"] == 3 and usage["cachedRatings"] == 0
    assert usage["inputTokens"] > 0 and usage["outputTokens"] > 0

    stored = ratings_of(done)
    assert list(stored) == ["red shoes", EARBUDS_KEY, "charging cable"]
    index = setup["index"]
    for key, text in (("red shoes", "red shoes"), (EARBUDS_KEY, "wireless earbuds"),
                      ("charging cable", "charging cable")):
        union = list(dict.fromkeys(direct_hits(direct, index, "title", text)
                                   + direct_hits(direct, index, "description", text)))
        assert list(stored[key]) == union  # deduplicated, configuration order then rank
    assert len(llm.requests) == 3
    for request in llm.requests:
        assert request.kind == "openai" and request.path == "/v1/chat/completions"
        assert request.authorization == f"Bearer {LLM_KEY}"
        assert request.body["model"] == "judge-1"
        schema = request.response_format["json_schema"]["schema"]  # type: ignore[index]
        assert schema["properties"]["ratings"]["items"]["properties"]["rating_score"] == {
            "type": "number"}
        hits = json.loads(request.user.split("Hits: ", 1)[1])
        assert all(h["id"].startswith(f"{index}::") for h in hits)
        assert all(set(json.loads(h["source"])) == {"title"} for h in hits)  # contextFields
        query = next(k for k in stored if request.user.startswith(
            f"SearchText: {k.split('#')[0]};"))
        assert stored[query] == answered(request)
    assert any(v not in ("0.0", "1.0") for doc in stored.values() for v in doc.values())


def test_second_identical_job_uses_the_cache_and_overwrite_calls_again(
    api: Api, worker: Worker, setup: dict[str, Any], llm: LLMServer
) -> None:
    payload = body(setup, contextFields=["title", "description"])
    first = run(api, payload)
    calls = llm.calls
    assert calls == 3
    second = run(api, {**payload, "name": "again"})
    assert llm.calls == calls  # zero LLM calls
    assert ratings_of(second) == ratings_of(first)
    assert second["metadata"]["usage"]["llmCalls"] == 0
    assert second["metadata"]["usage"]["cachedRatings"] == sum(
        len(v) for v in ratings_of(first).values())
    third = run(api, {**payload, "name": "fresh", "overwriteCache": True})
    assert llm.calls == calls + 3
    assert third["metadata"]["overwriteCache"] is True
    assert ratings_of(third) == ratings_of(first)


def test_relevant_irrelevant(api: Api, worker: Worker, setup: dict[str, Any],
                             llm: LLMServer) -> None:
    done = run(api, body(setup, llmJudgmentRatingType="RELEVANT_IRRELEVANT",
                         overwriteCache=True))
    assert done["status"] == "COMPLETED"
    values = {v for doc in ratings_of(done).values() for v in doc.values()}
    assert values <= {"1.0", "0.0"} and "1.0" in values
    schema = llm.requests[0].response_format["json_schema"]["schema"]  # type: ignore[index]
    assert schema["properties"]["ratings"]["items"]["properties"]["rating_score"] == {
        "type": "string", "enum": ["RELEVANT", "IRRELEVANT"]}
    assert "IRRELEVANT" in llm.requests[0].system


def test_falls_back_down_the_structured_output_ladder(api: Api, worker: Worker,
                                                     setup: dict[str, Any],
                                                     llm: LLMServer) -> None:
    llm.reject_response_format()  # a model that refuses response_format: 400 naming it
    llm.empty_ratings()  # and one that answers an empty list with it
    done = run(api, body(setup, overwriteCache=True))
    assert done["status"] == "COMPLETED", done["metadata"]
    assert done["metadata"]["successfulQueries"] == 3
    # The first chunk finds the way while the other two wait for it (llm/structured.py): its
    # refused json_schema call steps down to json_object, which the server answers (so that
    # is remembered), but with nothing usable, so it goes on to plain, as the plugin falls
    # back. The two others start where the server was found to answer.
    modes = sorted(mode(r.response_format) for r in llm.requests)
    assert modes == ["json_object", "json_object", "json_object", "json_schema", "plain"]
    first = next(r for r in llm.requests if mode(r.response_format) == "json_schema")
    schema = first.response_format["json_schema"]["schema"]
    for stepped in (r for r in llm.requests if mode(r.response_format) == "json_object"):
        # the same schema, with the ids limited to the chunk's hits, each rated once
        ids = [hit["id"] for hit in json.loads(stepped.user.split("Hits: ", 1)[1])]
        assert stepped.response_format["type"] == "json_object"
        constrained = stepped.response_format["schema"]
        ratings = constrained["properties"]["ratings"]
        assert ratings.pop("minItems") == ratings.pop("maxItems") == len(ids) > 0
        properties = ratings["items"]["properties"]
        assert properties.pop("id") == {"type": "string", "enum": ids}
        # scores a grammar can keep to: 0 to 1 in tenths (judgments/llm/prompt.py)
        assert properties.pop("rating_score") == {
            "type": "number", "enum": [0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0]}
        expected = json.loads(json.dumps(schema))
        del expected["properties"]["ratings"]["items"]["properties"]["id"]
        del expected["properties"]["ratings"]["items"]["properties"]["rating_score"]
        assert constrained == expected
    assert done["metadata"]["usage"]["llmCalls"] == 5


def test_remembers_the_format_a_server_accepts(api: Api, worker: Worker,
                                               setup: dict[str, Any], llm: LLMServer) -> None:
    """A server that never speaks json_schema is asked that way once, by one chunk, while the
    others wait; what it accepts is shown on the model and used by the next job at once."""
    assert api.srw("GET", f"/models/{JUDGE_MODEL}").json["structuredOutput"] is None
    llm.refuse_formats("json_schema")
    done = run(api, body(setup, overwriteCache=True))
    assert done["status"] == "COMPLETED" and done["metadata"]["successfulQueries"] == 3
    modes = [mode(r.response_format) for r in llm.requests]
    assert sorted(modes) == ["json_object"] * 3 + ["json_schema"]
    assert done["metadata"]["usage"]["llmCalls"] == 4
    learnt = api.srw("GET", f"/models/{JUDGE_MODEL}").json["structuredOutput"]
    assert learnt["mode"] == "json_object"
    assert 86_390 <= learnt["expiresInSeconds"] <= 86_400
    assert learnt["learnedAt"].endswith("Z")

    before = len(llm.requests)
    again = run(api, body(setup, overwriteCache=True))
    assert again["status"] == "COMPLETED" and again["metadata"]["successfulQueries"] == 3
    assert [mode(r.response_format) for r in llm.requests[before:]] == ["json_object"] * 3
    assert again["metadata"]["usage"]["llmCalls"] == 3


def test_prompt_template_with_reference_and_custom_fields(api: Api, worker: Worker,
                                                          setup: dict[str, Any],
                                                          llm: LLMServer) -> None:
    template = ("Query: {{queryText}} | expected: {{referenceAnswer}} | in {{category}} | "
                "{{missing}}|\nDocuments: {{hits}}")
    done = run(api, body(setup, promptTemplate=template, overwriteCache=True))
    assert done["metadata"]["promptTemplate"] == template
    earbuds = next(r for r in llm.requests if r.user.startswith("Query: wireless earbuds"))
    assert earbuds.user.startswith(
        "Query: wireless earbuds | expected: earbuds without wires | in audio | |\nDocuments: [")
    shoes = next(r for r in llm.requests if r.user.startswith("Query: red shoes"))
    assert shoes.user.startswith("Query: red shoes | expected:  | in  | |\nDocuments: [")


def test_token_limit_splits_prompts(api: Api, worker: Worker, setup: dict[str, Any],
                                    llm: LLMServer, direct: OpenSearch) -> None:
    long_index = f"{setup['index']}-long"
    direct.indices.create(index=long_index)
    for i in range(6):
        direct.index(index=long_index, id=f"L{i}",
                     body={"title": "red shoes " + "very comfortable lace up design " * 60})
    direct.indices.refresh(index=long_index)
    config = api.srw("PUT", "/search_configurations", {
        "name": "long", "index": long_index,
        "query": '{"query":{"match":{"title":"%SearchText%"}}}'}).json["search_configuration_id"]
    query_set = api.srw("PUT", "/query_sets", {"name": "one", "querySetQueries": [
        {"queryText": "red shoes"}]}).json["query_set_id"]
    try:
        done = run(api, body(setup, querySetId=query_set, searchConfigurationList=[config],
                             size=6, tokenLimit=1000, overwriteCache=True))
        assert done["status"] == "COMPLETED"
        assert len(done["judgmentRatings"][0]["ratings"]) == 6
        assert len(llm.requests) >= 3  # ~400 tokens a hit, 1000 a prompt
        for request in llm.requests:
            assert count_tokens(messages_string(request.system, request.user)) <= 1002
    finally:
        direct.indices.delete(index=long_index)


def test_partial_answers_become_failures_then_retry_and_edit(
    api: Api, worker: Worker, setup: dict[str, Any], llm: LLMServer
) -> None:
    llm.partial(drop_fraction=0.5, times=3)
    done = run(api, body(setup, overwriteCache=True))
    assert done["status"] == "COMPLETED"
    failures = {e["query"]: [f["docId"] for f in e["failures"]]
                for e in done["judgmentRatings"] if "failures" in e}
    # a query the model answered only in part is a failed query (docs/contract.md, "LLM
    # judgments: failures"), counted, with the reason, so Dashboards offers Retry
    assert failures and done["metadata"]["failedQueries"] == len(failures)
    assert done["metadata"]["successfulQueries"] == 3 - len(failures)
    assert done["metadata"]["lastFailureReason"] == job.NOT_RATED
    for entry in done["judgmentRatings"]:
        rated = {r["docId"] for r in entry["ratings"]}
        assert not rated & set(failures.get(entry["query"], []))
    judgment_id = done["id"]

    calls = llm.calls
    started = api.srw("POST", f"/judgments/{judgment_id}/_retry")
    assert started.status == 200
    assert started.json == {"judgment_id": judgment_id, "status": "RETRYING",
                            "message": "Retrying failed documents"}
    deadline = time.monotonic() + 60
    while True:
        doc = api.srw("GET", f"/judgments/{judgment_id}").json["hits"]["hits"][0]["_source"]
        if doc["status"] != "RETRYING" or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert doc["status"] == "COMPLETED"
    assert all("failures" not in e for e in doc["judgmentRatings"])
    assert (doc["metadata"]["successfulQueries"], doc["metadata"]["failedQueries"]) == (3, 0)
    assert "lastFailureReason" not in doc["metadata"]
    assert llm.calls == calls + len(failures)
    for entry in doc["judgmentRatings"]:
        assert set(failures.get(entry["query"], [])) <= {r["docId"] for r in entry["ratings"]}
    api.srw("POST", f"/judgments/{judgment_id}/_retry").error(400, "No failed documents to retry")

    # Editing a rating by hand.
    query, doc_id = doc["judgmentRatings"][0]["query"], doc["judgmentRatings"][0]["ratings"][0][
        "docId"]
    edited = api.srw("PUT", f"/judgments/{judgment_id}", {"judgmentRatings": [
        {"query": query, "ratings": [{"docId": doc_id, "rating": "0.7"}]}]})
    assert edited.status == 200 and edited.json == {"judgment_id": judgment_id,
                                                    "result": "updated"}
    after = api.srw("GET", f"/judgments/{judgment_id}").json["hits"]["hits"][0]["_source"]
    assert after["judgmentRatings"][0]["ratings"][0] == {"docId": doc_id, "rating": "0.7"}
    for rating, reason in ((1.5, f"rating '1.5' for docId {doc_id} must be a number between 0 "
                                 "and 1 for a SCORE0_1 judgment"),
                           ("high", f"rating 'high' for docId {doc_id} must be a number "
                                    "for a SCORE0_1 judgment")):
        api.srw("PUT", f"/judgments/{judgment_id}", {"judgmentRatings": [
            {"query": query, "ratings": [{"docId": doc_id, "rating": rating}]}]}).error(
            400, reason)
    api.srw("PUT", f"/judgments/{judgment_id}", {"judgmentRatings": [
        {"query": "nope", "ratings": [{"docId": doc_id, "rating": 0.1}]}]}).error(
        404, "Query not found in judgment: nope")
    api.srw("PUT", f"/judgments/{judgment_id}", {"judgmentRatings": [
        {"query": query, "ratings": [{"docId": "zz", "rating": 0.1}]}]}).error(
        400, f"Document zz is not part of query [{query}] in this judgment")


def test_a_rating_off_the_scale_is_a_failure_with_its_reason_and_can_be_retried(
        api: Api, worker: Worker, setup: dict[str, Any], llm: LLMServer) -> None:
    """A model that answers 5 on a 0-1 scale (as SmolLM2 does) has that document listed in
    ``failures`` with why, never stored as a rating; ``_retry`` asks about it again."""
    answer = {"ratings": [{"id": f"{setup['index']}::{doc_id}",
                           "rating_score": 5 if doc_id == "p1" else 0.5}
                          for doc_id, *_ in PRODUCTS]}
    llm.reply_text(json.dumps(answer), times=3)
    done = run(api, body(setup, overwriteCache=True))
    assert done["status"] == "COMPLETED" and done["metadata"]["failedQueries"] == 1
    assert done["metadata"]["lastFailureReason"] == "rating_score 5 is outside the scale 0 to 1"
    entry = next(e for e in done["judgmentRatings"] if e["query"] == "red shoes")
    assert entry["failures"] == [
        {"docId": "p1", "reason": "rating_score 5 is outside the scale 0 to 1"}]
    assert "p1" not in {r["docId"] for r in entry["ratings"]}
    assert all(r["rating"] == "0.5" for e in done["judgmentRatings"] for r in e["ratings"])
    assert api.srw("POST", f"/judgments/{done['id']}/_retry").status == 200
    after = finished(api, f"/judgments/{done['id']}", 60)
    entry = next(e for e in after["judgmentRatings"] if e["query"] == "red shoes")
    assert "failures" not in entry and "p1" in {r["docId"] for r in entry["ratings"]}
    assert after["metadata"]["failedQueries"] == 0


def test_a_retry_that_fails_ends_error_with_its_reason_and_keeps_the_ratings(
        api: Api, worker: Worker, setup: dict[str, Any], llm: LLMServer,
        direct: OpenSearch) -> None:
    """A retry whose failed document was deleted from the index ends ERROR naming it; the
    judgment keeps every rating and failure it had (only status and metadata.error change)."""
    llm.partial(ids=["p1"], times=3)
    done = run(api, body(setup, overwriteCache=True))
    entry = next(e for e in done["judgmentRatings"] if e["query"] == "red shoes")
    assert entry["failures"] == [{"docId": "p1", "reason": job.NOT_RATED}]
    source = direct.get(index=setup["index"], id="p1")["_source"]
    direct.delete(index=setup["index"], id="p1", refresh=True)
    try:
        assert api.srw("POST", f"/judgments/{done['id']}/_retry").status == 200
        after = finished(api, f"/judgments/{done['id']}", 60)
    finally:
        direct.index(index=setup["index"], id="p1", body=source, refresh=True)
    assert after["status"] == "ERROR"
    assert after["metadata"]["error"] == (
        f"Cannot retry: document(s) no longer exist in index [{setup['index']}]: [p1]")
    assert after["judgmentRatings"] == done["judgmentRatings"]
    assert {k: v for k, v in after["metadata"].items() if k != "error"} == \
        {k: v for k, v in done["metadata"].items() if k != "error"}


def test_a_retry_cut_off_after_paid_calls_adds_them_to_the_usage(
        api: Api, worker: Worker, setup: dict[str, Any], llm: LLMServer) -> None:
    """A retry cancelled while its call is answered ends ERROR keeping the ratings, and
    ``metadata.usage`` is the first run's plus the retry's call (issue: usage on every
    ending)."""
    llm.partial(ids=["p1"], times=3)
    done = run(api, body(setup, overwriteCache=True))
    first = done["metadata"]["usage"]
    assert first["llmCalls"] == llm.calls > 0
    llm.latency = 1.5
    try:
        assert api.srw("POST", f"/judgments/{done['id']}/_retry").status == 200
        deadline = time.monotonic() + 30
        while llm.calls == first["llmCalls"]:  # the retry's call is received, not answered
            assert time.monotonic() < deadline, "the retry made no call"
            time.sleep(0.05)
        assert api.srw("POST", f"/judgments/{done['id']}/_cancel").status == 200
        after = finished(api, f"/judgments/{done['id']}", 60)
    finally:
        llm.latency = 0.0
    assert after["status"] == "ERROR" and after["metadata"]["error"] == "cancelled by the user"
    assert after["judgmentRatings"] == done["judgmentRatings"]
    usage = after["metadata"]["usage"]
    assert usage["llmCalls"] == llm.calls == first["llmCalls"] + 1
    assert usage["inputTokens"] > first["inputTokens"]
    assert usage["totalTokens"] == usage["inputTokens"] + usage["outputTokens"]


def test_edit_moves_a_failed_document_into_the_ratings(api: Api, worker: Worker,
                                                        setup: dict[str, Any],
                                                        llm: LLMServer) -> None:
    llm.partial(ids=["p1"], times=3)  # whichever call carries p1
    done = run(api, body(setup, overwriteCache=True))
    entry = next(e for e in done["judgmentRatings"] if e["query"] == "red shoes")
    assert entry["failures"] == [{"docId": "p1", "reason": job.NOT_RATED}]
    api.srw("PUT", f"/judgments/{done['id']}", {"judgmentRatings": [
        {"query": "red shoes", "ratings": [{"docId": "p1", "rating": 1}]}]})
    after = api.srw("GET", f"/judgments/{done['id']}").json["hits"]["hits"][0]["_source"]
    entry = next(e for e in after["judgmentRatings"] if e["query"] == "red shoes")
    # stored as sent, as the plugin does: 1 is "1"
    assert "failures" not in entry and {"docId": "p1", "rating": "1"} in entry["ratings"]


@pytest.mark.parametrize("ignore", [False, True])
def test_a_query_the_model_fails_on_is_kept_counted_and_retried(
        api: Api, worker: Worker, setup: dict[str, Any], llm: LLMServer, ignore: bool) -> None:
    """docs/contract.md, "LLM judgments: failures": a query whose answers cannot be read keeps
    its entry with every document sent under ``failures``, counts in ``failedQueries``, and
    the judgment ends COMPLETED whatever ``ignoreFailure`` says; ``_retry`` then rates exactly
    those documents and clears the counters."""
    two = api.srw("PUT", "/query_sets", {"name": "two", "querySetQueries": [
        {"queryText": "red shoes"}, {"queryText": "charging cable"}]}).json["query_set_id"]
    # Ratings of the second query are known already; only "red shoes" goes to the model,
    # which answers prose to both the structured call and the fallback.
    run(api, body(setup, querySetId=two, searchConfigurationList=setup["configs"][:1]))
    cached = run(api, body(setup, querySetId=two, searchConfigurationList=setup["configs"][:1]))
    assert cached["metadata"]["usage"]["llmCalls"] == 0
    known = {e["query"]: e["ratings"] for e in cached["judgmentRatings"]}
    # Cache writes do not refresh (lookups are real-time gets): refresh before searching it.
    api.call("POST", "/.plugins-search-relevance-judgment-cache/_refresh")
    api.call("POST", "/.plugins-search-relevance-judgment-cache/_delete_by_query",
             {"query": {"term": {"queryText": "red shoes"}}}, params={"refresh": "true"})
    llm.reply_text("Sorry, I cannot rate these documents.", times=2)
    done = run(api, body(setup, querySetId=two, searchConfigurationList=setup["configs"][:1],
                         ignoreFailure=ignore))
    reason = done["metadata"]["lastFailureReason"]
    assert reason.startswith(f"could not read the answer of model {JUDGE_MODEL}")
    assert done["status"] == "COMPLETED"
    assert "error" not in done["metadata"]
    assert {k: done["metadata"][k] for k in ("totalQueries", "successfulQueries",
                                             "failedQueries", "ignoreFailure")} == {
        "totalQueries": 2, "successfulQueries": 1, "failedQueries": 1, "ignoreFailure": ignore}
    sent = [r["docId"] for r in known["red shoes"]]  # the documents the model was asked about
    assert done["judgmentRatings"] == [
        {"query": "red shoes", "ratings": [],
         "failures": [{"docId": d, "reason": reason} for d in sent]},
        {"query": "charging cable", "ratings": known["charging cable"]}]
    if ignore:  # (once) an experiment on the list: its documents are unrated, with a warning
        experiment = api.srw("PUT", "/experiments", {
            "type": "POINTWISE_EVALUATION", "querySetId": two, "size": 3,
            "searchConfigurationList": setup["configs"][:1], "judgmentList": [done["id"]]})
        assert experiment.status == 200, experiment.data
        experiment_id = experiment.json["experiment_id"]
        assert finished(api, f"/experiments/{experiment_id}", 60)["status"] == "COMPLETED"
        summary = api.srw("GET", f"/experiments/{experiment_id}/_summary").json
        warning = next(w for w in summary["warnings"] if w["code"] == "judgment_failed_queries")
        assert warning == {
            "level": "warning", "code": "judgment_failed_queries", "judgmentId": done["id"],
            "failedQueries": 1, "lastFailureReason": reason,
            "message": f"judgment list [{done['name']}] failed on 1 of 2 queries (last reason: "
                       f"{reason}); the documents it left unrated count as unrated until "
                       "POST judgments/{id}/_retry rates them"}

    calls = llm.calls
    retry = api.srw("POST", f"/judgments/{done['id']}/_retry")
    assert retry.status == 200 and retry.json["status"] == "RETRYING"
    after = finished(api, f"/judgments/{done['id']}", 60)
    assert after["status"] == "COMPLETED"
    assert llm.calls == calls + 1  # one call: exactly the failed documents
    assert [r["docId"] for r in after["judgmentRatings"][0]["ratings"]] == sent
    assert "failures" not in after["judgmentRatings"][0]
    assert after["judgmentRatings"][1] == done["judgmentRatings"][1]
    assert (after["metadata"]["successfulQueries"], after["metadata"]["failedQueries"]) == (2, 0)
    assert "lastFailureReason" not in after["metadata"]


def test_a_judgment_made_before_the_policy_is_retried_for_the_queries_it_left_out(
        api: Api, worker: Worker, setup: dict[str, Any], llm: LLMServer,
        direct: OpenSearch) -> None:
    """A judgment written under the 3.6 policy (``ignoreFailure: true``) left its failed query
    out: ``_retry`` searches that query again with the judgment's configurations, rates it
    whole and puts its entry back in query-set order."""
    fresh = run(api, body(setup, searchConfigurationList=setup["configs"][:1]))
    entries = fresh["judgmentRatings"]
    keys = [e["query"] for e in entries]
    assert [k.split("#")[0] for k in keys] == ["red shoes", "wireless earbuds", "charging cable"]
    old = {**fresh, "judgmentRatings": [entries[0], entries[2]],  # "wireless earbuds" left out
           "metadata": {**fresh["metadata"], "ignoreFailure": True, "successfulQueries": 2,
                        "failedQueries": 1, "lastFailureReason": "an old failure"}}
    direct.index(index=JUDGMENT_INDEX, id=fresh["id"], body=old, refresh=True)
    calls = llm.calls
    retry = api.srw("POST", f"/judgments/{fresh['id']}/_retry")
    assert retry.status == 200, retry.data
    after = finished(api, f"/judgments/{fresh['id']}", 60)
    assert after["status"] == "COMPLETED"
    assert [e["query"] for e in after["judgmentRatings"]] == keys
    assert after["judgmentRatings"][1]["ratings"] == entries[1]["ratings"]  # the cache's
    assert llm.calls == calls  # rated before, so the judgment cache answered
    assert (after["metadata"]["successfulQueries"], after["metadata"]["failedQueries"]) == (3, 0)
    assert "lastFailureReason" not in after["metadata"]


def test_rate_limits_are_retried(api: Api, worker: Worker, setup: dict[str, Any],
                                 llm: LLMServer) -> None:
    llm.fail(429, times=2, retry_after=0.2)
    done = run(api, body(setup, overwriteCache=True))
    assert done["status"] == "COMPLETED"
    assert done["metadata"]["usage"]["llmCalls"] == 3  # the 429s were retried inside one call
    assert llm.calls == 5


def test_an_unreachable_llm_fails_every_query_with_a_readable_reason(api: Api, worker: Worker,
                                                           setup: dict[str, Any],
                                                           llm: LLMServer) -> None:
    llm.fail(503, times=100)
    done = run(api, body(setup, overwriteCache=True))
    # every call fails: every query is kept with all its documents under failures
    assert done["status"] == "COMPLETED"
    reason = done["metadata"]["lastFailureReason"]
    assert JUDGE_MODEL in reason and "503" in reason
    assert (done["metadata"]["successfulQueries"], done["metadata"]["failedQueries"]) == (0, 3)
    assert len(done["judgmentRatings"]) == 3
    for entry in done["judgmentRatings"]:
        assert entry["ratings"] == [] and entry["failures"]
        assert all(f["reason"] == reason for f in entry["failures"])
    # the model answers again: _retry rates every query (docs/contract.md, "Retry")
    llm.reset()
    started = api.srw("POST", f"/judgments/{done['id']}/_retry")
    assert started.status == 200, started.data
    deadline = time.monotonic() + 60
    while True:
        doc = api.srw("GET", f"/judgments/{done['id']}").json["hits"]["hits"][0]["_source"]
        if doc["status"] != "RETRYING" or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert doc["status"] == "COMPLETED"
    assert (doc["metadata"]["successfulQueries"], doc["metadata"]["failedQueries"]) == (3, 0)
    assert all(entry["ratings"] and "failures" not in entry for entry in doc["judgmentRatings"])


def test_model_unknown_to_workbench_and_cluster(api: Api, worker: Worker,
                                                setup: dict[str, Any]) -> None:
    done = run(api, body(setup, modelId="no-such-model", overwriteCache=True))
    assert done["status"] == "ERROR"
    assert "no-such-model" in done["metadata"]["lastFailureReason"]
    assert "ML Commons" in done["metadata"]["lastFailureReason"]


def test_existing_judgments_are_reused(api: Api, worker: Worker, setup: dict[str, Any],
                                       llm: LLMServer) -> None:
    titles_only = body(setup, searchConfigurationList=setup["configs"][:1], overwriteCache=True)
    first = run(api, titles_only)
    calls = llm.calls
    second = run(api, body(setup, existingJudgments=[first["id"]], overwriteCache=True))
    assert second["status"] == "COMPLETED"
    reused = sum(len(v) for v in ratings_of(first).values())
    assert second["metadata"]["usage"]["reusedRatings"] == reused
    assert second["metadata"]["existingJudgments"] == [first["id"]]
    for key, docs in ratings_of(first).items():
        assert ratings_of(second)[key].items() >= docs.items()
    sent = [json.loads(r.user.split("Hits: ", 1)[1]) for r in llm.requests[calls:]]
    sent_ids = {h["id"].split("::")[1] for hits in sent for h in hits}
    assert not sent_ids & {d for docs in ratings_of(first).values() for d in docs}


def test_keys_never_leave_the_workbench(api: Api, worker: Worker, server: Server,
                                        setup: dict[str, Any], llm: LLMServer) -> None:
    done = run(api, body(setup, overwriteCache=True))
    assert LLM_KEY not in json.dumps(done)
    models = api.call("POST", "/_plugins/_ml/models/_search", {"query": {"match_all": {}}})
    assert models.status == 200
    hit = next(h for h in models.json["hits"]["hits"] if h["_id"] == JUDGE_MODEL)
    assert hit["_source"]["algorithm"] == "REMOTE" and hit["_source"]["model_state"] == "DEPLOYED"
    assert hit["_source"]["name"] == "Test judge"
    assert LLM_KEY not in models.text and "TEST_LLM_KEY" not in models.text
    assert LLM_KEY not in worker.log() and LLM_KEY not in server.log()


@pytest.mark.parametrize("fields, status, reason", [
    ({"modelId": None}, 400, "modelId is required for LLM_JUDGMENT"),
    ({"tokenLimit": 999}, 400, "TokenLimit must be between 1000 and 500000, got: 999"),
    ({"tokenLimit": "500001"}, 400, "TokenLimit must be between 1000 and 500000, got: 500001"),
    ({"tokenLimit": "lots"}, 400, "Invalid tokenLimit value. Expected numeric value, got: lots"),
    ({"tokenLimit": True}, 400,
     "Invalid tokenLimit type. Expected numeric value or string, got: Boolean"),
    ({"tokenLimit": [1]}, 400,
     "Invalid tokenLimit type. Expected numeric value or string, got: ArrayList"),
    ({"promptTemplate": "x" * 10001}, 400,
     "Prompt template exceeds maximum length of 10000 characters"),
    ({"promptTemplate": "Query: {{queryText}}"}, 400,
     "Prompt template must include either {{hits}} or {{results}} placeholder to provide "
     "documents for rating. Example: 'Query: {{queryText}}\\n\\nDocuments: {{hits}}'"),
    ({"promptTemplate": "Docs: {{hits}}"}, 400,
     "Prompt template must include either {{queryText}} or {{searchText}} placeholder to "
     "provide the search query. Example: 'Query: {{queryText}}\\n\\nDocuments: {{hits}}'"),
    ({"llmJudgmentRatingType": "STARS"}, 400,
     "Invalid RatingType: 'STARS'. Valid values are: SCORE0_1, RELEVANT_IRRELEVANT"),
    ({"existingJudgments": ["a", "b", "c", "d", "e", "f"]}, 400,
     "Too many existing judgments referenced: 6. Maximum allowed is 5"),
    ({"querySetId": ""}, 400, "QuerySet ID cannot be null or empty"),
    ({"querySetId": "nope"}, 400, "QuerySet [nope] does not exist"),
    ({"searchConfigurationList": ["nope"]}, 400, "SearchConfiguration [nope] does not exist"),
    ({"searchConfigurationList": [""]}, 400, "SearchConfiguration ID cannot be null or empty"),
    ({"size": 0}, 400, "size must be a positive integer, got: 0"),
    ({"existingJudgments": ["no-such-judgment"]}, 400,  # plugin #528: 400, not 404
     "Existing judgment [no-such-judgment] does not exist"),
])
def test_llm_bad_input(api: Api, setup: dict[str, Any], fields: dict[str, Any], status: int,
                       reason: str) -> None:
    api.srw("PUT", "/judgments", body(setup, **fields)).error(status, reason)


def stored_judgment(direct: OpenSearch, judgment_type: str, metadata: dict[str, Any]) -> str:
    """A COMPLETED judgment written straight to the index, as another version left it."""
    judgment_id = str(uuid.uuid4())
    direct.index(index="search-relevance-judgment", id=judgment_id, refresh=True, body={
        "id": judgment_id, "timestamp": "2026-11-26T00:00:00.000Z", "name": "stored",
        "status": "COMPLETED", "type": judgment_type, "metadata": metadata,
        "judgmentRatings": [{"query": "red shoes", "ratings": [{"docId": "p1", "rating": "1.0"}]}]})
    return judgment_id


def test_which_existing_judgments_may_be_reused(api: Api, worker: Worker,
                                                setup: dict[str, Any],
                                                direct: OpenSearch) -> None:
    """The plugin's rules and exact 400s for ``existingJudgments`` (its pull request #528),
    checked in its order: the judgment exists, records its configurations, rates on a known
    scale and the same one, and its configurations resolve to indices that include all of the
    request's. The workbench adds a refusal of its own reference judgments."""
    titles, descriptions = setup["configs"]
    index = setup["index"]

    def refused(existing: str, message: str, **fields: Any) -> None:
        api.srw("PUT", "/judgments", body(setup, existingJudgments=[existing], **fields)).error(
            400, message)

    imported = api.srw("PUT", "/judgments", {"name": "imp", "type": "IMPORT_JUDGMENT",
                                             "judgmentRatings": []}).json["judgment_id"]
    refused(imported, f"Existing judgment [{imported}] does not record its target index (no "
                      "search configurations) and cannot be reused")
    stars = stored_judgment(direct, "LLM_JUDGMENT", {"searchConfigurationList": [titles],
                                                     "llmJudgmentRatingType": "STARS"})
    refused(stars, f"Existing judgment [{stars}] records an unrecognized rating type [STARS] "
                   "and cannot be reused")
    binary = stored_judgment(direct, "LLM_JUDGMENT", {
        "searchConfigurationList": [titles], "llmJudgmentRatingType": "RELEVANT_IRRELEVANT"})
    refused(binary, f"Existing judgment [{binary}] uses rating type RELEVANT_IRRELEVANT and "
                    "cannot be reused in a SCORE0_1 judgment; the rating scales are not "
                    "comparable")
    # no rating type recorded: the plugin's default, SCORE0_1
    untyped = stored_judgment(direct, "LLM_JUDGMENT", {"searchConfigurationList": [titles]})
    refused(untyped, f"Existing judgment [{untyped}] uses rating type SCORE0_1 and cannot be "
                     "reused in a RELEVANT_IRRELEVANT judgment; the rating scales are not "
                     "comparable", llmJudgmentRatingType="RELEVANT_IRRELEVANT")
    gone = stored_judgment(direct, "LLM_JUDGMENT", {"searchConfigurationList": ["gone-config"]})
    refused(gone, "Search configuration [gone-config] could not be resolved to a target index")
    reference = stored_judgment(direct, "REFERENCE_JUDGMENT", {
        "searchConfigurationList": [titles], "judge": "token_overlap"})
    refused(reference, f"Existing judgment [{reference}] is of type REFERENCE_JUDGMENT and "
                       "cannot be reused; only LLM_JUDGMENT judgments can")

    other = f"{index}-other"
    direct.indices.create(index=other)
    try:
        elsewhere = api.srw("PUT", "/search_configurations", {
            "name": "other", "index": other,
            "query": '{"query":{"match":{"title":"%SearchText%"}}}'}).json[
            "search_configuration_id"]
        narrow = stored_judgment(direct, "LLM_JUDGMENT", {"searchConfigurationList": [titles]})
        wide = stored_judgment(direct, "LLM_JUDGMENT", {
            "searchConfigurationList": [titles, elsewhere]})
        # a superset of the request's indices may be reused ...
        accepted = api.srw("PUT", "/judgments", body(
            setup, searchConfigurationList=[titles, descriptions], existingJudgments=[wide]))
        assert accepted.status == 200, accepted.data
        done = finished(api, f"/judgments/{accepted.json['judgment_id']}", 120)
        assert done["status"] == "COMPLETED" and done["metadata"]["usage"]["reusedRatings"] == 1
        # ... a subset may not, nor another index
        refused(narrow, f"Existing judgment [{narrow}] was generated for a different target "
                        f"index and cannot be reused. Requested index(es): [{index}, {other}], "
                        f"existing judgment index(es): [{index}]",
                searchConfigurationList=[titles, elsewhere])
        only_other = stored_judgment(direct, "LLM_JUDGMENT", {
            "searchConfigurationList": [elsewhere]})
        refused(only_other, f"Existing judgment [{only_other}] was generated for a different "
                            f"target index and cannot be reused. Requested index(es): [{index}],"
                            f" existing judgment index(es): [{other}]")
    finally:
        direct.indices.delete(index=other)


def test_retry_refusals(api: Api, worker: Worker, setup: dict[str, Any], llm: LLMServer,
                        direct: OpenSearch) -> None:
    llm.latency = 1.5
    try:
        reply = api.srw("PUT", "/judgments", body(setup, overwriteCache=True))
        judgment_id = reply.json["judgment_id"]
        api.srw("POST", f"/judgments/{judgment_id}/_retry").error(
            409, "Cannot retry a judgment whose initial generation is still PROCESSING")
        api.srw("PUT", f"/judgments/{judgment_id}", {"judgmentRatings": [
            {"query": "q", "ratings": [{"docId": "d", "rating": 1}]}]}).error(
            409, "Judgment is currently PROCESSING; cannot edit ratings until it completes")
    finally:
        llm.latency = 0
    stuck = str(uuid.uuid4())
    direct.index(index="search-relevance-judgment", id=stuck, refresh=True, body={
        "id": stuck, "timestamp": time.strftime("%Y-%m-%dT%H:%M:%S.000Z", time.gmtime()),
        "name": "x", "status": "RETRYING", "type": "LLM_JUDGMENT", "metadata": {"a": 1},
        "judgmentRatings": [{"query": "q", "ratings": [], "failures": [{"docId": "d"}]}]})
    api.srw("POST", f"/judgments/{stuck}/_retry").error(
        409, "A retry is already in progress for this judgment")
    plain = str(uuid.uuid4())
    direct.index(index="search-relevance-judgment", id=plain, refresh=True, body={
        "id": plain, "timestamp": "2020-01-01T00:00:00.000Z", "name": "x", "status": "ERROR",
        "type": "LLM_JUDGMENT", "metadata": {"error": "x"}, "judgmentRatings": []})
    api.srw("POST", f"/judgments/{plain}/_retry").error(400, "No judgment ratings found")
    bare = str(uuid.uuid4())
    direct.index(index="search-relevance-judgment", id=bare, refresh=True, body={
        "id": bare, "timestamp": "2020-01-01T00:00:00.000Z", "name": "x", "status": "ERROR",
        "type": "LLM_JUDGMENT", "metadata": {"error": "x"},
        "judgmentRatings": [{"query": "q", "ratings": [], "failures": [{"docId": "d"}]}]})
    api.srw("POST", f"/judgments/{bare}/_retry").error(
        400, "Judgment metadata names no searchConfigurationList to retry with")
    for leftover in (stuck, plain, bare):  # a RETRYING one would be taken up by a sweeper
        direct.delete(index="search-relevance-judgment", id=leftover, refresh=True)


def test_a_killed_worker_process_redelivers_the_job(api: Api, worker: Worker,
                                                     setup: dict[str, Any],
                                                     llm: LLMServer) -> None:
    llm.latency = 2.0
    try:
        reply = api.srw("PUT", "/judgments", body(setup, overwriteCache=True))
        judgment_id = reply.json["judgment_id"]
        deadline = time.monotonic() + 30
        while llm.calls == 0 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert llm.calls >= 1
        for pid in worker.pool_pids():
            psutil.Process(pid).send_signal(signal.SIGKILL)  # the job dies mid-call
    finally:
        llm.latency = 0.0
    doc = finished(api, f"/judgments/{judgment_id}", 120, running=("PROCESSING",),
                   interval=0.3)
    assert doc["status"] == "COMPLETED", doc["metadata"]
    assert doc["metadata"]["successfulQueries"] == 3
