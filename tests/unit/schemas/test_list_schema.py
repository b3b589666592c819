"""The list body (``GET`` on an entity collection): defaults, the ascending rule, the refused
sort fields and sizes, with the exact reasons (schemas/lists.py)."""

from __future__ import annotations

from typing import Any

import pytest

from workbench.errors import BadRequest
from workbench.schemas.body import load
from workbench.schemas.lists import ListBodySchema
from workbench.schemas.numbers import MAX_RESULT_WINDOW


def loaded(body: dict[str, Any]) -> tuple[int, tuple[str, str]]:
    fields = load(ListBodySchema(), body)
    return fields["size"], fields["sort"]


def test_an_empty_body_lists_a_thousand_newest_first() -> None:
    assert loaded({}) == (1000, ("timestamp", "desc"))


@pytest.mark.parametrize(("sort", "expected"), [
    ({"name": {"order": "asc"}}, ("name", "asc")),
    ({"name": {"order": "ASC"}}, ("name", "desc")),  # only the exact "asc"
    ({"name": "asc"}, ("name", "desc")),
    ({"a.b": {"order": "asc"}, "c": {"order": "desc"}}, ("a.b", "asc")),  # the first counts
    ({}, ("timestamp", "desc")),
    ("name", ("timestamp", "desc")),
])
def test_sort_reads_its_first_entry(sort: Any, expected: tuple[str, str]) -> None:
    assert loaded({"sort": sort, "size": 5}) == (5, expected)


@pytest.mark.parametrize("field", [".", "a..b", "a.", ".a"])
def test_a_sort_field_that_is_not_a_field_name_is_refused(field: str) -> None:
    with pytest.raises(BadRequest) as caught:
        loaded({"sort": {field: {"order": "asc"}}})
    assert caught.value.reason == f"sort field [{field}] is not a field name"


@pytest.mark.parametrize(("size", "reason"), [
    (-1, "size must be a non-negative integer, got: -1"),
    (None, "size must be a non-negative integer, got: None"),
    (True, "size must be a non-negative integer, got: True"),
    (1.5, "size must be a non-negative integer, got: 1.5"),
    (MAX_RESULT_WINDOW + 1, f"size must be at most {MAX_RESULT_WINDOW}, got: "
                            f"{MAX_RESULT_WINDOW + 1}"),
])
def test_a_bad_size_is_refused_before_the_sort(size: Any, reason: str) -> None:
    with pytest.raises(BadRequest) as caught:
        loaded({"size": size, "sort": {".": {}}})
    assert caught.value.reason == reason


def test_size_zero_is_allowed() -> None:
    assert loaded({"size": 0}) == (0, ("timestamp", "desc"))
