"""What the ``_evaluate`` request shapes share, and the body of ``_evaluate/_batch``.

The workbench's own shape is ``schemas/evaluate_workbench.py``, the retrieval-evaluation API's
``schemas/evaluate_brief.py``; ``evaluation/workbench_shape.py`` and ``evaluation/brief_shape.py``
turn what they load into an evaluation. Several of their rules read more than one field (the hits
shown through ``fields``, ``k`` defaulting to the number of hits): such a rule is a ``BodyRule``,
given the whole body and reported in its own place in the field order, so a body's first error is
the one the fields checked one by one would give.
"""

from __future__ import annotations

from typing import Any

from marshmallow import ValidationError, missing

from workbench.errors import BadRequest
from workbench.schemas.body import BodyField, BodySchema, string_field

DEFAULT_JUDGE = "llm"
# Judge options that may be given at the top level of the request, as before judgeOptions.
TOP_LEVEL_OPTIONS = ("modelId", "threshold", "minTokens", "queryBoost")
# The settings a batch shares with its entries.
SHARED = ("judge", "modelId", "k", "fields", "judgeOptions")

# A pasted hit: its id and the fields shown to the judge.
PastedHit = tuple[str, dict[str, Any]]


class BodyRule(BodyField):
    """A rule over the whole body: ``check`` is given the body, not the field's value."""

    def deserialize(self, value: Any, attr: str | None = None,
                    data: Any = None, **kwargs: Any) -> Any:
        return super().deserialize(data if isinstance(data, dict) else {}, attr, data, **kwargs)


def string_of(body: dict[str, Any], *names: str) -> str | None:
    """The first of ``names`` present, which must be a string."""
    for name in names:
        value = body.get(name)
        if value is not None:
            return string_field(value, name)
    return None


def references(value: Any, field: str = "referenceAnswer") -> tuple[str, ...]:
    """One reference answer or a list of them; blank ones are dropped."""
    if value is None:
        return ()
    items = value if isinstance(value, list) else [value]
    if not items or not all(isinstance(item, str) for item in items):
        raise ValidationError(f"{field} must be a string or a non-empty list of strings")
    return tuple(item for item in items if item.strip())


def field_names(value: Any, field: str = "fields") -> list[str] | None:
    """``fields``: the fields shown to the judge (None: all of a hit's but its id)."""
    if value is None:
        return None
    if not isinstance(value, list) or not value or not all(isinstance(f, str) for f in value):
        raise ValidationError(f"{field} must be a non-empty list of field names")
    return value


def pick(source: dict[str, Any], fields: list[str] | None) -> dict[str, Any]:
    """The fields shown to the judge: the named ones, or all but the id."""
    if fields is None:
        return {k: v for k, v in source.items() if k not in ("id", "_id")}
    return {f: source[f] for f in fields if f in source}


def pasted(hits: Any, fields: list[str] | None, field: str = "hits") -> list[PastedHit]:
    """The hits given in the request (``{"id": ..., "<field>": ...}``, or a search hit with
    ``_id`` and ``_source``), in rank order."""
    if not isinstance(hits, list) or not hits:
        raise ValidationError(
            f"{field} must be a non-empty list of {{\"id\": ..., \"<field>\": ...}}")
    out = []
    for number, hit in enumerate(hits):
        if not isinstance(hit, dict):
            raise ValidationError(f"{field}[{number}] must be an object")
        doc_id = hit.get("id", hit.get("_id"))
        if doc_id is None or (isinstance(doc_id, str) and not doc_id.strip()):
            raise ValidationError(f"{field}[{number}] has no id")
        inner = hit.get("_source")
        source: dict[str, Any] = inner if isinstance(inner, dict) else hit
        out.append((str(doc_id), pick(source, fields)))
    return out


def judge_options(body: dict[str, Any]) -> tuple[dict[str, Any], frozenset[str]]:
    """``judgeOptions`` plus the options given at the top level, and the names of the latter
    (given for whichever judge is picked, so one that does not take them ignores them)."""
    options = body.get("judgeOptions", {})
    if not isinstance(options, dict):
        raise ValidationError("judgeOptions must be an object")
    options = dict(options)
    shared = set()
    for name in TOP_LEVEL_OPTIONS:
        if body.get(name) is not None and name not in options:
            options[name] = body[name]
            shared.add(name)
    return options, frozenset(shared)


class References(BodyField):
    """``referenceAnswer``: a string or a list of them, blank ones dropped."""

    def check(self, value: Any) -> tuple[str, ...]:
        return references(value)


class JudgeName(BodyRule):
    """``judge``: a judge's name (checked by the judge registry, above this layer); absent is
    ``llm``."""

    def check(self, body: dict[str, Any]) -> Any:
        return body.get("judge", DEFAULT_JUDGE)


class JudgeOptions(BodyRule):
    """``judgeOptions`` with the top-level options: ``(options, names given at the top)``."""

    def check(self, body: dict[str, Any]) -> tuple[dict[str, Any], frozenset[str]]:
        return judge_options(body)


# -- POST /_evaluate/_batch --------------------------------------------------------------------

class _Queries(BodyRule):
    """``queries``: the entries, each checked later in its own shape; and no other field but the
    shared settings."""

    def check(self, body: dict[str, Any]) -> list[Any]:
        queries = body.get("queries")
        if not isinstance(queries, list) or not queries:
            raise ValidationError("queries must be a non-empty list of evaluations (each an "
                                  "_evaluate body, in either shape)")
        for name in body:
            if name not in (*SHARED, "queries"):
                raise ValidationError(f"Unknown field [{name}] of a batch: give queries and the "
                                      f"shared settings {', '.join(SHARED)}")
        return queries


class _Shared(BodyField):
    """A shared setting, checked as an entry would check it; absent or null is left out."""

    def check(self, value: Any) -> Any:
        return missing if value is None else self.rule(value)

    def rule(self, value: Any) -> Any:
        return value


class _SharedFields(_Shared):
    def rule(self, value: Any) -> Any:
        return field_names(value)


class _SharedOptions(_Shared):
    def rule(self, value: Any) -> Any:
        if not isinstance(value, dict):
            raise ValidationError("judgeOptions must be an object")
        return value


class _SharedModel(_Shared):
    def rule(self, value: Any) -> Any:
        return string_field(value, "modelId")


class BatchSchema(BodySchema):
    """``POST /_evaluate/_batch``: ``queries`` and the shared settings (those given, by name)."""

    queries = _Queries(data_key="queries")
    fields_ = _SharedFields(data_key="fields", attribute="fields")
    judgeOptions = _SharedOptions(data_key="judgeOptions")
    modelId = _SharedModel(data_key="modelId")
    judge = _Shared(data_key="judge")
    k = _Shared(data_key="k")


def entry_body(position: int, item: Any) -> dict[str, Any]:
    """Batch entry ``position``, which must be an object (an ``_evaluate`` body)."""
    if not isinstance(item, dict):
        raise BadRequest(f"queries[{position}] must be an object (an _evaluate body)")
    return item
