"""Request bodies as marshmallow schemas, and the ONE place their errors become a ``BadRequest``.

A body's first error (in the order its schema declares its fields) is the request's 400, with the
exact reason the plugin gives. A field may also fail with a workbench error of its own (a 403
limit, an unreachable cluster while reading a limit): it is raised as it is, but only when no
earlier field failed, so a body is answered as if its fields were checked one by one.
"""

from __future__ import annotations

from typing import Any

from marshmallow import EXCLUDE, Schema, ValidationError, fields, missing, pre_load

from workbench.errors import BadRequest
from workbench.schemas.text import DESCRIPTION_LIMIT, NAME_LIMIT, text_error


class BodySchema(Schema):
    """A request body: unknown fields are ignored, as the plugin ignores them."""

    class Meta:
        unknown = EXCLUDE


class BodyField(fields.Field):
    """A field that checks its raw value itself (``check``): an absent field is ``None`` unless
    the field has a ``load_default`` (then it loads as that, unchecked; an explicit ``null`` is
    still checked), and an exception other than a ``ValidationError`` becomes this field's
    error, kept as it is."""

    def check(self, value: Any) -> Any:
        return value

    def deserialize(self, value: Any, attr: str | None = None,
                    data: Any = None, **kwargs: Any) -> Any:
        if value is missing and self.load_default is not missing:
            return self.load_default
        try:
            return self.check(None if value is missing else value)
        except ValidationError:
            raise
        except Exception as exc:
            raise ValidationError([exc]) from exc


class StepSchema(BodySchema):
    """A body whose fields are checked one after the other, as the workbench always checked them.

    Its ``Step`` fields see the whole body, the ``rules`` the view or domain gives (checks that
    need a layer above this one, such as a read of the cluster) and the values loaded before them
    (``loaded``, by field name). Once a field failed (``failed``) every later ``Step`` is skipped:
    ``load`` reports the first failing field in declared order either way, and a bad body costs
    no read of a service."""

    def __init__(self, rules: Any = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.rules = rules
        self.loaded: dict[str, Any] = {}
        self.failed = False

    @pre_load
    def _start(self, data: Any, **_: Any) -> Any:
        self.loaded, self.failed = {}, False
        return data


class Step(BodyField):
    """A field of a ``StepSchema``: skipped once an earlier field failed; ``check`` may read
    ``self.body``, ``self.rules`` and ``self.loaded``, and its value joins ``loaded`` under the
    field's name once it passed."""

    body: dict[str, Any]

    @property
    def schema(self) -> StepSchema:
        assert isinstance(self.parent, StepSchema)
        return self.parent

    @property
    def rules(self) -> Any:
        return self.schema.rules

    @property
    def loaded(self) -> dict[str, Any]:
        return self.schema.loaded

    def deserialize(self, value: Any, attr: str | None = None,
                    data: Any = None, **kwargs: Any) -> Any:
        schema = self.schema
        if schema.failed:
            return missing
        self.body = data if isinstance(data, dict) else {}
        try:
            result = super().deserialize(value, attr, data, **kwargs)
        except ValidationError:
            schema.failed = True
            raise
        if result is not missing:
            schema.loaded[str(self.name)] = result
        return result


def string_field(value: Any, name: str) -> str | None:
    """A field that must be a string when present (Java casts it; a wrong type is a 400 here)."""
    if value is not None and not isinstance(value, str):
        raise ValidationError(f"Field '{name}' must be a string")
    return value


class Text(BodyField):
    """A name or description: a string under the text rules (schemas/text.py), stripped.
    ``optional``: absent or null is allowed and loads as ``""``."""

    def __init__(self, name: str, limit: int, optional: bool = False, **kwargs: Any) -> None:
        super().__init__(data_key=name, **kwargs)
        self.label, self.limit, self.optional = name, limit, optional

    def check(self, value: Any) -> str:
        value = string_field(value, self.label)
        if value is None and self.optional:
            return ""
        error = text_error(value, self.limit)
        if error:
            raise ValidationError(f"Invalid {self.label}: {error}")
        assert isinstance(value, str)
        return value.strip()


class NamedBodySchema(BodySchema):
    """A body that opens with the entity's ``name`` (required) and ``description`` (optional)
    under the text rules: query sets, search configurations, judgments, experiments."""

    name = Text("name", NAME_LIMIT)
    description = Text("description", DESCRIPTION_LIMIT, optional=True)


def load(schema: Schema, body: dict[str, Any]) -> dict[str, Any]:
    """``body`` loaded by ``schema``; its first error, in field order, raised as a
    ``BadRequest`` with the field's exact reason (or as the workbench error the field raised)."""
    try:
        result: dict[str, Any] = schema.load(body)
    except ValidationError as exc:
        raise _first_error(schema, exc.messages) from None
    finally:
        _forget(schema)
    return result


def _forget(schema: Schema) -> None:
    """Drop what a load left on the schema: its ``Step`` fields' ``body`` and the schema's
    ``loaded`` values. A schema and its fields point at each other, so a schema is freed only
    by the cycle collector, whenever it next runs; what it still held (a 500,000-rating body and
    its loaded copy: hundreds of MB) stayed in the process until then, after the request."""
    if isinstance(schema, StepSchema):
        schema.loaded = {}
    for field in schema.fields.values():
        field.__dict__.pop("body", None)


def _first_error(schema: Schema, messages: Any) -> Exception:
    if isinstance(messages, dict):
        order = [field.data_key or name for name, field in schema.fields.items()]
        keys = [k for k in order if k in messages] + [k for k in messages if k not in order]
        return _first_error(schema, messages[keys[0]])
    if isinstance(messages, list):
        return _first_error(schema, messages[0])
    if isinstance(messages, Exception):
        return messages
    return BadRequest(str(messages))
