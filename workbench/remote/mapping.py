"""A remote engine's answer mapped to OpenSearch-shaped hits (``_id``, ``_score``, ``_source``).

``responseTemplate`` is a preset's name, or an object of paths (``preset`` naming one whose
paths it overrides): ``hits`` (the list of hits in the answer), ``id``, ``score``, ``source``
and ``fields`` (``{name: path}``: the ``_source`` built field by field) are read on each hit.

Presets:

* ``opensearch`` / ``elasticsearch``: hits ``$.hits.hits``, id ``$._id``, score ``$._score``,
  source ``$._source``. Without overrides the hits are kept as the engine answers them (only
  ``_id`` made a string, ``_score`` and ``_source`` present).
* ``solr``: hits ``$.response.docs``, id ``$.id``, score ``$.score``, source ``$`` (the doc).
* none: a generic JSON answer; ``hits`` and ``id`` are required.

A path is a small JSONPath subset written by hand: ``$`` then steps ``.key``, ``['key']`` (or
``["key"]``, a backslash escaping the quote) and ``[n]`` (a list index, from 0); the leading
``$.`` may be left out. There are no filters, wildcards or expressions: nothing a user writes
is evaluated, a path only walks down the answer.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field, replace
from typing import Any

Path = tuple[str | int, ...]

PRESET_NAMES = ("opensearch", "elasticsearch", "solr")
TEMPLATE_KEYS = ("preset", "hits", "id", "score", "source", "fields")
_KEY = re.compile(r"[^.\[\]'\"\s]+")
_INDEX = re.compile(r"\[(\d+)\]")


class MappingError(ValueError):
    """A ``responseTemplate`` that is not one; ``field`` is where (``responseTemplate.hits``)."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field


class Unmappable(ValueError):
    """An answer the mapping cannot read; ``str()`` says where."""


def parse_path(text: str, field: str = "responseTemplate") -> Path:
    """The steps of a path (keys and list indices); a path that is not one is a MappingError."""
    if not isinstance(text, str) or not text.strip():
        raise MappingError(field, "must be a path such as $.hits.hits")
    raw = text.strip()
    position = 0
    if raw.startswith("$"):
        position = 1
    elif not raw.startswith("["):
        raw = "." + raw  # the leading "$." left out
    steps: list[str | int] = []
    while position < len(raw):
        char = raw[position]
        if char == ".":
            match = _KEY.match(raw, position + 1)
            if match is None:
                raise MappingError(field, f"the path [{text}] has no key after the '.' at "
                                          f"character {position}")
            steps.append(match.group(0))
            position = match.end()
        elif raw.startswith("['", position) or raw.startswith('["', position):
            key, position = _quoted(raw, position + 1, text, field)
            steps.append(key)
        elif (match := _INDEX.match(raw, position)) is not None:
            steps.append(int(match.group(1)))
            position = match.end()
        else:
            raise MappingError(field, f"the path [{text}] cannot be read at character "
                                      f"{position}: use $, .key, ['key'] and [n] steps only")
    return tuple(steps)


def _quoted(raw: str, start: int, text: str, field: str) -> tuple[str, int]:
    """The key quoted at ``start`` (its quote character there) and the position after ``]``."""
    quote_char = raw[start]
    key: list[str] = []
    position = start + 1
    while position < len(raw):
        char = raw[position]
        if char == "\\" and position + 1 < len(raw):
            key.append(raw[position + 1])
            position += 2
            continue
        if char == quote_char:
            if raw.startswith("]", position + 1):
                return "".join(key), position + 2
            break
        key.append(char)
        position += 1
    raise MappingError(field, f"the path [{text}] has a quoted key not closed by {quote_char}]")


def resolve(data: Any, path: Path) -> tuple[bool, Any]:
    """(found, value) of ``path`` in ``data``; a step that does not apply is not found."""
    value = data
    for step in path:
        if isinstance(step, int):
            if not isinstance(value, list) or step >= len(value):
                return False, None
            value = value[step]
        else:
            if not isinstance(value, dict) or step not in value:
                return False, None
            value = value[step]
    return True, value


