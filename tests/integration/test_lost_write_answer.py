"""A job's final conditional write whose answer was lost (its node died with the write on its
way, and the write was sent again) gets a 409 from its own first attempt: it is checked before
it is called a conflict (``Repository.holds``). On the real cluster: the write is made, then
made again with the version the job had read, as the second attempt is."""

from __future__ import annotations

import logging
from typing import Any

import pytest
from opensearchpy import OpenSearch

from workbench.judgments import runner
from workbench.store.repository import Repository

RATINGS = [{"query": "shoes", "ratings": [{"docId": "a", "rating": 3.0}, {"docId": "b",
                                                                          "rating": 0.5}]}]
DROPPED = "changed or was deleted while its job ran; result dropped"


def started(direct: OpenSearch, index: str) -> tuple[Repository, dict[str, Any]]:
    """A judgment as its job reads it when it starts: PROCESSING, with its version."""
    repo = Repository(direct, index)
    repo.create({"id": "j1", "status": "PROCESSING", "metadata": {"progress": {"done": 0}},
                 "judgmentRatings": []})
    hit = repo.get_hit("j1")
    assert hit is not None
    return repo, hit


def finished(ratings: list[dict[str, Any]]) -> dict[str, Any]:
    return {"status": "COMPLETED", "metadata": {"usage": (1, 2)}, "judgmentRatings": ratings}


def test_a_write_applied_before_its_answer_was_lost_is_no_conflict(
        direct: OpenSearch, index_name: str, caplog: pytest.LogCaptureFixture) -> None:
    repo, hit = started(direct, index_name)
    runner.write(repo, dict(hit), finished(RATINGS))
    with caplog.at_level(logging.INFO, logger="workbench"):
        runner.write(repo, dict(hit), finished(RATINGS))  # the stale version: a 409
    assert DROPPED not in caplog.text
    stored = repo.get_source("j1")
    assert stored is not None and stored["status"] == "COMPLETED"
    assert stored["judgmentRatings"] == RATINGS


def test_a_document_changed_by_someone_else_is_still_a_conflict(
        direct: OpenSearch, index_name: str, caplog: pytest.LogCaptureFixture) -> None:
    repo, hit = started(direct, index_name)
    other = [{"query": "shoes", "ratings": [{"docId": "a", "rating": 1.0}]}]
    runner.write(repo, dict(hit), finished(other))
    with caplog.at_level(logging.INFO, logger="workbench"):
        runner.write(repo, dict(hit), finished(RATINGS))
    assert f"judgment j1 {DROPPED}" in caplog.text
    stored = repo.get_source("j1")
    assert stored is not None and stored["judgmentRatings"] == other


def test_a_deleted_document_is_still_a_conflict(
        direct: OpenSearch, index_name: str, caplog: pytest.LogCaptureFixture) -> None:
    repo, hit = started(direct, index_name)
    repo.delete("j1")
    with caplog.at_level(logging.INFO, logger="workbench"):
        runner.write(repo, dict(hit), finished(RATINGS))
    assert f"judgment j1 {DROPPED}" in caplog.text
    assert repo.get_source("j1") is None


def test_holds_compares_the_written_fields_as_stored(
        direct: OpenSearch, index_name: str) -> None:
    repo, hit = started(direct, index_name)
    runner.write(repo, dict(hit), finished(RATINGS))
    assert repo.holds("j1", finished(RATINGS))  # a tuple is stored as a list
    assert repo.holds("j1", {"status": "COMPLETED"})
    assert not repo.holds("j1", {"status": "ERROR"})
    assert not repo.holds("j1", {"missing": None})
    assert not repo.holds("absent", {"status": "COMPLETED"})
