"""``workbench judgments show``: a judgment's counters and failed queries, as printed."""

from __future__ import annotations

from workbench.cli.loop import judgment_lines


def test_failed_queries_are_listed_with_their_documents_grouped_by_reason() -> None:
    doc = {"id": "j1", "name": "titles", "type": "LLM_JUDGMENT", "status": "COMPLETED",
           "metadata": {"totalQueries": 3, "successfulQueries": 1, "failedQueries": 2,
                        "lastFailureReason": "HTTP 500 from the model"},
           "judgmentRatings": [
               {"query": "red shoes", "ratings": [{"docId": "a", "rating": "1.0"}]},
               {"query": "tv", "ratings": [{"docId": "b", "rating": "0.0"}],
                "failures": [{"docId": "c", "reason": "the model did not rate this document"}]},
               {"query": "hat", "ratings": [], "failures": [
                   {"docId": "d", "reason": "HTTP 500 from the model"},
                   {"docId": "e", "reason": "HTTP 500 from the model"}, {"docId": "f"}]}]}
    assert judgment_lines(doc) == [
        "judgment j1 'titles' (LLM_JUDGMENT) · COMPLETED",
        "queries: 3 total, 1 successful, 2 failed; 2 ratings",
        "last failure: HTTP 500 from the model",
        "  'tv': 1 unrated",
        "    c: the model did not rate this document",
        "  'hat': 3 unrated",
        "    d, e: HTTP 500 from the model",
        "    f: no reason recorded",
        "retry them: workbench judgments retry j1"]


def test_a_judgment_without_counters_shows_its_queries_and_ratings() -> None:
    doc = {"id": "j2", "name": "people", "type": "IMPORT_JUDGMENT", "status": "COMPLETED",
           "metadata": {}, "judgmentRatings": [
               {"query": "q", "ratings": [{"docId": "a", "rating": "3"}]}]}
    assert judgment_lines(doc) == ["judgment j2 'people' (IMPORT_JUDGMENT) · COMPLETED",
                                   "queries: 1; 1 ratings"]
