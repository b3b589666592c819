"""The counting helpers: a job run's ending, route labels, LLM calls."""

from __future__ import annotations

from typing import Any

import pytest
from werkzeug.test import EnvironBuilder

from workbench.api.http_metrics import route_of
from workbench.app import create_app
from workbench.config import Config
from workbench.llm.base import ChatRequest, ChatResult, LLMError, metered
from workbench.llm.pricing import Pricing
from workbench.telemetry import instruments


def sample(metric: Any, suffix: str, **labels: str) -> float:
    for family in metric.collect():
        for s in family.samples:
            if s.name.endswith(suffix) and s.labels == labels:
                return float(s.value)
    return 0.0


def ended(job: str, kind: str, ending: str) -> float:
    return sample(instruments.JOBS_ENDED, "_total", job=job, type=kind, ending=ending)


def test_a_run_ends_completed_error_or_as_the_job_says() -> None:
    before = {e: ended("unit", "T", e) for e in ("completed", "error", "cancelled")}
    with instruments.job_run("unit"):
        instruments.note_job_type("T")
    with pytest.raises(ValueError), instruments.job_run("unit"):
        instruments.note_job_type("T")
        raise ValueError
    with pytest.raises(KeyError), instruments.job_run("unit") as run:
        instruments.note_job_type("T")
        run["ending"] = "cancelled"
        raise KeyError
    with instruments.job_run("unit") as run:  # sent back to the queue: not an ending
        instruments.note_job_type("T")
        run["ending"] = ""
    assert {e: ended("unit", "T", e) - before[e] for e in before} == {
        "completed": 1, "error": 1, "cancelled": 1}
    assert sample(instruments.JOBS_STARTED, "_total", job="unit") >= 4
    assert instruments.job_type() == ""  # the type does not leak out of the run


def test_job_kinds() -> None:
    assert instruments.job_kind("workbench.judgments.generate") == "judgment"
    assert instruments.job_kind("workbench.evaluation.batch") == "evaluate_batch"
    assert instruments.job_kind("tests.cancelled") == "cancelled"


@pytest.mark.parametrize("status, timed_out, outcome", [
    (200, False, "ok"), (404, False, "client_error"), (503, False, "server_error"),
    (None, False, "unreachable"), (None, True, "timeout")])
def test_opensearch_outcomes(status: int | None, timed_out: bool, outcome: str) -> None:
    assert instruments.opensearch_outcome(status, timed_out) == outcome


def test_routes_are_templates_never_paths() -> None:
    """Through the whole WSGI stack, with no cluster behind it (every answer a 503): a
    workbench route is counted by its rule, a pass-through path as ``passthrough``."""
    app = create_app(Config(opensearch_url="http://127.0.0.1:1"))
    paths = {"/_plugins/_search_relevance/query_sets/abc":
             "/_plugins/_search_relevance/query_sets/<entity_id>",
             "/_cat/indices/some-index": "passthrough"}

    def count(route: str) -> float:
        return sample(instruments.HTTP_REQUESTS, "_total", method="GET", route=route,
                      status="503")

    before = {route: count(route) for route in paths.values()}
    for path in paths:
        body = app.wsgi_app(EnvironBuilder(path=path).get_environ(),
                            lambda *a: None)  # type: ignore[arg-type]
        b"".join(body)
        body.close()  # type: ignore[attr-defined]
    assert {route: count(route) - before[route] for route in paths.values()} == {
        route: 1 for route in paths.values()}
    assert route_of({}) == "passthrough"  # answered by the fast pass-through


class _Model:
    model_id = "m-unit"
    pricing = Pricing(2.0, 10.0)

    def __init__(self, error: Exception | None = None) -> None:
        self.error = error

    @metered
    def chat(self, request: ChatRequest) -> ChatResult:
        if self.error is not None:
            raise self.error
        return ChatResult("ok", 1000, 100)


def test_a_models_calls_tokens_and_cost_are_counted() -> None:
    def read() -> tuple[float, ...]:
        return (sample(instruments.LLM_CALLS, "_total", model="m-unit", outcome="ok"),
                sample(instruments.LLM_CALLS, "_total", model="m-unit", outcome="error"),
                sample(instruments.LLM_INPUT_TOKENS, "_total", model="m-unit"),
                sample(instruments.LLM_OUTPUT_TOKENS, "_total", model="m-unit"),
                sample(instruments.LLM_COST, "_total", model="m-unit"))

    before = read()
    request = ChatRequest("s", "u")
    _Model().chat(request)
    with pytest.raises(LLMError):
        _Model(LLMError("m-unit", "refused")).chat(request)
    after = read()
    assert [a - b for a, b in zip(after, before, strict=True)] == pytest.approx(
        [1, 1, 1000, 100, (1000 * 2.0 + 100 * 10.0) / 1e6])
