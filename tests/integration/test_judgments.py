"""Judgments end to end over HTTP with a real worker: IMPORT, UBI (COEC, PBM), the shared routes."""

from __future__ import annotations

import json
import time
import uuid
from collections import Counter, defaultdict
from datetime import UTC, date, datetime
from decimal import ROUND_HALF_UP, Decimal
from typing import Any

import pytest
from opensearchpy import OpenSearch

from tests.support.api import Api
from tests.support.data import ESCI, REPO
from tests.support.processes import Worker
from tests.support.waiting import finished
from workbench.store.repository import now_iso

INDEX = "search-relevance-judgment"
EXPERIMENTS = ".plugins-search-relevance-experiment"


def wait_done(api: Api, judgment_id: str, timeout: float = 120) -> dict[str, Any]:
    return finished(api, f"/judgments/{judgment_id}", timeout)


def create(api: Api, body: dict[str, Any]) -> str:
    reply = api.srw("PUT", "/judgments", {"name": f"j-{uuid.uuid4().hex[:8]}", **body})
    assert reply.status == 200, reply.data
    assert list(reply.json) == ["judgment_id"]
    return str(reply.json["judgment_id"])


def as_map(ratings: list[dict[str, Any]]) -> dict[str, dict[str, str]]:
    return {e["query"]: {r["docId"]: r["rating"] for r in e["ratings"]} for e in ratings}


# -- IMPORT ---------------------------------------------------------------------------------------

def test_esci_import(api: Api, worker: Worker) -> None:
    body = json.loads((ESCI / "esci_us_judgments.json").read_text())
    path = "/stats/import_judgment_rating_generations"
    before = api.srw("GET", path).json["all_nodes"]["judgments"]
    started = time.monotonic()
    judgment_id = create(api, body)
    first = api.srw("GET", f"/judgments/{judgment_id}").json["hits"]["hits"][0]["_source"]
    assert first["status"] in ("PROCESSING", "COMPLETED")
    done = wait_done(api, judgment_id)
    elapsed = time.monotonic() - started
    assert done["status"] == "COMPLETED", done.get("metadata")
    assert done["type"] == "IMPORT_JUDGMENT"
    assert done["metadata"] == {}
    assert "description" not in done
    ratings = done["judgmentRatings"]
    assert len(ratings) == 150
    assert sum(len(e["ratings"]) for e in ratings) == 6678
    values = Counter(r["rating"] for e in ratings for r in e["ratings"])
    assert values == {"100.000": 3389, "10.000": 1898, "1.000": 305, "0.000": 1086}
    assert [e["query"] for e in ratings] == [e["query"] for e in body["judgmentRatings"]]
    after = api.srw("GET", path).json["all_nodes"]["judgments"]
    assert after["import_judgment_rating_generations"] == \
        before["import_judgment_rating_generations"] + 1
    print(f"\nESCI import (150 queries, 6,678 ratings) completed in {elapsed:.2f}s")
    assert elapsed < 30


def test_import_numbers_strings_duplicates_and_repeated_queries(api: Api, worker: Worker) -> None:
    judgment_id = create(api, {"type": "IMPORT_JUDGMENT", "judgmentRatings": [
        {"query": "red shoes", "ratings": [{"docId": "B1", "rating": "3"},
                                           {"docId": "B2", "rating": 0.5},
                                           {"docId": "B3", "rating": 1},
                                           {"docId": "B4", "rating": 1.0},
                                           {"docId": "B1", "rating": "2.5"}]},
        {"query": 12, "ratings": [{"docId": 7, "rating": " 1e1 "}]},
        {"query": "red shoes", "ratings": [{"docId": "B9", "rating": "0"}]},
    ]})
    done = wait_done(api, judgment_id)
    assert done["status"] == "COMPLETED"
    assert done["judgmentRatings"] == [
        {"query": "red shoes", "ratings": [{"docId": "B1", "rating": "2.5"},
                                           {"docId": "B2", "rating": "0.5"},
                                           {"docId": "B3", "rating": "1"},
                                           {"docId": "B4", "rating": "1.0"}]},
        {"query": "12", "ratings": [{"docId": "7", "rating": " 1e1 "}]},
        {"query": "red shoes", "ratings": [{"docId": "B9", "rating": "0"}]},
    ]


