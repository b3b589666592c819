"""Counting a call before it is made, the run budget, and the usage a judgment records."""

from __future__ import annotations

import json

import pytest

from workbench.bench import llm_server as fake
from workbench.judgments.llm import cost as llm_cost
from workbench.judgments.llm.job import JobUsage
from workbench.judgments.llm.prompt import RELEVANT_IRRELEVANT, SCORE0_1, system_prompt
from workbench.llm.pricing import Pricing

PRICES = Pricing(0.15, 0.6)


def test_prompt_tokens_count_as_openai_reports_them() -> None:
    system = system_prompt(SCORE0_1)
    user = 'SearchText: red shoes; Hits: [{"id":"i::1","source":"{\\"title\\":\\"red\\"}"}]'
    assert llm_cost.prompt_tokens(system, user) == fake.prompt_tokens(system, user)


@pytest.mark.parametrize("rating_type, score", [(SCORE0_1, 0.7),
                                                (RELEVANT_IRRELEVANT, "IRRELEVANT")])
def test_answer_tokens_are_the_structured_answer(rating_type: str, score: object) -> None:
    ids = [f"products::B{i:02d}" for i in range(12)]
    answer = json.dumps({"ratings": [{"id": i, "rating_score": score} for i in ids]})
    assert llm_cost.answer_tokens(ids, rating_type, False) == fake.completion_tokens(answer)
    assert llm_cost.answer_tokens(ids, rating_type, True) > llm_cost.answer_tokens(
        ids, rating_type, False) + 10 * len(ids)


def test_cost_and_usage_by_hand() -> None:
    # 12,000 x 0.15 / 1e6 = 0.0018 and 3,000 x 0.6 / 1e6 = 0.0018
    usage = JobUsage(input_tokens=12_000, output_tokens=3_000, llm_calls=4, latency_ms=950)
    assert usage.as_metadata(PRICES) == {
        "inputTokens": 12_000, "outputTokens": 3_000, "totalTokens": 15_000, "llmCalls": 4,
        "cachedRatings": 0, "reusedRatings": 0, "latencyMs": 950,
        "cost": pytest.approx(0.0036)}
    assert "cost" not in usage.as_metadata(None)


def test_usage_of_documents_written_before_the_new_fields() -> None:
    old = {"inputTokens": 10, "outputTokens": 5, "llmCalls": 1, "cachedRatings": 2,
           "reusedRatings": 0}
    usage = JobUsage.from_metadata(old)
    assert (usage.latency_ms, usage.as_metadata()["totalTokens"]) == (0, 15)
    assert JobUsage.from_metadata(None) == JobUsage()


def test_max_tokens_reserves_until_a_call_does_not_fit_then_stays_closed() -> None:
    budget = llm_cost.Budget(1000, None, None)
    first = budget.reserve(400, 100)
    second = budget.reserve(300, 100)
    assert first and second and not budget.reached
    assert budget.reserve(90, 20) is None  # 500 + 400 + 110 > 1000
    assert budget.reached and budget.reason == "budget reached: maxTokens [1000]"
    budget.settle(first, 380, 90)
    assert budget.reserve(1, 1) is None  # closed: no later call starts, however small
    budget.settle(second)  # a failed call spends nothing
    assert budget.spent == llm_cost.Reservation(380, 90)
    assert budget.held == llm_cost.Reservation(0, 0)


def test_max_cost_prices_the_reservation() -> None:
    # 0.0036 for 12,000 in + 3,000 out; a second such call would make 0.0072 > 0.005
    budget = llm_cost.Budget(None, 0.005, PRICES)
    assert budget.reserve(12_000, 3_000)
    assert budget.reserve(12_000, 3_000) is None
    assert budget.reason == "budget reached: maxCost [0.005]"
    assert llm_cost.Budget(None, 1.0, None).reserve(1, 1) is None  # prices gone: no bound


def test_no_budget_without_limits() -> None:
    assert llm_cost.Budget.of({"modelId": "m"}, PRICES) is None
    budget = llm_cost.Budget.of({"maxTokens": 5, "maxCost": 0.1}, PRICES)
    assert budget is not None and (budget.max_tokens, budget.max_cost) == (5, 0.1)
