"""The text rules (docs/contract.md, "Text rules") and Java's number formatting, against hand-worked
cases."""

import pytest

from workbench.schemas.javafmt import double_to_string, java_string
from workbench.schemas.text import INVALID_CHARACTERS as BAD
from workbench.schemas.text import query_set_key_error, query_set_value_error, text_error


@pytest.mark.parametrize("value, limit, error", [
    (None, 50, "Text cannot be null"),
    ("", 50, "Text cannot be empty"),
    ("   ", 50, None),  # whitespace-only is not empty for this rule
    ("a" * 50, 50, None),
    ("a" * 51, 50, "Text exceeds maximum length of 50 characters"),
    ("😀" * 25, 50, None),  # 2 UTF-16 units each: exactly 50
    ("😀" * 26, 50, "Text exceeds maximum length of 50 characters"),
    ('say "hi"', 50, BAD),
    ("a\\b", 50, BAD),
    ("<b>", 50, BAD),
    ('line\n"quoted"', 50, BAD),
    ("it's fine #1: ok", 50, None),
])
def test_text_rules(value, limit, error) -> None:
    assert text_error(value, limit) == error


def test_query_set_values_refuse_newlines_after_the_text_rules() -> None:
    assert query_set_value_error("red\nshoes") == (
        "Text contains reserved characters (newline is not allowed in QuerySet values)")
    assert query_set_value_error("a\rb") is not None
    assert query_set_value_error("") == "Text cannot be empty"
    assert query_set_value_error("What is C#?") is None


@pytest.mark.parametrize("key, error", [
    (None, "Key cannot be null"),
    ("", "Key cannot be empty"),
    ("k" * 51, "Key exceeds maximum length of 50 characters"),
    ("a\nb", "Key contains reserved characters (newline is not allowed in QuerySet keys)"),
    (" lead", "Key cannot have leading or trailing whitespace"),
    ("queryText", "Key 'queryText' is reserved and cannot be used as a custom field name"),
    ("referenceAnswer", None),
])
def test_key_rules(key, error) -> None:
    assert query_set_key_error(key) == error


@pytest.mark.parametrize("x, text", [
    (1.0, "1.0"), (0.85, "0.85"), (1e-5, "1.0E-5"), (100.0, "100.0"), (0.001, "0.001"),
    (0.0001, "1.0E-4"), (1234567.0, "1234567.0"), (1e7, "1.0E7"), (12345678.9, "1.23456789E7"),
    (-0.5, "-0.5"), (0.0, "0.0"), (3.0e-10, "3.0E-10"),
    (0.30000000000000004, "0.30000000000000004"),
    # Java 19+ takes two digits when a two-digit decimal is nearer than the one-digit shortest
    (5e-324, "4.9E-324"), (1e-323, "9.9E-324"), (7e-323, "6.9E-323"), (2e-323, "2.0E-323"),
    (1e23, "1.0E23"), (2.82879384806159e17, "2.82879384806159E17"),
])
def test_double_to_string_matches_java(x: float, text: str) -> None:
    assert double_to_string(x) == text


def test_java_string_of_json_values() -> None:
    assert [java_string(v) for v in (1, 1.5, True, "x", 2.0)] == ["1", "1.5", "true", "x", "2.0"]