def show(path: Path) -> str:
    """A path in its canonical spelling, for reasons."""
    out = "$"
    for step in path:
        if isinstance(step, int):
            out += f"[{step}]"
        elif _KEY.fullmatch(step):
            out += f".{step}"
        else:
            out += "['" + step.replace("\\", "\\\\").replace("'", "\\'") + "']"
    return out


@dataclass(frozen=True)
class ResponseMapping:
    """How an answer becomes hits. ``raw_hits``: keep each hit as the engine answered it (an
    OpenSearch/Elasticsearch preset with nothing overridden)."""

    preset: str | None
    hits: Path
    id: Path
    score: Path | None = None
    source: Path | None = None
    fields: tuple[tuple[str, Path], ...] | None = None
    raw_hits: bool = False
    described: dict[str, Any] = field(default_factory=dict, compare=False)

    def signature(self) -> str:
        """A stable text of what the mapping reads (part of a cache key)."""
        return json.dumps([self.preset, self.hits, self.id, self.score, self.source,
                           self.fields, self.raw_hits], separators=(",", ":"))

    def map(self, answer: Any, size: int) -> list[dict[str, Any]]:
        """At most ``size`` hits of ``answer``, in the engine's order; an answer whose hits
        path matches no list, or a hit without an id, is ``Unmappable``."""
        found, hits = resolve(answer, self.hits)
        if not found:
            raise Unmappable(f"the hits path [{show(self.hits)}] matches nothing in the answer")
        if not isinstance(hits, list):
            raise Unmappable(f"the hits path [{show(self.hits)}] matches {_kind(hits)}, "
                             "not a list")
        return [self._hit(position, hit) for position, hit in enumerate(hits[:max(0, size)])]

    def _hit(self, position: int, hit: Any) -> dict[str, Any]:
        found, raw_id = resolve(hit, self.id)
        doc_id = coerce_id(raw_id) if found else None
        if doc_id is None:
            what = "matches nothing" if not found else f"is {_kind(raw_id)}"
            raise Unmappable(f"hit {position}: the id path [{show(self.id)}] {what}; an id must "
                             "be a non-empty string or a number")
        score = None
        if self.score is not None:
            score = coerce_score(resolve(hit, self.score)[1])
        if self.raw_hits and isinstance(hit, dict):
            source = hit.get("_source")
            return {**hit, "_id": doc_id, "_score": score,
                    "_source": source if isinstance(source, dict) else {}}
        return {"_id": doc_id, "_score": score, "_source": self._source(position, hit)}

    def _source(self, position: int, hit: Any) -> dict[str, Any]:
        if self.fields is not None:
            out = {}
            for name, path in self.fields:
                found, value = resolve(hit, path)
                if found:
                    out[name] = value
            return out
        if self.source is None:
            found, value = True, hit
        else:
            found, value = resolve(hit, self.source)
        if not found:
            return {}
        if not isinstance(value, dict):
            where = show(self.source) if self.source is not None else "$"
            raise Unmappable(f"hit {position}: the source path [{where}] matches "
                             f"{_kind(value)}, not an object")
        return value


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, str):
        return "an empty string" if not value else "a string"
    return "a list" if isinstance(value, list) else "an object"


def coerce_id(value: Any) -> str | None:
    """A hit's ``_id``: a non-empty string as it is, an integer (or a float with no fraction)
    in decimal, another finite number as Python writes it; anything else None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, str):
        return value or None
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float) and math.isfinite(value):
        return str(int(value)) if value.is_integer() else repr(value)
    return None


def coerce_score(value: Any) -> float | None:
    """A hit's ``_score``: a finite number (or a string of one) as a float, else None."""
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, (int, float)):
        return float(value) if math.isfinite(value) else None
    if isinstance(value, str):
        try:
            number = float(value)
        except ValueError:
            return None
        return number if math.isfinite(number) else None
    return None