@pytest.mark.parametrize("ratings, reason", [
    ([{"query": "q", "ratings": "nope"}], "queryText q must have a list of rating data."),
    ([{"query": "q"}], "queryText q must have a list of rating data."),
    ([{"query": "q", "ratings": [{"docId": "", "rating": "1"}]}],
     "docId for queryText q must not be null or empty"),
    ([{"query": "q", "ratings": [{"rating": "1"}]}],
     "docId for queryText q must not be null or empty"),
    ([{"query": "q", "ratings": [{"docId": "d"}]}], "rating for queryText q must not be null"),
    ([{"query": "q", "ratings": [{"docId": "d", "rating": "high"}]}],
     "rating 'high' for queryText q must be a valid float"),
    ([{"query": "q", "ratings": [{"docId": "d", "rating": "NaN"}]}],
     "rating 'NaN' for queryText q must be a valid float"),
    ([{"query": "q", "ratings": [{"docId": "d", "rating": "Infinity"}]}],
     "rating 'Infinity' for queryText q must be a valid float"),
    ([{"query": "q", "ratings": [{"docId": "d", "rating": True}]}],
     "rating 'true' for queryText q must be a valid float"),
    (None, "judgmentRatings is required for IMPORT_JUDGMENT"),
])
def test_import_bad_input(api: Api, direct: OpenSearch, ratings: Any, reason: str) -> None:
    before = direct.count(index=INDEX)["count"]
    body = {"name": "bad", "type": "IMPORT_JUDGMENT"}
    if ratings is not None:
        body["judgmentRatings"] = ratings
    api.srw("PUT", "/judgments", body).error(400, reason)
    assert direct.count(index=INDEX)["count"] == before


@pytest.mark.parametrize("body, reason", [
    ({"name": "x"}, "Invalid or missing judgment type"),
    ({"name": "x", "type": "CLICK_JUDGMENT"}, "Invalid or missing judgment type"),
    ({"type": "IMPORT_JUDGMENT", "judgmentRatings": []}, "Invalid name: Text cannot be null"),
    ({"name": "n" * 51, "type": "IMPORT_JUDGMENT", "judgmentRatings": []},
     "Invalid name: Text exceeds maximum length of 50 characters"),
    ({"name": "x", "description": "d" * 251, "type": "IMPORT_JUDGMENT", "judgmentRatings": []},
     "Invalid description: Text exceeds maximum length of 250 characters"),
])
def test_common_bad_input(api: Api, body: dict[str, Any], reason: str) -> None:
    api.srw("PUT", "/judgments", body).error(400, reason)


# -- routes ---------------------------------------------------------------------------------------

def test_list_status_filter_search_and_get(api: Api, worker: Worker,
                                           direct: OpenSearch) -> None:
    done_id = create(api, {"type": "IMPORT_JUDGMENT", "judgmentRatings": [
        {"query": "q", "ratings": [{"docId": "d", "rating": "1"}]}]})
    wait_done(api, done_id)
    stuck_id = str(uuid.uuid4())
    # Written now: the list is the newest 1,000 by timestamp, and a node that has served many
    # runs holds more judgments than that.
    direct.index(index=INDEX, id=stuck_id, refresh=True, body={
        "id": stuck_id, "timestamp": now_iso(), "name": "stuck",
        "status": "ERROR", "type": "IMPORT_JUDGMENT", "metadata": {"error": "x"},
        "judgmentRatings": []})

    listed = api.srw("GET", "/judgments").json["hits"]["hits"]
    ids = [h["_id"] for h in listed]
    assert done_id in ids and stuck_id in ids
    mine = next(h for h in listed if h["_id"] == done_id)["_source"]
    assert mine["judgmentRatings"] == [{"query": "q"}]  # ratings excluded from lists

    completed = api.srw("GET", "/judgments", params={"status": "completed"}).json["hits"]["hits"]
    assert done_id in [h["_id"] for h in completed]
    assert all(h["_source"]["status"] == "COMPLETED" for h in completed)
    errors = api.srw("GET", "/judgments", params={"status": "ERROR"}).json["hits"]["hits"]
    assert stuck_id in [h["_id"] for h in errors] and done_id not in [h["_id"] for h in errors]

    searched = api.srw("POST", "/judgments/_search",
                       {"query": {"ids": {"values": [done_id]}}}).json["hits"]["hits"]
    assert searched[0]["_source"]["judgmentRatings"] == [{"query": "q"}]
    full = api.srw("POST", "/judgments/_search",
                   {"query": {"ids": {"values": [done_id]}}, "_source": True}).json
    assert full["hits"]["hits"][0]["_source"]["judgmentRatings"][0]["ratings"] == [
        {"docId": "d", "rating": "1"}]
    one = api.srw("GET", f"/judgments/{done_id}").json["hits"]["hits"][0]["_source"]
    assert one["judgmentRatings"][0]["ratings"] == [{"docId": "d", "rating": "1"}]


