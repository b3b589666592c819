"""Request bodies of the A/B test routes (docs/ab-tests.md): create, update and the interleaved
search.

The plugin checks these bodies in its REST handlers and answers a failure as a bare
``text/plain`` 400 with exactly its message, so every check here raises ``TextError`` in the
plugin's order; the extensions (``client_id``, ``from``, ``size``) come after the plugin's own
checks and answer in OpenSearch's JSON error envelope, naming the field.
"""

from __future__ import annotations

from typing import Any

from marshmallow import ValidationError

from workbench.errors import TextError
from workbench.schemas.body import Step, StepSchema
from workbench.schemas.java_hash_map import hash_map_order
from workbench.schemas.javafmt import hash_map_string
from workbench.schemas.numbers import MAX_RESULT_WINDOW, bounded_int

CONFIG_A, CONFIG_B, ENABLED = "search_configuration_a", "search_configuration_b", "enabled"
#: the longest ``query_params`` value the plugin accepts
MAX_PARAM_CHARS = 1024
#: the longest client id kept with an impression (``ubi_queries.client_id`` indexes 100)
MAX_CLIENT_ID_CHARS = 100
#: how many hits one page may ask for (``from + size`` is what each side searches for)
MAX_PAGE = 100
#: a field name no body uses: the ``Step`` that checks the body as a whole
_WHOLE = "\0body"


def _text_400(message: str) -> TextError:
    return TextError(400, message)


class _NotEmpty(Step):
    def check(self, value: Any) -> None:
        if not self.body:
            raise _text_400("Request body must not be empty")


class _ConfigId(Step):
    def check(self, value: Any) -> str | None:
        if value is not None and not isinstance(value, str):
            raise _text_400(f"{self.data_key} must be a string")
        return value if value and value.strip() else None


class _Enabled(Step):
    def check(self, value: Any) -> bool | None:
        if value is not None and not isinstance(value, bool):
            raise _text_400("enabled must be a boolean")
        return value


class _BothGiven(Step):
    def check(self, value: Any) -> None:
        a, b = self.loaded.get("a"), self.loaded.get("b")
        if a is None or b is None:
            raise _text_400(f"Both {CONFIG_A} and {CONFIG_B} are required")
        if a == b:
            raise _text_400(f"{CONFIG_A} and {CONFIG_B} must be different")


class _AnyField(Step):
    def check(self, value: Any) -> None:
        if all(self.loaded.get(name) is None for name in ("a", "b", "enabled")):
            raise _text_400("At least one field must be provided for update")


class _ABTestFields(StepSchema):
    """The checks create and update share, in the plugin's order; each adds its last one."""

    not_empty = _NotEmpty(data_key=_WHOLE)
    a = _ConfigId(data_key=CONFIG_A)
    b = _ConfigId(data_key=CONFIG_B)
    enabled = _Enabled(data_key=ENABLED)


class CreateABTestSchema(_ABTestFields):
    """``PUT /ab_tests/{id}``: both configuration ids, ``enabled`` (default true). Other keys
    (the plugin UI sends ``name`` and ``size``) are ignored, as the plugin ignores them."""

    both = _BothGiven(data_key=_WHOLE + "both")


class UpdateABTestSchema(_ABTestFields):
    """``PUT /ab_tests/{id}/_update``: any of the three fields; those absent stay as they are."""

    any_field = _AnyField(data_key=_WHOLE + "any")


class _QueryParams(Step):
    """A non-empty object; every value is read as the plugin reads it, as Java's
    ``String.valueOf`` writes the value parsed (``hash_map_string``: ``[a, b]``, ``{k=1}``,
    ``true``, ``null``, ``1.0``)."""

    def check(self, value: Any) -> dict[str, str]:
        if not isinstance(value, dict) or not value:
            raise _text_400("query_params map is required")
        params = {str(k): v if isinstance(v, str) else hash_map_string(v)
                  for k, v in value.items()}
        for text in params.values():
            if _value_error(text) is not None:
                # the plugin names the first failing value in its map's (a HashMap's) order
                for name in hash_map_order(params):
                    error = _value_error(params[name])
                    if error is not None:
                        raise _text_400(error)
        return params


def _value_error(text: str) -> str | None:
    """The plugin's message for a value it refuses. Java counts UTF-16 units (an emoji is 2);
    a text of at most half the limit cannot exceed it, so only a longer one is encoded."""
    if len(text) > MAX_PARAM_CHARS // 2 and (
            len(text) > MAX_PARAM_CHARS or len(text.encode("utf-16-le")) // 2 > MAX_PARAM_CHARS):
        return f"query_params value exceeds maximum length of {MAX_PARAM_CHARS} characters"
    if any(ord(c) < 0x20 and c not in "\t\n\r" for c in text):
        return "query_params value contains invalid control characters"
    return None


class _ClientId(Step):
    def check(self, value: Any) -> str | None:
        if value is None:
            return None
        if not isinstance(value, str) or not value.strip():
            raise ValidationError("client_id (or the X-Client-Id header) must be a non-empty "
                                  "string")
        if len(value) > MAX_CLIENT_ID_CHARS:
            raise ValidationError(f"client_id (or the X-Client-Id header) must be at most "
                                  f"{MAX_CLIENT_ID_CHARS} characters, got {len(value)}")
        return value


class _From(Step):
    def check(self, value: Any) -> int:
        return bounded_int(0 if value is None else value, "from", 0, MAX_RESULT_WINDOW)


class _Size(Step):
    def check(self, value: Any) -> int | None:
        return None if value is None else bounded_int(value, "size", 0, MAX_PAGE)


class ABTestSearchSchema(StepSchema):
    """``POST /ab_tests/{id}/_search``: ``query_params`` (the plugin's checks), then the
    workbench's ``client_id`` (whose interleaving this is), ``from`` and ``size``."""

    query_params = _QueryParams(data_key="query_params")
    client_id = _ClientId(data_key="client_id")
    from_ = _From(data_key="from")
    size = _Size(data_key="size")
