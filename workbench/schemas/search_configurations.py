"""The request body of a search configuration: ``PUT /search_configurations``.

Whether ``query`` can be sent is the store's rule (store/search_render.query_error, a layer
above this one): the schema is given it as ``query_check``, and calls it in field order.
Whether ``index`` exists is asked of the cluster by the route, after the body is valid.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from marshmallow import ValidationError

from workbench.schemas.body import BodyField, NamedBodySchema, string_field


class _Index(BodyField):
    def check(self, value: Any) -> str:
        index = string_field(value, "index")
        if not index or not index.strip():
            raise ValidationError("index is required")
        return index.strip()


class _Query(BodyField):
    def check(self, value: Any) -> str:
        error = self.parent.query_check(value)  # type: ignore[union-attr]
        if error:
            raise ValidationError(error)
        assert isinstance(value, str)
        return value.strip()


class _Pipeline(BodyField):
    """``searchPipeline``: a string; it need not name a pipeline that exists yet (the plugin
    does not check either): a job that runs the configuration checks it and ends ERROR."""

    def check(self, value: Any) -> str:
        return (string_field(value, "searchPipeline") or "").strip()


class SearchConfigurationSchema(NamedBodySchema):
    """``PUT /search_configurations``: name, description, index, query, searchPipeline."""

    index = _Index(data_key="index")
    query = _Query(data_key="query")
    searchPipeline = _Pipeline(data_key="searchPipeline")

    def __init__(self, query_check: Callable[[Any], str | None], **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.query_check = query_check
