"""The judgment size limit (one constant, matched by the index's nested-objects limit), the job
side of it, and shard failures read from a search answer."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from workbench.jobs.base import JobFailed
from workbench.judgments import runner
from workbench.judgments.limits import MAX_RATINGS, size_error
from workbench.store.search import ShardFailure, check_shards

MAPPING = Path(__file__).resolve().parents[3] / "index_mappings" / "judgment.json"


def test_the_index_holds_every_list_within_the_limit() -> None:
    settings = json.loads(MAPPING.read_text())["settings"]["index"]
    # One nested document per query entry and one per rating.
    assert settings["mapping"]["nested_objects"]["limit"] >= 2 * MAX_RATINGS


def test_size_error_counts_ratings_and_queries() -> None:
    ratings = [{"docId": str(d), "rating": "1"} for d in range(1000)]
    within = [{"query": f"q{q}", "ratings": ratings} for q in range(MAX_RATINGS // 1000)]
    assert size_error(within) is None
    over = [*within, {"query": "one more", "ratings": ratings[:1]}]
    assert size_error(over) == (f"judgment has {MAX_RATINGS + 1} ratings; at most {MAX_RATINGS} "
                                "are allowed in one judgment list")
    assert "queries" in (size_error([{"query": "q", "ratings": []}] * (MAX_RATINGS + 1)) or "")


class _NoWrites:
    def put(self, *args: Any, **kwargs: Any) -> None:
        raise AssertionError("nothing may be written")


def test_a_generated_list_over_the_limit_fails_the_job_before_writing() -> None:
    ratings = [{"docId": str(d), "rating": "1"} for d in range(1001)]
    entries = [{"query": f"q{q}", "ratings": ratings} for q in range(MAX_RATINGS // 1000)]
    hit = {"_source": {"id": "j"}, "_seq_no": 1, "_primary_term": 1}
    with pytest.raises(JobFailed, match=f"at most {MAX_RATINGS}"):
        runner.write(_NoWrites(), hit, {"status": "COMPLETED",  # type: ignore[arg-type]
                                        "judgmentRatings": entries})


def test_check_shards() -> None:
    whole = {"_shards": {"total": 2, "successful": 2, "failed": 0}, "hits": {}}
    assert check_shards(whole, "a,b") is whole
    partial = {"_shards": {"total": 2, "successful": 1, "failed": 1, "failures": [
        {"shard": 0, "index": "b", "reason": {
            "type": "illegal_argument_exception", "reason": "Text fields are not optimised"}}]}}
    with pytest.raises(ShardFailure) as caught:
        check_shards(partial, "a,b")
    assert str(caught.value) == ("search on [a,b] failed on 1 of 2 shards of index(es) [b]: "
                                 "illegal_argument_exception: Text fields are not optimised")
