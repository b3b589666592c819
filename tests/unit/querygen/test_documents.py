"""The parts of the document sample that need no cluster (``querygen/documents.py``): how a
stratified draw shares the count, interleaves, and reads a dotted path. The draw itself is
tested against OpenSearch in ``tests/integration/test_querygen_documents.py``."""

from __future__ import annotations

import pytest

from workbench.querygen import documents
from workbench.querygen.documents import SourceDocument, allocate


@pytest.mark.parametrize(("count", "sizes", "quotas"), [
    (2, [10, 5, 1], [1, 1, 0]),  # fewer than the strata: the largest first
    (3, [10, 5, 1], [1, 1, 1]),
    # one each, then 7 shared over 49/29/19 left: 3.54, 2.09, 1.37 -> 3, 2, 1 and the largest
    # remainder (the first) takes the last one
    (10, [50, 30, 20], [5, 3, 2]),
    (10, [3, 1, 1], [3, 1, 1]),  # never more than a stratum has
    (5, [1, 1], [1, 1]),
    (8, [30, 15, 10, 5], [3, 2, 2, 1]),
])
def test_allocate(count: int, sizes: list[int], quotas: list[int]) -> None:
    assert allocate(count, sizes) == quotas


def test_interleave() -> None:
    a1, a2, a3, b1, c1, c2 = (SourceDocument(name, {}) for name in ("a1", "a2", "a3", "b1",
                                                                   "c1", "c2"))
    assert list(documents._interleave([[a1, a2, a3], [b1], [c1, c2]])) == [
        a1, b1, c1, a2, c2, a3]


def test_a_dotted_path() -> None:
    at = documents._at
    assert at({"attributes": {"color": "red"}}, ["attributes", "color"]) == "red"
    assert at({"attributes.color": "blue"}, ["attributes", "color"]) == "blue"  # a flat key
    assert at({"variants": [{"color": "red"}, {"size": 1}, {"color": "blue"}]},
              ["variants", "color"]) == ["red", "blue"]
    assert at({"title": "red shoe"}, ["title", "keyword"]) == "red shoe"  # a multi-field
    assert at({"attributes": {"size": 4}}, ["attributes", "color"]) is documents._MISSING
    assert at({"title": None}, ["title"]) is None
    assert at({}, ["title"]) is documents._MISSING
