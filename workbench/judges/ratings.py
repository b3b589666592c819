"""Reading ratings out of an LLM judge's answer (docs/algorithms.md, "Parsing").

Models answer in many shapes, with or without structured output: the requested
``{"ratings": [...]}`` object, a bare array, one rating object, JSON in a markdown fence, or
JSON inside prose. Everything that can be read is accepted; only text with no usable JSON at
all is a failure.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

from workbench.schemas.javafmt import double_to_string

#: the two rating types of LLM judgments: a score from 0 to 1, or relevant / irrelevant
SCORE0_1 = "SCORE0_1"
RELEVANT_IRRELEVANT = "RELEVANT_IRRELEVANT"
RATING_TYPES = (SCORE0_1, RELEVANT_IRRELEVANT)

BINARY_RATINGS = {"RELEVANT": "1.0", "IRRELEVANT": "0.0"}
COMPOSITE_SEPARATOR = "::"

_FENCE = re.compile(r"```[ \t]*(?:json)?[ \t]*\r?\n?(.*?)```", re.IGNORECASE | re.DOTALL)
_MAX_SCAN_STARTS = 1000  # bounds the embedded-JSON scan on long, bracket-heavy prose
_PREVIEW = 200


class ParseFailure(ValueError):
    """The model's answer holds no ratings JSON at all (the chunk failed)."""


class _NonFinite:
    """Stands for NaN/Infinity in an answer, which are not JSON numbers."""

    def __init__(self, text: str) -> None:
        self.text = text


_DECODER = json.JSONDecoder(strict=False, parse_constant=_NonFinite)


def _clean(text: str) -> str:
    """The plugin's clean-up: no backticks, newlines as spaces, trimmed."""
    return text.replace("`", "").replace("\n", " ").strip()


def _elements(value: Any) -> list[Any] | None:
    """The rating elements of a parsed JSON value, or None when it is not a ratings shape."""
    if isinstance(value, dict):
        ratings = value.get("ratings")
        if isinstance(ratings, list):
            return ratings
        if "id" in value or "rating_score" in value:
            return [value]
        return None
    if isinstance(value, list) and (not value or any(isinstance(v, dict) for v in value)):
        return value
    return None


def _loads(text: str) -> list[Any] | None:
    try:
        return _elements(_DECODER.decode(text))
    except (ValueError, RecursionError):
        return None


def _embedded(text: str) -> list[Any] | None:
    """The first JSON object or array inside ``text`` that has a ratings shape."""
    starts = 0
    for match in re.finditer(r"[\[{]", text):
        starts += 1
        if starts > _MAX_SCAN_STARTS:
            break
        try:
            value, _ = _DECODER.raw_decode(text, match.start())
        except (ValueError, RecursionError):
            continue
        elements = _elements(value)
        if elements is not None:
            return elements
    return None


def rating_elements(text: str) -> list[Any]:
    """The list of rating elements in an answer, trying each accepted shape in turn."""
    cleaned = _clean(text)
    if not cleaned:
        raise ParseFailure("Could not parse ratings from the model answer: the answer is empty")
    found = _loads(cleaned)
    if found is None:
        for fenced in _FENCE.finditer(text):
            found = _loads(_clean(fenced.group(1)))
            if found is not None:
                break
    if found is None:
        found = _embedded(cleaned)
    if found is None:
        preview = cleaned if len(cleaned) <= _PREVIEW else cleaned[:_PREVIEW] + "..."
        raise ParseFailure(
            "Could not parse ratings from the model answer: expected a JSON object with a "
            f'"ratings" array or a JSON array of ratings, got: {preview}'
        )
    return found


def _doc_id(raw: Any, allowed_ids: set[str]) -> str | None:
    """The docId an element names: the composite ``<index>::<docId>`` or the bare docId."""
    if isinstance(raw, bool) or not isinstance(raw, str | int):
        return None
    raw = str(raw)
    # Index names cannot contain ':', so the first '::' ends the index part.
    _, separator, after = raw.partition(COMPOSITE_SEPARATOR)
    for candidate in (after, raw) if separator else (raw,):
        if candidate in allowed_ids:
            return candidate
    return None


def _rating(score: Any, rating_type: str) -> tuple[str | None, str]:
    """The stored rating string, or None and why ``score`` is not a rating of this type: a
    SCORE0_1 rating must be a JSON number from 0 to 1, a RELEVANT_IRRELEVANT one either word."""
    shown = _shown(score)
    if rating_type == SCORE0_1:
        if isinstance(score, bool) or not isinstance(score, int | float):
            # strings, booleans, null, NaN/Infinity are not numbers here
            return None, f"rating_score {shown} is not a number"
        try:
            number = float(score)
        except OverflowError:
            return None, f"rating_score {shown} is not a finite number"
        if not math.isfinite(number):
            return None, f"rating_score {shown} is not a finite number"
        if not 0.0 <= number <= 1.0:
            return None, f"rating_score {shown} is outside the scale 0 to 1"
        return double_to_string(number), ""
    if isinstance(score, str) and score in BINARY_RATINGS:
        return BINARY_RATINGS[score], ""
    return None, f"rating_score {shown} is neither RELEVANT nor IRRELEVANT"


def _shown(score: Any) -> str:
    """A model's value as a failure reason shows it: JSON, at most 40 characters."""
    if isinstance(score, _NonFinite):
        return score.text
    try:
        text = json.dumps(score, ensure_ascii=False)
    except (TypeError, ValueError):
        text = str(score)
    return text if len(text) <= 40 else text[:40] + "..."


def read_ratings(text: str, rating_type: str, allowed_ids: set[str],
                 ) -> tuple[dict[str, str], dict[str, str]]:
    """docId -> rating string for every usable element of the answer (last one wins per docId),
    and docId -> why the model's rating of it was refused (not a rating of the type, or outside
    its scale), for docs the answer rated no usable way.

    Elements naming a doc outside ``allowed_ids`` are skipped; ``({}, {})`` (e.g. an empty
    ``ratings`` array) is a valid result that the caller answers with a retry. Raises
    ParseFailure when the text holds no ratings JSON.
    """
    if rating_type not in RATING_TYPES:
        raise ValueError(f"Unknown rating type: {rating_type}")
    ratings: dict[str, str] = {}
    refused: dict[str, str] = {}
    for element in rating_elements(text):
        if not isinstance(element, dict):
            continue
        doc_id = _doc_id(element.get("id"), allowed_ids)
        if doc_id is None:
            continue
        rating, reason = _rating(element.get("rating_score"), rating_type)
        if rating is not None:
            ratings[doc_id] = rating
            refused.pop(doc_id, None)
        elif doc_id not in ratings:
            refused[doc_id] = reason
    return ratings, refused


def parse_ratings(text: str, rating_type: str, allowed_ids: set[str]) -> dict[str, str]:
    """The usable ratings of ``read_ratings``."""
    return read_ratings(text, rating_type, allowed_ids)[0]


def parse_rationales(text: str, doc_ids: set[str]) -> dict[str, str]:
    """The ``rationale`` given for each of ``doc_ids`` (asked for with ``includeRationale``);
    elements without one are left out."""
    out: dict[str, str] = {}
    for element in rating_elements(text):
        if not isinstance(element, dict):
            continue
        doc_id = _doc_id(element.get("id"), doc_ids)
        reason = element.get("rationale")
        if doc_id is not None and isinstance(reason, str) and reason.strip():
            out[doc_id] = reason.strip()
    return out
