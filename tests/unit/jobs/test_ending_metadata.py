"""What an ERROR document keeps besides its reason, whatever exception ended the job."""

from __future__ import annotations

import logging

from workbench.jobs.base import JobFailed, extra_metadata, keep_metadata
from workbench.jobs.control import Cancelled


def test_a_documented_failure_keeps_its_fields_and_what_is_added() -> None:
    failed = JobFailed("QuerySet [x] does not exist", {"lastFailureReason": "gone"})
    keep_metadata(failed, usage={"llmCalls": 3})
    assert extra_metadata(failed) == {"lastFailureReason": "gone", "usage": {"llmCalls": 3}}


def test_any_exception_can_carry_what_the_job_spent() -> None:
    crash = KeyError("x")
    assert extra_metadata(crash) == {}
    keep_metadata(crash, usage={"llmCalls": 2})
    keep_metadata(crash, note="kept too")
    assert extra_metadata(crash) == {"usage": {"llmCalls": 2}, "note": "kept too"}


def test_a_cancel_is_logged_at_info_and_a_documented_failure_at_warning() -> None:
    assert Cancelled().log_level == logging.INFO
    assert JobFailed("x").log_level == logging.WARNING