def test_delete_and_the_experiment_guard(api: Api, worker: Worker, direct: OpenSearch) -> None:
    judgment_id = create(api, {"type": "IMPORT_JUDGMENT", "judgmentRatings": []})
    wait_done(api, judgment_id)
    exp_id = str(uuid.uuid4())
    direct.index(index=EXPERIMENTS, id=exp_id, refresh=True,
                 body={"id": exp_id, "judgmentList": [judgment_id]})
    try:
        api.srw("DELETE", f"/judgments/{judgment_id}").error(
            409, "judgement cannot be deleted as it is currently used by experiments with ids "
                 f"{exp_id}")
    finally:
        direct.delete(index=EXPERIMENTS, id=exp_id, refresh=True)
    deleted = api.srw("DELETE", f"/judgments/{judgment_id}")
    assert deleted.status == 200 and deleted.json["result"] == "deleted"
    api.srw("GET", f"/judgments/{judgment_id}").error(404, f"Document not found: {judgment_id}")


def test_retry_and_edit_refuse_other_types(api: Api, worker: Worker) -> None:
    judgment_id = create(api, {"type": "IMPORT_JUDGMENT", "judgmentRatings": [
        {"query": "q", "ratings": [{"docId": "d", "rating": "1"}]}]})
    wait_done(api, judgment_id)
    api.srw("POST", f"/judgments/{judgment_id}/_retry").error(
        400, "Retry is only supported for LLM_JUDGMENT type")
    api.srw("PUT", f"/judgments/{judgment_id}", {"judgmentRatings": [
        {"query": "q", "ratings": [{"docId": "d", "rating": 0.5}]}]}).error(
        400, "Rating update is only supported for LLM_JUDGMENT type", PLUGIN_ERROR)
    missing = str(uuid.uuid4())
    api.srw("POST", f"/judgments/{missing}/_retry").error(404, f"Judgment not found: {missing}")
    api.srw("PUT", f"/judgments/{missing}", {"judgmentRatings": [
        {"query": "q", "ratings": [{"docId": "d", "rating": 0.5}]}]}).error(
        404, f"Judgment not found: {missing}", PLUGIN_ERROR)


# -- PUT /judgments/{id}: editing the ratings of an LLM judgment, as the plugin (3.9) does ---------

PLUGIN_ERROR = "search_relevance_exception"


def stored_llm_judgment(direct: OpenSearch, **fields: Any) -> str:
    """An LLM judgment as its job leaves it, written directly (no model needed): query ``q``
    with documents ``a``-``d`` rated and ``e`` failed, made in 2020."""
    judgment_id = str(uuid.uuid4())
    doc = {"id": judgment_id, "timestamp": "2020-01-01T00:00:00.000Z", "name": "edit me",
           "status": "COMPLETED", "type": "LLM_JUDGMENT",
           "metadata": {"llmJudgmentRatingType": "SCORE0_1", "totalQueries": 2,
                        "successfulQueries": 1, "failedQueries": 1,
                        "lastFailureReason": "not rated"},
           "judgmentRatings": [
               {"query": "q", "ratings": [{"docId": d, "rating": "0.0"} for d in "abcd"],
                "failures": [{"docId": "e", "reason": "not rated"}]},
               {"query": "r", "ratings": [{"docId": "a", "rating": "0.5"}]}]}
    doc.update(fields)
    doc = {k: v for k, v in doc.items() if v is not None}
    direct.index(index=INDEX, id=judgment_id, body=doc, refresh=True)
    return judgment_id


def edit(api: Api, judgment_id: str, *entries: tuple[str, list[tuple[str, Any]]]) -> Any:
    return api.srw("PUT", f"/judgments/{judgment_id}", {"judgmentRatings": [
        {"query": query, "ratings": [{"docId": d, "rating": v} for d, v in ratings]}
        for query, ratings in entries]})


def source(api: Api, judgment_id: str) -> dict[str, Any]:
    return dict(api.srw("GET", f"/judgments/{judgment_id}").json["hits"]["hits"][0]["_source"])