_OPENSEARCH = ResponseMapping("opensearch", parse_path("$.hits.hits"), parse_path("$._id"),
                              parse_path("$._score"), parse_path("$._source"), raw_hits=True)
PRESETS: dict[str, ResponseMapping] = {
    "opensearch": _OPENSEARCH,
    "elasticsearch": replace(_OPENSEARCH, preset="elasticsearch"),
    "solr": ResponseMapping("solr", parse_path("$.response.docs"), parse_path("$.id"),
                            parse_path("$.score"), ()),
}
DEFAULT_PRESET = "opensearch"


def _preset(name: Any, field: str) -> ResponseMapping:
    if not isinstance(name, str) or name.strip().lower() not in PRESETS:
        shown = name if isinstance(name, str) else json.dumps(name)
        raise MappingError(field, f"unknown preset [{shown}]; one of {', '.join(PRESET_NAMES)}")
    return PRESETS[name.strip().lower()]


def normalise(template: Any) -> str | dict[str, Any]:
    """The ``responseTemplate`` as stored: a preset's name (lower case), or the object (a JSON
    string of one parsed); checked by ``parse``."""
    if template is None:
        return DEFAULT_PRESET
    if isinstance(template, str):
        text = template.strip()
        if text.startswith("{"):
            try:
                template = json.loads(text)
            except json.JSONDecodeError as exc:
                raise MappingError("responseTemplate", f"is not valid JSON: {exc.msg} at "
                                                       f"character {exc.pos}") from None
        else:
            return _preset(text, "responseTemplate").preset or DEFAULT_PRESET
    if not isinstance(template, dict):
        raise MappingError("responseTemplate", "must be a preset name (one of "
                           f"{', '.join(PRESET_NAMES)}) or an object of paths")
    parse(template)
    return template


def parse(template: Any) -> ResponseMapping:
    """The mapping a stored (or given) ``responseTemplate`` describes."""
    if template is None:
        return PRESETS[DEFAULT_PRESET]
    if isinstance(template, str) and not template.strip().startswith("{"):
        return _preset(template, "responseTemplate")
    if isinstance(template, str):
        normalised = normalise(template)
        assert isinstance(normalised, dict)
        template = normalised
    if not isinstance(template, dict):
        raise MappingError("responseTemplate", "must be a preset name or an object of paths")
    unknown = sorted(set(template) - set(TEMPLATE_KEYS))
    if unknown:
        raise MappingError(f"responseTemplate.{unknown[0]}",
                           f"is not a field of responseTemplate; allowed: "
                           f"[{', '.join(TEMPLATE_KEYS)}]")
    base = None
    if template.get("preset") is not None:
        base = _preset(template["preset"], "responseTemplate.preset")
    overrides = {k for k in ("hits", "id", "score", "source", "fields")
                 if template.get(k) is not None}
    if base is None:
        for required in ("hits", "id"):
            if required not in overrides:
                raise MappingError(f"responseTemplate.{required}",
                                   "is required without a preset (a path such as "
                                   + ("$.results" if required == "hits" else "$.sku") + ")")
    paths = {k: parse_path(template[k], f"responseTemplate.{k}")
             for k in ("hits", "id", "score", "source") if k in overrides}
    fields = None
    if "fields" in overrides:
        given = template["fields"]
        if not isinstance(given, dict) or not given:
            raise MappingError("responseTemplate.fields", "must be an object of field names "
                               "and paths, such as {\"title\": \"$.product.title\"}")
        fields = tuple((str(name), parse_path(path, f"responseTemplate.fields.{name}"))
                       for name, path in given.items())
    if base is None:
        return ResponseMapping(None, paths["hits"], paths["id"], paths.get("score"),
                               paths.get("source"), fields, described=template)
    return replace(base, hits=paths.get("hits", base.hits), id=paths.get("id", base.id),
                   score=paths.get("score", base.score), source=paths.get("source", base.source),
                   fields=fields if fields is not None else base.fields,
                   raw_hits=base.raw_hits and not overrides, described=template)
