"""The failure policy of LLM judgments (docs/contract.md, "LLM judgments: failures"), on
hand-made outcomes: every query keeps its entry, every document sent and left unrated is
listed under ``failures`` with its reason, and a query with failures is a failed query."""

from __future__ import annotations

from workbench.judgments.llm.job import NOT_RATED, Outcome, assemble
from workbench.judgments.retrieval import Target
from workbench.judgments.summary import recompute
from workbench.querysets.entries import QueryEntry

BUDGET = "budget: maxTokens 1000 reached"


def target(query: str, *docs: str, known: dict[str, str] | None = None,
           search_error: str | None = None) -> Target:
    return Target(QueryEntry(query), [(d, f"text of {d}") for d in docs], dict(known or {}),
                  search_error=search_error)


def test_every_query_keeps_its_entry_and_failed_documents_are_listed() -> None:
    targets = [
        target("rated", "a", "b"),
        target("model failed", "c", "d", "e", known={"c": "0.5"}),  # c reused
        target("partly rated", "f", "g"),
        target("search failed", search_error="index_not_found_exception"),
        target("no hits"),
        target("budget stopped", "h"),
    ]
    outcomes = [
        Outcome(ratings={"a": "1.0", "b": "0.0"}, sent=["a", "b"], chunks=1),
        Outcome(sent=["d", "e"], chunks=1, failed_chunks=1,
                errors=["could not read the answer of model m: not JSON"],
                reasons={"d": "could not read the answer of model m: not JSON",
                         "e": "could not read the answer of model m: not JSON"}),
        Outcome(ratings={"f": "0.7"}, sent=["f", "g"], chunks=1, reasons={"g": NOT_RATED}),
        Outcome(),
        Outcome(),
        Outcome(sent=["h"], chunks=1, unpaid=["h"]),
    ]
    entries, failed, reason = assemble(targets, outcomes, BUDGET)
    assert entries == [
        {"query": "rated", "ratings": [{"docId": "a", "rating": "1.0"},
                                       {"docId": "b", "rating": "0.0"}]},
        {"query": "model failed", "ratings": [{"docId": "c", "rating": "0.5"}],
         "failures": [{"docId": "d", "reason": "could not read the answer of model m: not JSON"},
                      {"docId": "e", "reason": "could not read the answer of model m: not JSON"}]},
        {"query": "partly rated", "ratings": [{"docId": "f", "rating": "0.7"}],
         "failures": [{"docId": "g", "reason": NOT_RATED}]},
        {"query": "search failed", "ratings": []},
        {"query": "no hits", "ratings": []},
        {"query": "budget stopped", "ratings": [], "failures": [{"docId": "h", "reason": BUDGET}]},
    ]
    assert failed == 3  # the three with failures; a failed search has nothing to retry
    assert reason == BUDGET  # the last failed query's


def test_the_counters_follow_the_failures_and_old_judgments_count_left_out_queries() -> None:
    entries = [{"query": "a", "ratings": [{"docId": "x", "rating": "1.0"}]},
               {"query": "b", "ratings": [], "failures": [{"docId": "y", "reason": "timeout"}]}]
    meta = {"totalQueries": 2, "lastFailureReason": "old"}
    assert recompute(meta, entries) == {"totalQueries": 2, "successfulQueries": 1,
                                        "failedQueries": 1, "lastFailureReason": "timeout"}
    # an old judgment (3.6 policy) left its 2 failed queries out of 4: they count as failed
    old = recompute({"totalQueries": 4, "lastFailureReason": "old"}, entries[:1])
    assert old == {"totalQueries": 4, "successfulQueries": 1, "failedQueries": 3,
                   "lastFailureReason": "old"}
    cleared = recompute({"totalQueries": 1, "lastFailureReason": "old"}, entries[:1])
    assert cleared == {"totalQueries": 1, "successfulQueries": 1, "failedQueries": 0}
