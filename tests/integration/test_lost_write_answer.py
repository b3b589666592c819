"""A job's final conditional write whose answer was lost (its node died with the write on its
way, and the write was sent again) gets a 409 from its own first attempt: it is checked before
it is called a conflict (``Repository.holds``). On the real cluster: the write is made, then
made again with the version the job had read, as the second attempt is."""

from __future__ import annotations

import logging
from types import SimpleNamespace
from typing import Any, cast

import pytest
from opensearchpy import OpenSearch

from workbench.jobs.control import JobControl
from workbench.judgments import runner
from workbench.services import Services
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


def controlled(direct: OpenSearch, index: str) -> tuple[Repository, JobControl]:
    """An experiment as its job reads it, and the job's control, whose progress is fixed so
    that a write sent twice carries the same progress twice, as a resent request does."""
    repo = Repository(direct, index)
    repo.create({"id": "e1", "status": "PROCESSING"})
    hit = repo.get_hit("e1")
    assert hit is not None
    control = JobControl(cast(Services, SimpleNamespace(client=direct)), index, hit, "pairs",
                         in_metadata=False)
    progress = {"unit": "pairs", "done": 3, "total": 10, "percent": 30.0,
                "updatedAt": "2026-11-29T00:00:00.000Z"}
    control.snapshot = lambda: dict(progress)  # type: ignore[method-assign]
    return repo, control


def test_a_progress_write_applied_before_its_answer_was_lost_keeps_the_job_going(
        direct: OpenSearch, index_name: str, caplog: pytest.LogCaptureFixture) -> None:
    """A progress write (``update`` with ``if_seq_no``) resent after its node died, or its
    shard's primary moved, finds its own first attempt: the job goes on, at the version read."""
    repo, control = controlled(direct, index_name)
    stale = dict(control.hit)
    control.write(force=True)
    applied = repo.get_hit("e1")
    assert applied is not None and applied["_source"]["progress"]["done"] == 3
    control.hit.update(_seq_no=stale["_seq_no"], _primary_term=stale["_primary_term"])
    with caplog.at_level(logging.INFO, logger="workbench"):
        control.write(force=True)  # the stale version: a 409
    assert "changed while its job ran" not in caplog.text
    assert not control._cancelled
    assert (control.hit["_seq_no"], control.hit["_primary_term"]) == (
        applied["_seq_no"], applied["_primary_term"])


def test_a_progress_write_that_finds_another_change_stops_the_job(
        direct: OpenSearch, index_name: str, caplog: pytest.LogCaptureFixture) -> None:
    repo, control = controlled(direct, index_name)
    repo.put({"id": "e1", "status": "PROCESSING", "name": "edited"})
    with caplog.at_level(logging.INFO, logger="workbench"):
        control.write(force=True)
    assert "e1 changed while its job ran; stopping the job" in caplog.text
    assert control._cancelled
