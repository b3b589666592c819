"""Pieces of batch evaluation that need no services: where an error is reported, how shared
settings fill entries in, how a queued batch's requests are stored, and the 1-4 rubric."""

from __future__ import annotations

import pytest

from workbench.evaluation import batch, batch_job
from workbench.evaluation.request import Request
from workbench.judges.base import Hit, Query
from workbench.judges.rubric import CHECKLIST_0_3, CHECKLIST_1_4, RUBRICS


@pytest.mark.parametrize("message, located", [
    ("hits[0] has no id", "queries[2].hits[0] has no id"),
    ("query.inputs.text is required", "queries[2].query.inputs.text is required"),
    ("eval.fields must be a non-empty list of field names",
     "queries[2].eval.fields must be a non-empty list of field names"),
    ("k must be a positive integer, got: 0", "queries[2].k must be a positive integer, got: 0"),
    ("Unknown judge [x]; use one of: llm", "queries[2]: Unknown judge [x]; use one of: llm"),
    ("give hits, a searchConfigurationId, or an index and a searchQuery",
     "queries[2]: give hits, a searchConfigurationId, or an index and a searchQuery"),
    ("LLM [m] failed: 500", "queries[2]: LLM [m] failed: 500"),
])
def test_errors_name_the_entry(message: str, located: str) -> None:
    assert batch.located(2, message) == located


def test_shared_settings_fill_in_what_an_entry_does_not_say() -> None:
    shared = {"judge": "llm", "modelId": "m", "k": 5, "fields": ["title"],
              "judgeOptions": {"scale": "1-4", "threshold": 0.2}}
    own = batch.with_shared({"queryText": "q", "k": 3, "judgeOptions": {"scale": "0-3"}},
                            shared, brief=False)
    assert own == {"queryText": "q", "k": 3, "judge": "llm", "modelId": "m",
                   "fields": ["title"], "judgeOptions": {"scale": "0-3", "threshold": 0.2}}
    brief = batch.with_shared({"query": {"inputs": {"text": "q"}}}, shared, brief=True)
    assert brief["eval"] == {"fields": ["title"]} and brief["k"] == 5
    kept = batch.with_shared({"query": {}, "eval": {"fields": ["text"], "debug": True}},
                             shared, brief=True)
    assert kept["eval"] == {"fields": ["text"], "debug": True}


def test_a_stored_request_reads_back_the_same() -> None:
    request = Request(Query("red shoes", ("a", "b"), {"category": "shoes"}),
                      [Hit("1", {"title": "red shoes", "price": 3}), Hit("2", {"title": "hat"})],
                      "products", 2, "llm", {"modelId": "m", "scale": "1-4"}, True,
                      shared=frozenset({"modelId"}))
    assert batch_job.load(batch_job.dump(request)) == request


def test_the_1_4_rubric() -> None:
    assert RUBRICS == {"0-3": CHECKLIST_0_3, "1-4": CHECKLIST_1_4}
    rubric = CHECKLIST_1_4
    assert rubric.scale.grades() == [1, 2, 3, 4] and rubric.confidence == (1.0, 5.0)
    assert [rubric.relevant(g) for g in (1, 2, 3, 4)] == [False, False, True, True]
    assert rubric.code != CHECKLIST_0_3.code
    item = rubric.response_format()["json_schema"]["schema"]["properties"]["ratings"]["items"]
    assert item["properties"]["grade"]["enum"] == [1, 2, 3, 4]
    text = ('{"ratings": [{"id": "a", "grade": 4, "confidence": 5, "justification": "Q1."},'
            ' {"id": "b", "grade": 0, "confidence": 3, "justification": "off the scale"},'
            ' {"id": "c", "grade": 2, "confidence": 0.5, "justification": "Q3."}]}')
    grades = rubric.parse(text, {"a", "b", "c"})
    assert set(grades) == {"a", "c"}  # 0 is not a grade of this scale
    assert grades["a"].confidence == 5.0 and grades["c"].confidence is None  # out of 1-5
