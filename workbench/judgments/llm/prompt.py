"""What the LLM judge is sent (docs/algorithms.md, "Prompt").

Pure string building: the system prompt per rating type, the user content from a prompt template,
the hits JSON, the ``messages`` string and the structured-output schema. JSON text is written the
way the plugin's Jackson writer writes it (compact, non-ASCII kept, control characters as
``\\u00XX`` in upper-case hex, doubles as Java ``Double.toString``) so prompts match byte for byte.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from typing import Any

from workbench.judges.ratings import RATING_TYPES, RELEVANT_IRRELEVANT, SCORE0_1
from workbench.schemas.javafmt import double_to_string, java_string
from workbench.store.vector_fields import without_fields

__all__ = ["RATING_TYPES", "RELEVANT_IRRELEVANT", "SCORE0_1"]  # and the prompt builders below
DEFAULT_TEMPLATE = "SearchText: {{searchText}}; Hits: {{hits}}"
MAX_TEMPLATE_LENGTH = 10000

_EXAMPLE = "Example: 'Query: {{queryText}}\\n\\nDocuments: {{hits}}'"  # literal backslash-n
TEMPLATE_TOO_LONG = (
    f"Prompt template exceeds maximum length of {MAX_TEMPLATE_LENGTH} characters"
)
TEMPLATE_WITHOUT_HITS = (
    "Prompt template must include either {{hits}} or {{results}} placeholder to provide "
    f"documents for rating. {_EXAMPLE}"
)
TEMPLATE_WITHOUT_QUERY = (
    "Prompt template must include either {{queryText}} or {{searchText}} placeholder to provide "
    f"the search query. {_EXAMPLE}"
)

_SCALE_INTRO = (
    "You are an expert search relevance rater. For the given search query, judge how relevant "
    "each search result is, using this scale:\n"
)
_SCORE0_1_SCALE = (
    "- 1.0: a perfect match, highly relevant\n"
    "- 0.7 to 0.9: very relevant, with small variations\n"
    "- 0.4 to 0.6: moderately relevant\n"
    "- 0.1 to 0.3: slightly relevant\n"
    "- 0.0: completely irrelevant\n"
)
_BINARY_SCALE = (
    "- RELEVANT: a perfect match, highly relevant\n"
    "- IRRELEVANT: completely irrelevant\n"
)
_COMMON_TAIL = (
    "\nJudge each hit on exact matches, semantic relevance and the overall context between the "
    "SearchText and the content of the Hits.\n"
    "If a reference is supplied, judge each hit against both the SearchText and the reference.\n\n"
    "IMPORTANT: rate EVERY hit you are given.\n\n"
    "Answer with ONLY a JSON object of exactly this form:\n"
    '{"ratings": [{"id": "<id of the hit>", "rating_score": <number or RELEVANT/IRRELEVANT>}]}\n'
    "Add no explanation, commentary or markdown: return the JSON object alone."
)

# Java's String.trim() removes every character up to U+0020, and nothing else.
_JAVA_TRIM = "".join(map(chr, range(0x21)))
_PLACEHOLDER = re.compile(r"\{\{([^}]+)\}\}")
_QUERY_NAMES = ("queryText", "searchText")
_HITS_NAMES = ("hits", "results")
_REFERENCE_NAMES = ("reference", "referenceAnswer")
REFERENCE_ANSWER = "referenceAnswer"

_JSON_STRING_ESCAPES: dict[int, str] = {i: f"\\u{i:04X}" for i in range(0x20)}
_JSON_STRING_ESCAPES.update({
    0x08: "\\b", 0x09: "\\t", 0x0A: "\\n", 0x0C: "\\f", 0x0D: "\\r",
    ord('"'): '\\"', ord("\\"): "\\\\",
})


def _check_rating_type(rating_type: str) -> None:
    error = validate_rating_type(rating_type)
    if error or rating_type is None:
        raise ValueError(error or "A rating type is required")


def _is_java_blank(text: str) -> bool:
    """``text.trim().isEmpty()`` in Java: only characters up to U+0020."""
    return not text.strip(_JAVA_TRIM)


def _utf16_length(text: str) -> int:
    """Java's ``String.length()``: UTF-16 code units."""
    return len(text.encode("utf-16-le")) // 2


def system_prompt(rating_type: str) -> str:
    """The system prompt for a rating type: preamble, the scale, then the shared answer rules."""
    _check_rating_type(rating_type)
    scale = _SCORE0_1_SCALE if rating_type == SCORE0_1 else _BINARY_SCALE
    return _SCALE_INTRO + scale + _COMMON_TAIL


def validate_template(template: str | None) -> str | None:
    """The validation error (docs/contract.md, "LLM judgments") for a prompt template, or None;
    None/blank is valid (the default is used)."""
    if template is None or _is_java_blank(template):
        return None
    if _utf16_length(template) > MAX_TEMPLATE_LENGTH:
        return TEMPLATE_TOO_LONG
    if not any("{{" + name + "}}" in template for name in _HITS_NAMES):
        return TEMPLATE_WITHOUT_HITS
    if not any("{{" + name + "}}" in template for name in _QUERY_NAMES):
        return TEMPLATE_WITHOUT_QUERY
    return None


def validate_rating_type(value: Any) -> str | None:
    """The validation error (docs/contract.md, "LLM judgments") for ``llmJudgmentRatingType``, or
    None; None means the default."""
    if value is None or (isinstance(value, str) and value in RATING_TYPES):
        return None
    return (
        f"Invalid RatingType: '{java_string(value)}'. "
        f"Valid values are: {', '.join(RATING_TYPES)}"
    )


