"""The SRW text rules (docs/contract.md, "Text rules"): one validator, several length limits,
exact messages."""

from __future__ import annotations

from typing import Any

NAME_LIMIT = 50
DESCRIPTION_LIMIT = 250
LEGACY_LIMIT = 2000  # POST (sampled) query-set name/description, query-set values
KEY_LIMIT = 50
PROMPT_LIMIT = 10000

_DANGEROUS = set('"\\<>')
INVALID_CHARACTERS = (
    "Text contains invalid characters (quotes, backslashes, or HTML tags are not allowed)"
)


def _length(text: str) -> int:
    """Length in UTF-16 code units, as Java counts it."""
    return len(text.encode("utf-16-le")) // 2


def text_error(value: Any, limit: int) -> str | None:
    """The first rule ``value`` breaks, or None.

    Unlike the Java regex (whose ``.`` stops at line terminators), quotes, backslashes and angle
    brackets are refused anywhere in the text (docs/contract.md, "Text rules").
    """
    if value is None:
        return "Text cannot be null"
    if not isinstance(value, str):
        return "Text must be a string"
    if value == "":
        return "Text cannot be empty"
    if _length(value) > limit:
        return f"Text exceeds maximum length of {limit} characters"
    if _DANGEROUS.intersection(value):
        return INVALID_CHARACTERS
    return None


def query_set_value_error(value: str) -> str | None:
    """Rules for ``queryText`` and custom-field values: the text rules, then no newlines."""
    error = text_error(value, LEGACY_LIMIT)
    if error:
        return error
    if "\n" in value or "\r" in value:
        return "Text contains reserved characters (newline is not allowed in QuerySet values)"
    return None


def query_set_key_error(key: str | None) -> str | None:
    """Rules for custom-field names."""
    if key is None:
        return "Key cannot be null"
    if key == "":
        return "Key cannot be empty"
    if _length(key) > KEY_LIMIT:
        return f"Key exceeds maximum length of {KEY_LIMIT} characters"
    if "\n" in key or "\r" in key:
        return "Key contains reserved characters (newline is not allowed in QuerySet keys)"
    if key != key.strip():
        return "Key cannot have leading or trailing whitespace"
    if key == "queryText":
        return "Key 'queryText' is reserved and cannot be used as a custom field name"
    return None
