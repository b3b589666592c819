"""How a run records its failed remote searches (issue 47, experiments/searching.py): the
stand-in entries leave ``results`` for ``remoteSearchFailures`` (the first 100 kept, all
counted); every search of one remote configuration failed ends the run ERROR."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any, cast

import pytest

from workbench.experiments.context import RunContext
from workbench.experiments.searching import FAILED, failed_entry, remote_outcome
from workbench.jobs.base import JobFailed
from workbench.querysets.entries import QueryEntry
from workbench.remote.search import RemoteFailure


def _ctx(queries: int, remote: tuple[str, ...]) -> RunContext:
    entries = [QueryEntry(f"q{n}") for n in range(queries)]
    return cast(RunContext, SimpleNamespace(entries=entries,
                                            remote={config_id: object() for config_id in remote}))


def _failed(query: str, config_id: str, reason: str = "HTTP 503") -> dict[str, Any]:
    return failed_entry(QueryEntry(query), config_id, RemoteFailure(reason))


def test_a_run_without_remote_configurations_is_untouched() -> None:
    results = [{"queryText": "q0"}]
    assert remote_outcome(_ctx(1, ()), results) == ([{"queryText": "q0"}], {})


def test_failures_leave_the_results_and_are_recorded_in_order() -> None:
    ok = {"evaluationId": "e", "searchConfigurationId": "local", "queryText": "q0"}
    results = [ok, _failed("q0", "r", "first"), {"queryText": "q1"}, _failed("q1", "r", "second")]
    assert results[1] == {"searchConfigurationId": "r", "queryText": "q0", FAILED: "first"}
    kept, fields = remote_outcome(_ctx(3, ("r",)), results)
    assert kept == [ok, {"queryText": "q1"}]
    assert fields == {"remoteSearchFailures": [
        {"searchConfigurationId": "r", "queryText": "q0", "reason": "first"},
        {"searchConfigurationId": "r", "queryText": "q1", "reason": "second"}],
        "remoteSearchFailureCount": 2}


def test_none_failed_is_recorded_as_none() -> None:
    assert remote_outcome(_ctx(2, ("r",)), [{"queryText": "q0"}]) == (
        [{"queryText": "q0"}], {"remoteSearchFailures": [], "remoteSearchFailureCount": 0})


def test_the_first_hundred_are_kept_and_all_counted() -> None:
    results = [_failed(f"q{n}", "r", f"reason {n}") for n in range(150)]
    kept, fields = remote_outcome(_ctx(151, ("r",)), results)
    assert kept == []
    assert fields["remoteSearchFailureCount"] == 150
    assert [f["reason"] for f in fields["remoteSearchFailures"]] == [
        f"reason {n}" for n in range(100)]


def test_every_search_of_one_configuration_failed_ends_the_run() -> None:
    results = [_failed("q0", "a", "HTTP 404 one"), _failed("q1", "a", "HTTP 404 two"),
               _failed("q0", "b")]
    with pytest.raises(JobFailed) as caught:
        remote_outcome(_ctx(2, ("b", "a")), results)
    assert str(caught.value) == ("every search with remote search configuration [a] failed: "
                                 "HTTP 404 one")
    assert caught.value.metadata["remoteSearchFailureCount"] == 3
    assert len(caught.value.metadata["remoteSearchFailures"]) == 3


def test_a_query_set_without_queries_fails_nothing() -> None:
    assert remote_outcome(_ctx(0, ("r",)), []) == (
        [], {"remoteSearchFailures": [], "remoteSearchFailureCount": 0})
