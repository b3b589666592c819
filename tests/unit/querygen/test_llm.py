"""How the LLM generator asks and reads (workbench/querygen/llm.py), on hand-made answers."""

from __future__ import annotations

import json

import pytest

from workbench.judges.ratings import ParseFailure
from workbench.querygen.documents import SourceDocument
from workbench.querygen.llm import INSTRUCTIONS, categories_for, read_query, user_prompt


def test_categories_take_turns_over_the_documents() -> None:
    assert categories_for(5, ["lexical", "semantic"]) == [
        "lexical", "semantic", "lexical", "semantic", "lexical"]
    assert categories_for(2, ["semantic"]) == ["semantic", "semantic"]
    assert categories_for(0, ["lexical"]) == []


@pytest.mark.parametrize(("answer", "query"), [
    ('{"query": "red running shoes"}', "red running shoes"),
    ('Here you go: {"query": "wool hat"} hope it helps', "wool hat"),
    ('{"other": 1} {"query": "tv"}', "tv"),
    ("```json\n{\"query\": \"kindle\"}\n```", "kindle"),
    ("  cast iron skillet  \nbecause it is", "cast iron skillet"),
])
def test_the_query_is_read_from_json_or_the_first_line(answer: str, query: str) -> None:
    assert read_query(answer) == query


@pytest.mark.parametrize("answer", ["", "   \n ", '{"query": 3}', "[1, 2]", "```"])
def test_an_answer_without_a_query_is_a_parse_failure(answer: str) -> None:
    with pytest.raises(ParseFailure, match="the answer holds no query"):
        read_query(answer)


def test_the_prompt_shows_the_category_and_the_fields() -> None:
    document = SourceDocument("d1", {"title": "Wool Hat", "brand": "Acme"})
    prompt = user_prompt(document, "semantic")
    assert prompt.startswith(INSTRUCTIONS["semantic"])
    assert prompt.endswith("Document:\n" + json.dumps({"title": "Wool Hat", "brand": "Acme"}))
