"""The model registry's request bodies: ``PUT|POST /models`` and ``PUT /models/{id}``.

What a model is, is the rule the environment list shares (llm/spec.py), with the operator's
trusted endpoints (llm/endpoints.py): both sit a layer above this one, so the schemas are given
them as callables, with the exception they raise for a wrong field (``invalid``:
llm/spec.SpecError, whose text names the field). Every reason is ``Invalid model: `` and that
text; any other exception is not the body's fault and is raised as it is. Whether the model is
the environment's, and storing its key (which needs the secret key), are the route's.

A body is read in two steps, as a change must be merged with the stored model before the whole
is checked: ``ModelChangesSchema`` gives the fields under their canonical names, and
``ModelSchema`` checks a complete model (nulls already dropped).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from marshmallow import INCLUDE, ValidationError, missing, post_load, pre_load

from workbench.schemas.body import BodyField, BodySchema

PREFIX = "Invalid model: "
BOTH_KEYS = ('field "apiKey" and "apiKeyEnv" cannot both be given: store the key, or name the '
             "environment variable holding it")


def _invalid(exc: Exception) -> ValidationError:
    return ValidationError(f"{PREFIX}{exc}")


class _PathId(BodyField):
    """``id``, when the path names the model: it cannot be another one (null included)."""

    def deserialize(self, value: Any, attr: str | None = None,
                    data: Any = None, **kwargs: Any) -> Any:
        path_id = self.parent.path_id  # type: ignore[union-attr]
        if value is missing:
            return missing
        if path_id is not None and value != path_id:
            raise ValidationError(f'{PREFIX}field "id" cannot be changed (it is the path\'s id)')
        return value


class ModelChangesSchema(BodySchema):
    """A body with canonical field names (``base_url`` -> ``endpoint``...: ``normalise``), every
    field kept, nulls included (in a change, null removes a field). ``path_id``: the id of the
    model changed, which ``id`` may only repeat."""

    class Meta:
        unknown = INCLUDE  # a field the provider does not know is the model's rule to refuse

    id = _PathId(data_key="id")

    def __init__(self, normalise: Callable[[dict[str, Any]], dict[str, Any]],
                 invalid: type[Exception], path_id: str | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.normalise, self.invalid, self.path_id = normalise, invalid, path_id
        self.order: list[str] = []

    @pre_load
    def _canonical(self, data: Any, **kwargs: Any) -> Any:
        try:
            canonical = self.normalise(data)
        except self.invalid as exc:
            raise _invalid(exc) from None
        self.order = list(canonical)
        return canonical

    @post_load
    def _in_order(self, data: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        return {key: data[key] for key in self.order if key in data}  # as the client sent them


class _Model(BodyField):
    """The whole body as the model it registers (``parse``)."""

    def deserialize(self, value: Any, attr: str | None = None,
                    data: Any = None, **kwargs: Any) -> Any:
        schema: ModelSchema = self.parent  # type: ignore[assignment]
        try:
            return schema.parse(data)
        except schema.invalid as exc:
            raise _invalid(exc) from None


class _ApiKey(BodyField):
    """A key to store (``check_key``), never beside the name of a variable holding one."""

    def deserialize(self, value: Any, attr: str | None = None,
                    data: Any = None, **kwargs: Any) -> Any:
        if value is missing or value is None:
            return None
        schema: ModelSchema = self.parent  # type: ignore[assignment]
        try:
            schema.check_key(value)
        except schema.invalid as exc:
            raise _invalid(exc) from None
        if isinstance(data, dict) and data.get("apiKeyEnv") is not None:
            raise ValidationError(f"{PREFIX}{BOTH_KEYS}")
        return value


class ModelSchema(BodySchema):
    """A complete model (canonical names, no nulls): loads ``spec`` (what ``parse`` returns)
    and ``apiKey`` (the key as given, or None)."""

    spec = _Model()
    apiKey = _ApiKey(data_key="apiKey")

    def __init__(self, parse: Callable[[dict[str, Any]], Any], check_key: Callable[[Any], Any],
                 invalid: type[Exception], **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.parse, self.check_key, self.invalid = parse, check_key, invalid