def test_an_edit_stores_each_rating_as_sent_and_dates_the_judgment_anew(
        api: Api, direct: OpenSearch) -> None:
    """(a) a new timestamp: the edited judgment is listed before one made after it; (b) each
    rating as the plugin reads it from the body: ``1`` is ``"1"``, ``1.0`` is ``"1.0"``."""
    edited = stored_llm_judgment(direct)
    later = stored_llm_judgment(direct, timestamp=now_iso())
    before = datetime.now(UTC)
    reply = edit(api, edited, ("q", [("a", 1), ("b", 1.0), ("c", "1"), ("d", 0.5),
                                     ("e", " 1 ")]))
    assert (reply.status, reply.json) == (200, {"judgment_id": edited, "result": "updated"})
    after = source(api, edited)
    assert after["judgmentRatings"][0] == {"query": "q", "ratings": [
        {"docId": "a", "rating": "1"}, {"docId": "b", "rating": "1.0"},
        {"docId": "c", "rating": "1"}, {"docId": "d", "rating": "0.5"},
        {"docId": "e", "rating": " 1 "}]}
    stamped = datetime.strptime(after["timestamp"], "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=UTC)
    assert before.replace(microsecond=before.microsecond // 1000 * 1000) <= stamped \
        <= datetime.now(UTC)
    assert (after["status"], after["metadata"]["failedQueries"]) == ("COMPLETED", 0)
    listed = [h["_id"] for h in api.srw("GET", "/judgments").json["hits"]["hits"]]
    assert listed.index(edited) < listed.index(later)


def test_every_rating_is_checked_against_the_scale_before_any_lookup(
        api: Api, direct: OpenSearch) -> None:
    """(c) a rating off the scale is the 400 even when an earlier edit names a query or a
    document the judgment lacks; (d) the message names the judgment's scale."""
    judgment_id = stored_llm_judgment(direct)
    edit(api, judgment_id, ("nope", [("a", 0.5)]), ("q", [("a", 2)])).error(
        400, "rating '2' for docId a must be a number between 0 and 1 for a SCORE0_1 judgment",
        PLUGIN_ERROR)
    edit(api, judgment_id, ("q", [("zz", 0.5), ("a", "x")])).error(
        400, "rating 'x' for docId a must be a number for a SCORE0_1 judgment", PLUGIN_ERROR)
    edit(api, judgment_id, ("nope", [("a", "NaN")])).error(
        400, "rating 'NaN' for docId a must be a number between 0 and 1 for a SCORE0_1 "
             "judgment", PLUGIN_ERROR)
    binary = stored_llm_judgment(direct, metadata={"llmJudgmentRatingType":
                                                   "RELEVANT_IRRELEVANT"})
    edit(api, binary, ("nope", [("a", 0.5)])).error(
        400, "rating '0.5' for docId a must be 0 or 1 for a RELEVANT_IRRELEVANT judgment",
        PLUGIN_ERROR)
    edit(api, binary, ("q", [("a", True)])).error(
        400, "rating 'true' for docId a must be a number for a RELEVANT_IRRELEVANT judgment",
        PLUGIN_ERROR)
    # only then the lookups
    edit(api, binary, ("nope", [("a", "1d")])).error(
        404, "Query not found in judgment: nope", PLUGIN_ERROR)
    edit(api, binary, ("q", [("zz", 0)])).error(
        400, "Document zz is not part of query [q] in this judgment", PLUGIN_ERROR)
    assert source(api, binary)["timestamp"] == "2020-01-01T00:00:00.000Z"  # nothing written


def test_an_unrecognized_rating_type_is_refused(api: Api, direct: OpenSearch) -> None:
    """(e) a stored rating type that names no scale is the plugin's 400, with its cause; a
    judgment that records none is SCORE0_1."""
    judgment_id = stored_llm_judgment(direct, metadata={"llmJudgmentRatingType": "GRADED"})
    reply = edit(api, judgment_id, ("q", [("a", 0.5)]))
    reason = "Judgment records an unrecognized rating type [GRADED]; cannot edit ratings"
    assert reply.status == 400
    assert reply.json == {"error": {
        "root_cause": [{"type": PLUGIN_ERROR, "reason": reason}],
        "type": PLUGIN_ERROR, "reason": reason,
        "caused_by": {"type": "illegal_argument_exception", "reason": "No enum constant "
                      "org.opensearch.searchrelevance.model.LLMJudgmentRatingType.GRADED"}},
        "status": 400}
    unrecorded = stored_llm_judgment(direct, metadata={"totalQueries": 2})
    edit(api, unrecorded, ("q", [("a", 2)])).error(
        400, "rating '2' for docId a must be a number between 0 and 1 for a SCORE0_1 judgment",
        PLUGIN_ERROR)
    assert edit(api, unrecorded, ("q", [("a", "0.25")])).status == 200


def test_a_judgment_without_ratings(api: Api, direct: OpenSearch) -> None:
    """(f) no ``judgmentRatings`` at all is the plugin's 400 (after the scale check); an empty
    list is a judgment without that query (404), as in the plugin."""
    none = stored_llm_judgment(direct, judgmentRatings=None)
    edit(api, none, ("q", [("a", 0.5)])).error(
        400, "Judgment has no ratings to update", PLUGIN_ERROR)
    edit(api, none, ("q", [("a", 5)])).error(
        400, "rating '5' for docId a must be a number between 0 and 1 for a SCORE0_1 judgment",
        PLUGIN_ERROR)
    empty = stored_llm_judgment(direct, judgmentRatings=[])
    edit(api, empty, ("q", [("a", 0.5)])).error(
        404, "Query not found in judgment: q", PLUGIN_ERROR)


@pytest.mark.parametrize(("ratings", "reason"), [
    (None, "judgmentRatings is required"),
    ([{"query": "q"}], "each entry must have a ratings list"),
    ([{"query": "q", "ratings": [7]}], "expected a list of {query, ratings:[{docId, rating}]} "
                                       "objects"),
    ([{"query": "q", "ratings": []}], "at least one rating is required"),
    ([{"query": " ", "ratings": [{"docId": "a", "rating": 1}]}],
     "each rating must have a query, docId and rating"),
])
def test_a_body_of_the_wrong_shape_is_the_plugins_text_400(
        api: Api, direct: OpenSearch, ratings: Any, reason: str) -> None:
    """The plugin's REST handler answers these as a bare text/plain 400, before the judgment
    is read."""
    judgment_id = stored_llm_judgment(direct)
    reply = api.srw("PUT", f"/judgments/{judgment_id}",
                    {} if ratings is None else {"judgmentRatings": ratings})
    assert (reply.status, reply.data.decode()) == (400, reason)
    assert reply.headers["Content-Type"] == "text/plain; charset=UTF-8"


def test_a_concurrent_write_is_the_clusters_version_conflict(
        env: dict[str, str], direct: OpenSearch, monkeypatch: pytest.MonkeyPatch) -> None:
    """(g) the judgment changes between the edit's read and its write (a retry starts, another
    edit lands): the answer is OpenSearch's own 409, as the plugin passes it on, with the
    index by its SRW name; the other write stays. The app runs in this process, on the real
    cluster, so the other write can be made exactly between the two."""
    from workbench.app import create_app
    from workbench.config import Config
    from workbench.store.repository import Repository

    judgment_id = stored_llm_judgment(direct)
    read = Repository.get_hit
    seen: dict[str, Any] = {}

    def read_then_changed(self: Repository, doc_id: str) -> Any:
        hit = read(self, doc_id)
        if doc_id == judgment_id and not seen:
            seen["read"] = hit
            seen["changed"] = direct.update(index=INDEX, id=judgment_id, refresh=True,
                                            body={"doc": {"status": "RETRYING"}})
        return hit

    monkeypatch.setattr(Repository, "get_hit", read_then_changed)
    client = create_app(Config.from_env(env)).test_client()
    reply = client.put(f"/_plugins/_search_relevance/judgments/{judgment_id}", json={
        "judgmentRatings": [{"query": "q", "ratings": [{"docId": "a", "rating": 1}]}]})
    assert reply.status_code == 409, reply.data
    read_at, now_at = seen["read"], seen["changed"]
    reason = (f"[{judgment_id}]: version conflict, required seqNo [{read_at['_seq_no']}], "
              f"primary term [{read_at['_primary_term']}]. current document has seqNo "
              f"[{now_at['_seq_no']}] and primary term [{now_at['_primary_term']}]")
    body = reply.get_json()
    assert body["status"] == 409
    for error in (body["error"], body["error"]["root_cause"][0]):
        assert (error["type"], error["reason"], error["index"]) == (
            "version_conflict_engine_exception", reason, INDEX)
    stored = direct.get(index=INDEX, id=judgment_id)["_source"]
    assert stored["status"] == "RETRYING"
    assert stored["judgmentRatings"][0]["ratings"][0] == {"docId": "a", "rating": "0.0"}


# -- UBI: COEC and PBM against an independent computation from the raw events ------------------

def raw_events() -> list[dict[str, Any]]:
    events = []
    with (ESCI / "ubi_queries_events.ndjson").open() as lines:
        for action_line in lines:
            action = json.loads(action_line)
            doc = json.loads(next(lines))
            if action["index"]["_index"] == "ubi_events":
                events.append(doc)
    return events


def event_day(doc: dict[str, Any]) -> date | None:
    stamp = doc.get("timestamp")
    if isinstance(stamp, (int, float)):
        return datetime.fromtimestamp(stamp / 1000, UTC).date()
    if isinstance(stamp, str):
        return datetime.fromisoformat(stamp.replace("Z", "+00:00")).astimezone(UTC).date()
    return None


def filtered(max_rank: int, start: str | None, end: str | None) -> list[dict[str, Any]]:
    out = []
    for doc in raw_events():
        ordinal = ((doc.get("event_attributes") or {}).get("position") or {}).get("ordinal")
        if ordinal is None or ordinal > max_rank:
            continue
        day = event_day(doc)
        if (start or end) and day is None:
            continue
        if start and day < date.fromisoformat(start):
            continue
        if end and day > date.fromisoformat(end):
            continue
        out.append(doc)
    return out


def three_decimals(x: float) -> str:
    return str(Decimal(repr(x)).quantize(Decimal("0.001"), rounding=ROUND_HALF_UP))


def expected_coec(max_rank: int, start: str | None = None,
                  end: str | None = None) -> dict[str, dict[str, str]]:
    """COEC written out in plain Python over every raw event (the plugin's scroll approach)."""
    events = filtered(max_rank, start, end)
    per_action: dict[str, Counter[int]] = defaultdict(Counter)
    for doc in events:
        per_action[doc["action_name"].lower()][doc["event_attributes"]["position"]["ordinal"]] += 1
    def top(counter: Counter[int]) -> dict[int, int]:  # the positions terms agg, size maxRank
        return dict(sorted(counter.items(), key=lambda kv: (-kv[1], kv[0]))[:max_rank])
    clicks_at, shown_at = top(per_action["click"]), top(per_action["impression"])
    ctr = [clicks_at.get(r, 0) / shown_at[r] if shown_at.get(r) else 0.0
           for r in range(max_rank)]
    pairs: dict[tuple[str, str], list[float]] = {}
    for doc in events:
        attrs = doc.get("event_attributes") or {}
        object_id = (attrs.get("object") or {}).get("object_id")
        if doc.get("user_query") is None or object_id is None:
            continue
        entry = pairs.setdefault((doc["user_query"], object_id), [0, 0, float("inf")])
        action = doc["action_name"].lower()
        if action in ("click", "impression"):
            entry[0 if action == "click" else 1] += 1
            entry[2] = min(entry[2], attrs["position"]["ordinal"])
    out: dict[str, dict[str, str]] = defaultdict(dict)
    for (query, doc_id), (clicks, shown, rank) in pairs.items():
        rate = ctr[int(rank)] if rank < max_rank else 0.0
        expected = rate * shown
        out[query][doc_id] = three_decimals(clicks / expected if expected > 0 else 0.0)
    return dict(out)


@pytest.mark.parametrize("max_rank, start, end", [
    (20, None, None), (3, None, None), (10, "2024-12-11", "2025-02-01")])
def test_coec_equals_an_independent_computation(api: Api, worker: Worker, ubi_data: None,
                                                max_rank: int, start: str | None,
                                                end: str | None) -> None:
    body: dict[str, Any] = {"type": "UBI_JUDGMENT", "clickModel": "COEC", "maxRank": max_rank}
    if start:
        body.update(startDate=start, endDate=end)
    done = wait_done(api, create(api, body))
    assert done["status"] == "COMPLETED", done["metadata"]
    assert done["metadata"] == {"clickModel": "COEC", "maxRank": max_rank,
                                "startDate": start or "", "endDate": end or "",
                                "ubiEventsIndex": "ubi_events"}
    got = as_map(done["judgmentRatings"])
    want = expected_coec(max_rank, start, end)
    assert got == want
    assert len(got) > 50  # every query is saved, not only the first
    assert any(r != "0.000" for doc in got.values() for r in doc.values())


def test_pbm_matches_an_independent_em(api: Api, worker: Worker, ubi_data: None) -> None:
    max_rank = 20
    done = wait_done(api, create(api, {"type": "UBI_JUDGMENT", "clickModel": "pbm",
                                       "maxRank": max_rank}))
    assert done["status"] == "COMPLETED", done["metadata"]
    got = as_map(done["judgmentRatings"])
    # Independent PBM: EM over per (query, doc, rank) counts, plain Python loops.
    cells: dict[tuple[str, str, int], list[int]] = defaultdict(lambda: [0, 0])
    pairs: set[tuple[str, str]] = set()
    for doc in filtered(max_rank, None, None):
        attrs = doc.get("event_attributes") or {}
        object_id = (attrs.get("object") or {}).get("object_id")
        if doc.get("user_query") is None or object_id is None:
            continue
        pairs.add((doc["user_query"], object_id))
        action = doc["action_name"].lower()
        if action in ("click", "impression"):
            cells[(doc["user_query"], object_id, attrs["position"]["ordinal"])][
                0 if action == "click" else 1] += 1
    alpha = {p: 0.5 for p in pairs}
    gamma = {r: 0.5 for (_, _, r) in cells}
    for _ in range(100):
        num_a: dict[Any, float] = defaultdict(float)
        den_a: dict[Any, float] = defaultdict(float)
        num_g: dict[int, float] = defaultdict(float)
        den_g: dict[int, float] = defaultdict(float)
        for (q, d, r), (k, n) in cells.items():
            n = max(n, k)
            a, g = alpha[(q, d)], gamma[r]
            no_click = 1 - a * g
            num_a[(q, d)] += k + (n - k) * (a * (1 - g) / no_click if no_click else 0)
            num_g[r] += k + (n - k) * (g * (1 - a) / no_click if no_click else 0)
            den_a[(q, d)] += n
            den_g[r] += n
        alpha = {p: (num_a[p] / den_a[p] if den_a[p] else 0.0) for p in pairs}
        gamma = {r: num_g[r] / den_g[r] for r in gamma}
    assert set(got) == {q for q, _ in pairs}
    worst = max(abs(float(got[q][d]) - alpha[(q, d)]) for q, d in pairs)
    assert worst < 0.002, worst


@pytest.mark.parametrize("body, reason", [
    ({"maxRank": 20}, "clickModel is required for UBI_JUDGMENT"),
    ({"clickModel": "dbn", "maxRank": 20}, "Unsupported click model: dbn"),
    ({"clickModel": "coec"}, "maxRank is required"),
    ({"clickModel": "coec", "maxRank": 0}, "maxRank must be a positive integer, got: 0"),
    ({"clickModel": "coec", "maxRank": "20"}, "maxRank must be a positive integer, got: 20"),
    ({"clickModel": "coec", "maxRank": 20, "startDate": "2024/12/01"},
     "Invalid start date format: failed to parse date field [2024/12/01] with format "
     "[yyyy-MM-dd]"),
    ({"clickModel": "coec", "maxRank": 20, "endDate": "2025-02-30"},
     "Invalid end date format: failed to parse date field [2025-02-30] with format "
     "[yyyy-MM-dd]"),
    # plugin #558: one message for an index the body names, whether missing or not UBI events
    ({"clickModel": "coec", "maxRank": 20, "ubiEventsIndex": "no-such-events"},
     "The UBI events index [no-such-events] set by the 'ubiEventsIndex' parameter does not "
     "exist or is missing required UBI event fields (query_id, action_name, "
     "event_attributes.object.object_id). Ingest UBI events data into it, or set the "
     "'ubiEventsIndex' parameter to an existing UBI events index."),
    ({"clickModel": "coec", "maxRank": 20, "ubiEventsIndex": "ubi_queries"},
     "The UBI events index [ubi_queries] set by the 'ubiEventsIndex' parameter does not "
     "exist or is missing required UBI event fields (query_id, action_name, "
     "event_attributes.object.object_id). Ingest UBI events data into it, or set the "
     "'ubiEventsIndex' parameter to an existing UBI events index."),
    ({"clickModel": "coec", "maxRank": 20, "ubiEventsIndex": "nothing-matches-*"},
     "The UBI events index [nothing-matches-*] set by the 'ubiEventsIndex' parameter does not "
     "exist or is missing required UBI event fields (query_id, action_name, "
     "event_attributes.object.object_id). Ingest UBI events data into it, or set the "
     "'ubiEventsIndex' parameter to an existing UBI events index."),
])
def test_ubi_bad_input(api: Api, ubi_data: None, body: dict[str, Any], reason: str) -> None:
    api.srw("PUT", "/judgments", {"name": "u", "type": "UBI_JUDGMENT", **body}).error(400, reason)


NOT_GIVEN = (
    "No 'ubiEventsIndex' parameter was provided and the default UBI events index [ubi_events] "
    "does not exist or is missing required UBI event fields (query_id, action_name, "
    "event_attributes.object.object_id). Ingest UBI events data into [ubi_events], or set the "
    "'ubiEventsIndex' parameter to an existing UBI events index.")


def test_a_cluster_without_ubi_events_is_refused_before_anything_is_written(
        vector_stack: dict[str, Any]) -> None:
    """Plugin #558, on a cluster with no ``ubi_events``: absent, null or blank is "not given";
    naming the default is "given"; no judgment document is created."""
    api, client = vector_stack["api"], vector_stack["client"]
    name = f"no-ubi-{uuid.uuid4().hex[:6]}"
    base = {"name": name, "type": "UBI_JUDGMENT", "clickModel": "coec", "maxRank": 20}
    for extra in ({}, {"ubiEventsIndex": None}, {"ubiEventsIndex": ""},
                  {"ubiEventsIndex": "   "}):
        api.srw("PUT", "/judgments", {**base, **extra}).error(400, NOT_GIVEN)
    api.srw("PUT", "/judgments", {**base, "ubiEventsIndex": "ubi_events"}).error(
        400, "The UBI events index [ubi_events] set by the 'ubiEventsIndex' parameter does not "
             "exist or is missing required UBI event fields (query_id, action_name, "
             "event_attributes.object.object_id). Ingest UBI events data into it, or set the "
             "'ubiEventsIndex' parameter to an existing UBI events index.")
    client.indices.refresh(index="search-relevance-judgment")
    found = client.count(index="search-relevance-judgment",
                         body={"query": {"term": {"name": name}}})
    assert found["count"] == 0


def test_an_events_index_may_be_an_alias_or_a_pattern(api: Api, worker: Worker,
                                                      direct: OpenSearch) -> None:
    """The workbench's extension (the plugin takes concrete names only): an alias or pattern
    that resolves to UBI events indices is read like the index itself."""
    index = f"test-events-{uuid.uuid4().hex[:6]}"
    shipped = json.loads((REPO / "index_mappings" / "ubi" / "ubi_events.json").read_text())
    direct.indices.create(index=index, body={"mappings": shipped["mappings"]})
    events = []
    for n, (action, doc, rank) in enumerate([("impression", "d1", 1), ("click", "d1", 1),
                                             ("impression", "d2", 2)]):
        events += [{"index": {"_index": index, "_id": str(n)}},
                   {"query_id": "q1", "action_name": action, "user_query": "red shoes",
                    "timestamp": "2026-11-01T00:00:00Z",
                    "event_attributes": {"object": {"object_id": doc},
                                         "position": {"ordinal": rank}}}]
    direct.bulk(body=events, refresh=True)
    direct.indices.put_alias(index=index, name=f"{index}-alias")
    try:
        runs = {}
        for name in (f"{index}-alias", f"{index[:-2]}*"):
            done = wait_done(api, create(api, {"type": "UBI_JUDGMENT", "clickModel": "coec",
                                               "maxRank": 20, "ubiEventsIndex": name}))
            assert done["status"] == "COMPLETED", done["metadata"]
            assert done["metadata"]["ubiEventsIndex"] == name
            runs[name] = done["judgmentRatings"]
        first, second = runs.values()
        assert first == second and first
    finally:
        direct.indices.delete(index=index)


def test_empty_dates_from_dashboards_mean_no_window(api: Api, worker: Worker,
                                                    ubi_data: None) -> None:
    done = wait_done(api, create(api, {"type": "UBI_JUDGMENT", "clickModel": "coec",
                                       "maxRank": 20, "startDate": "", "endDate": ""}))
    assert as_map(done["judgmentRatings"]) == expected_coec(20)
