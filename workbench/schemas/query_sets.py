"""The request bodies of query sets: ``PUT`` (manual) and ``POST`` (sampled).

``maximum`` is the ``query_set.maximum`` plugin setting: more queries than that is a 403
(``QuerySetLimitExceeded``), checked before the queries themselves, as the plugin does.
"""

from __future__ import annotations

from typing import Any

from marshmallow import ValidationError

from workbench.errors import BadRequest
from workbench.schemas import request_json
from workbench.schemas.body import BodyField, BodySchema, NamedBodySchema, Text, string_field
from workbench.schemas.javafmt import java_string
from workbench.schemas.text import (
    LEGACY_LIMIT,
    query_set_key_error,
    query_set_value_error,
)

FIELD = "querySetQueries"
SAMPLERS = ("pptss", "topn", "random")
DEFAULT_SIZE = 10
DEFAULT_UBI_INDEX = "ubi_queries"


class QuerySetLimitExceeded(BadRequest):
    status = 403
    error_type = "search_relevance_exception"

    def __init__(self) -> None:
        super().__init__("Query Set Limit Exceeded.")


def _as_list(raw: Any) -> list[Any]:
    """Dashboards may send the queries as one string: a JSON array, NDJSON, or one per line.
    Such a string must hold at least one query (a blank one is not an empty set)."""
    if isinstance(raw, list):
        return raw
    if isinstance(raw, str):
        text = raw.strip()
        if not text:
            raise ValidationError("querySetQueries must hold at least one query, got an empty "
                                  "string")
        if text.startswith("["):
            try:
                parsed = request_json.loads(text, FIELD)
            except ValueError:
                raise ValidationError("querySetQueries is not a valid JSON array") from None
            if isinstance(parsed, list):
                return parsed
        items: list[Any] = []
        for number, line in enumerate(raw.splitlines(), start=1):
            line = line.strip()
            if not line:
                continue
            if line.startswith("{"):
                try:
                    items.append(request_json.loads(line, f"{FIELD}[{len(items)}]"))
                except ValueError:
                    raise ValidationError(
                        f"querySetQueries line {number} is not valid JSON") from None
            else:
                items.append({"queryText": line})
        return items
    raise ValidationError("querySetQueries must be a list of query objects")


def _entry(item: Any) -> dict[str, Any]:
    """One query of a manual set as it is stored: ``queryText`` and ``customFields``."""
    if item is None:
        raise ValidationError("Query object cannot be null")
    if isinstance(item, str):
        item = {"queryText": item}
    if not isinstance(item, dict):
        raise ValidationError("Query object must be a JSON object with queryText")
    if item.get("queryText") is None:
        raise ValidationError("queryText is required")
    query_text = java_string(item["queryText"])
    error = query_set_value_error(query_text)
    if error:
        raise ValidationError(f"Invalid queryText: {error}")
    custom: dict[str, str] = {}
    for key, value in item.items():
        if key == "queryText" or value is None:
            continue
        text = java_string(value)
        key_error = query_set_key_error(key)
        if key_error:
            raise ValidationError(f"Invalid field name '{key}': {key_error}")
        if text:
            value_error = query_set_value_error(text)
            if value_error:
                raise ValidationError(f"Invalid value for field '{key}': {value_error}")
        custom[key] = text
    return {"queryText": query_text, "customFields": custom}


class _Queries(BodyField):
    """``querySetQueries``: a list (or one string of them), at most ``maximum`` entries."""

    def check(self, value: Any) -> list[dict[str, Any]]:
        if value is None:
            raise ValidationError("querySetQueries is required")
        items = _as_list(value)
        if len(items) > self.parent.maximum:  # type: ignore[union-attr]
            raise QuerySetLimitExceeded()
        return [_entry(item) for item in items]


class _ManualSampling(BodyField):
    def check(self, value: Any) -> str:
        # Absent is manual (the field's default); anything else (null included) is refused,
        # quoted as Java would not (``None``): the message the workbench has always given.
        if value != "manual":
            raise ValidationError(f"Support sampling as manual only. sampling: {value}")
        return "manual"


class ManualQuerySetSchema(NamedBodySchema):
    """``PUT /query_sets``: name, description, ``sampling`` (``manual``), querySetQueries."""

    sampling = _ManualSampling(data_key="sampling", load_default="manual")
    querySetQueries = _Queries(data_key="querySetQueries")

    def __init__(self, maximum: int, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.maximum = maximum


class _Size(BodyField):
    """``querySetSize``: a JSON number, truncated to an integer as the plugin does; positive,
    and at most ``maximum``. Absent is 10; an explicit null is "must be a number"."""

    def check(self, value: Any) -> int:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ValidationError("querySetSize must be a number")
        size = int(value)
        if size <= 0:
            raise ValidationError(f"querySetSize must be a positive integer, got: {value}")
        if size > self.parent.maximum:  # type: ignore[union-attr]
            raise QuerySetLimitExceeded()
        return size


class _UbiIndex(BodyField):
    """``ubiQueriesIndex``: a string; absent, null or any false value is ``ubi_queries``."""

    def check(self, value: Any) -> str:
        index = string_field(value or DEFAULT_UBI_INDEX, "ubiQueriesIndex")
        assert index is not None
        return index


class _Sampler(BodyField):
    def check(self, value: Any) -> str:
        if value not in SAMPLERS:
            raise ValidationError(f"Unknown sampler type: {value}")
        assert isinstance(value, str)
        return value


class SampledQuerySetSchema(BodySchema):
    """``POST /query_sets``: name, description, querySetSize, ubiQueriesIndex, sampling."""

    name = Text("name", LEGACY_LIMIT)
    description = Text("description", LEGACY_LIMIT, optional=True)
    querySetSize = _Size(data_key="querySetSize", load_default=DEFAULT_SIZE)
    ubiQueriesIndex = _UbiIndex(data_key="ubiQueriesIndex")
    sampling = _Sampler(data_key="sampling", load_default="pptss")

    def __init__(self, maximum: int, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.maximum = maximum
