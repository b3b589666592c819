"""The body of a list request (``GET`` on an entity collection): ``size`` and ``sort``
(docs/contract.md, "Lists and paging").

Defaults: 1000 entities, ``timestamp`` descending; only the exact ``"asc"`` sorts ascending. A
sort field that is not a field name (``"."``, ``"a..b"``) is refused here, because the cluster
fails such a sort with a 500.
"""

from __future__ import annotations

from typing import Any

from marshmallow import ValidationError

from workbench.schemas.body import BodyField, BodySchema
from workbench.schemas.numbers import MAX_RESULT_WINDOW, bounded_int

DEFAULT_SIZE = 1000


class _Size(BodyField):
    def check(self, value: Any) -> int:
        return bounded_int(value, "size", 0, MAX_RESULT_WINDOW)


class _Sort(BodyField):
    """``{"field": {"order": "asc"}}``: the first entry counts; anything else is the default."""

    def check(self, value: Any) -> tuple[str, str]:
        if not isinstance(value, dict) or not value:
            return "timestamp", "desc"
        field, spec = next(iter(value.items()))
        if not all(field.split(".")):
            raise ValidationError(f"sort field [{field}] is not a field name")
        ascending = isinstance(spec, dict) and spec.get("order") == "asc"
        return field, "asc" if ascending else "desc"


class ListBodySchema(BodySchema):
    """``size`` then ``sort``, in the order the workbench has always checked them."""

    size = _Size(data_key="size", load_default=DEFAULT_SIZE)
    sort = _Sort(data_key="sort", load_default=("timestamp", "desc"))