def json_string(text: str) -> str:
    """A JSON string literal as Jackson writes it (non-ASCII kept, ``\\u001F`` upper-case)."""
    return '"' + text.translate(_JSON_STRING_ESCAPES) + '"'


def json_value(value: Any) -> str:
    """Compact JSON as Jackson writes a parsed ``_source`` (doubles via ``Double.toString``)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        text = double_to_string(value)
        return text if math.isfinite(value) else json_string(text)  # Jackson quotes NaN
    if isinstance(value, str):
        return json_string(value)
    if isinstance(value, Mapping):
        return "{" + ",".join(
            f"{json_string(str(k))}:{json_value(v)}" for k, v in value.items()) + "}"
    if isinstance(value, list | tuple | set | frozenset):
        return "[" + ",".join(json_value(v) for v in value) + "]"
    return json_string(str(value))


def context_string(source: Mapping[str, Any] | None, context_fields: Sequence[str],
                   vectors: frozenset[str] = frozenset()) -> str:
    """A hit's context (docs/algorithms.md, "Prompt"): the listed top-level fields that exist
    (vectors too, when listed), else all of it but the ``vectors`` fields at any depth
    (``store/vector_fields.py``).

    Fields come out in ``context_fields`` order (the plugin uses hash order).
    """
    source = source or {}
    if context_fields:
        source = {f: source[f] for f in context_fields if f in source}
    else:
        source = without_fields(source, vectors)
    return json_value(source)


def hit_object(hit_id: str, context: str) -> str:
    """One element of the hits JSON: ``{"id":"<index>::<docId>","source":"<context>"}``."""
    return '{"id":' + json_string(hit_id) + ',"source":' + json_string(context) + "}"


def hits_json(hits: Sequence[tuple[str, str]]) -> str:
    """The hits JSON array; ``source`` is a string holding the context JSON."""
    return "[" + ",".join(hit_object(hit_id, context) for hit_id, context in hits) + "]"


def _reference(custom_fields: Mapping[str, str]) -> str:
    if REFERENCE_ANSWER in custom_fields:
        return custom_fields[REFERENCE_ANSWER]
    return "; ".join(custom_fields.values())


def _placeholder_value(name: str, query_text: str, custom_fields: Mapping[str, str]) -> str:
    if name in _QUERY_NAMES:
        return query_text
    if name in _REFERENCE_NAMES:
        return custom_fields.get(REFERENCE_ANSWER, "")
    return custom_fields.get(name, "")


def user_content_parts(
    template: str | None, query_text: str, custom_fields: Mapping[str, str],
) -> list[str]:
    """The user content cut where the hits JSON goes: ``hits_json.join(parts)`` is the content.

    Kept apart so the chunker can count the fixed text once. A placeholder is replaced only when
    written exactly ``{{name}}`` (``{{ hits }}`` stays as it is), and values are inserted in one
    pass: a query text or document that itself contains ``{{hits}}`` is not substituted again
    (the plugin's repeated ``String.replace`` would do that).
    """
    if template is None or _is_java_blank(template):
        if not custom_fields:
            return [f"SearchText - {query_text}; Hits - ", ""]
        return [f"SearchText: {query_text}; Reference: {_reference(custom_fields)}; Hits: ", ""]
    parts: list[str] = []
    current: list[str] = []
    position = 0
    for match in _PLACEHOLDER.finditer(template):
        current.append(template[position:match.start()])
        position = match.end()
        raw_name = match.group(1)
        name = raw_name.strip(_JAVA_TRIM)
        if name != raw_name:
            current.append(match.group(0))
        elif name in _HITS_NAMES:
            parts.append("".join(current))
            current = []
        else:
            current.append(_placeholder_value(name, query_text, custom_fields))
    current.append(template[position:])
    parts.append("".join(current))
    return parts


def user_content(
    template: str | None, query_text: str, custom_fields: Mapping[str, str], hits_json: str,
) -> str:
    """The user message (docs/algorithms.md, "Prompt"): the template filled in, or the plugin's
    no-template forms."""
    return hits_json.join(user_content_parts(template, query_text, custom_fields))


#: the scores a grammar-constrained server (the json_object rung) may write for SCORE0_1: its
#: grammar keeps to an enum but not to a minimum and maximum, and a small model left free
#: writes 2.5 or 4.8 on a 0-1 scale
SCORE_STEPS = tuple(round(i / 10, 1) for i in range(11))


def grammar_values(rating_type: str) -> dict[str, tuple[Any, ...]]:
    """The values a grammar-constrained answer may give each rating field (``llm/structured``);
    RELEVANT_IRRELEVANT's schema already lists its two."""
    return {"rating_score": SCORE_STEPS} if rating_type == SCORE0_1 else {}


def response_format(rating_type: str) -> dict[str, Any]:
    """The structured-output spec (docs/algorithms.md, "Calling the model").

    ``json.dumps(result, separators=(",", ":"))`` is the plugin's string byte for byte.
    """
    _check_rating_type(rating_type)
    score: dict[str, Any] = (
        {"type": "number"} if rating_type == SCORE0_1
        else {"type": "string", "enum": ["RELEVANT", "IRRELEVANT"]}
    )
    item = {
        "type": "object",
        "properties": {"id": {"type": "string"}, "rating_score": score},
        "required": ["id", "rating_score"],
        "additionalProperties": False,
    }
    return {
        "type": "json_schema",
        "json_schema": {
            "name": "rating_response",
            "strict": True,
            "schema": {
                "type": "object",
                "properties": {"ratings": {"type": "array", "items": item}},
                "required": ["ratings"],
                "additionalProperties": False,
            },
        },
    }
