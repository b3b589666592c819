"""What a generated text must be to be stored, duplicates, and the stored entries
(``querygen/queries.py``)."""

from __future__ import annotations

import pytest

from workbench.querygen.queries import (
    MAX_QUERY_LENGTH,
    GeneratedQuery,
    as_entries,
    dedupe,
    normalise,
)


@pytest.mark.parametrize(("text", "normal"), [
    ("  red   running\nshoes\t", "red running shoes"),  # whitespace runs, newlines too
    ('"Red Shoes."', "Red Shoes"),  # wrapping quotes and a full stop go; case stays
    ("'red shoes'", "red shoes"),
    ("\u201ccozy blanket\u201d", "cozy blanket"),
    ('"tent!",', "tent"),  # repeated until nothing changes
    ("1. waterproof jacket", "waterproof jacket"),  # a model's list markers
    ("2) waterproof jacket", "waterproof jacket"),
    ("- tent for 2", "tent for 2"),
    ("\u2022 tent", "tent"),
    ("kids' shoes", "kids' shoes"),  # an apostrophe inside stays
    ("girls'", "girls'"),  # and at the end, when it does not pair with one at the start
    ("what tent for rain?", "what tent for rain?"),  # a question is typed with its mark
    ("2 pack socks", "2 pack socks"),  # a number is not a list marker without "." or ")"
    ("x" * MAX_QUERY_LENGTH, "x" * MAX_QUERY_LENGTH),
])
def test_normalise_keeps_a_query(text: str, normal: str) -> None:
    assert normalise(text) == normal


@pytest.mark.parametrize("text", [
    "", "   ", "...", '""',
    "x" * (MAX_QUERY_LENGTH + 1),
    'shoe "red" size',  # the manual path refuses quotes,
    "back\\slash", "a <b> tag",  # backslashes and angle brackets
    "c# for beginners",  # a judgment key would split at the '#'
    "color: red",  # a query_string query would read a field name
])
def test_normalise_refuses(text: str) -> None:
    assert normalise(text) is None


def test_dedupe_keeps_the_first_ignoring_case_and_whitespace() -> None:
    first = GeneratedQuery("Red Shoes", "lexical", "d1")
    queries = [first, GeneratedQuery("red  shoes", "semantic", "d2"),
               GeneratedQuery("blue hat", "lexical", "d1"),
               GeneratedQuery("RED SHOES ", "reference", "d3")]
    assert dedupe(queries) == [first, GeneratedQuery("blue hat", "lexical", "d1")]
    assert dedupe([]) == []


def test_entries_are_stored_as_a_manual_set_stores_them() -> None:
    assert as_entries([GeneratedQuery("red shoes", "lexical", "B001"),
                       GeneratedQuery("warm hat", "reference", "42")]) == [
        {"queryText": "red shoes", "customFields": {"category": "lexical", "sourceDocId": "B001"}},
        {"queryText": "warm hat", "customFields": {"category": "reference", "sourceDocId": "42"}},
    ]


def test_a_document_id_the_text_rules_refuse_is_left_out_of_the_entry() -> None:
    assert as_entries([GeneratedQuery("red shoes", "semantic", 'a"b')]) == [
        {"queryText": "red shoes", "customFields": {"category": "semantic"}}]
