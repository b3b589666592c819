"""JSON a client sent: parsed once, here, with the limits every workbench route relies on.

Python's parser accepts what must not reach a handler: nesting deep enough to exhaust the
interpreter's recursion limit (a 500), ``NaN``/``Infinity`` and numbers beyond a double (which
become infinities that ``int()`` cannot take), unpaired surrogates (which no answer quoting them
can encode) and strings of any length (which every later step, logs included, must then carry).
Each is a 400 here, in OpenSearch's error envelope, naming where it is (``querySetSize``,
``querySetQueries[3].queryText``).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterator
from typing import Any

from workbench.errors import BadRequest, WorkbenchError

# OpenSearch (Jackson) allows 1000 levels. Python's parser, and the code that walks or re-encodes
# a body afterwards (``java_string``, ``json.dumps``...), recurse once or more per level within
# the interpreter's recursion limit of 1000, which the request's own frames share: at about 330
# levels a query-set value failed. No SRW body nests beyond a dozen; 100 leaves room to spare.
MAX_DEPTH = 100
# No field of the SRW API needs more; a longer value is refused before any work is done on it.
MAX_STRING_CHARS = 100_000

# Everything but the brackets outside strings: runs of other characters and whole strings (one
# left open at the end included). Removing it in ONE substitution keeps what is built small: the
# pieces left between matches are the brackets, one-character strings Python shares. Removing
# the strings first, then the rest (as before) built a piece for every run between two strings:
# 137 MB of short strings for a 19 MB import of 500,000 ratings, for a result of 1 MB.
_NOT_BRACKET = re.compile(r'(?:[^"\[\]{}]++|"[^"\\]*+(?:\\.[^"\\]*+)*+"?)++', re.DOTALL)
_NON_NUMERIC = ("NaN", "Infinity", "-Infinity")


class _NonFinite(float):
    """A number JSON cannot carry (``NaN``, ``Infinity``, ``1e400``), with the text it came
    from, so that the error can quote it."""

    text: str


def _number(text: str) -> float:
    value = float(text)
    if math.isfinite(value):
        return value
    number = _NonFinite(value)
    number.text = text
    return number


def loads(raw: str | bytes, field: str = "") -> Any:
    """Parse ``raw``; ``field`` is where the JSON sits (a field holding JSON text), if anywhere.

    Syntax errors are the ``ValueError`` of ``json.loads`` (callers word them); every limit
    above is a ``BadRequest``.
    """
    text = raw.decode(json.detect_encoding(raw), "surrogatepass") if isinstance(raw, bytes) \
        else raw
    depth = nesting_depth(text, MAX_DEPTH)
    if depth > MAX_DEPTH:
        raise WorkbenchError(
            "Failed to parse content to map", status=400, error_type="parse_exception",
            caused_by={"type": "stream_constraints_exception",
                       "reason": f"Document nesting depth ({depth}) exceeds the maximum allowed "
                                 f"({MAX_DEPTH})"})
    value = json.loads(text, parse_float=_number, parse_constant=_number)
    del text  # a decoded copy of a large body need not outlive the parse
    check(value, field)
    return value


def nesting_depth(text: str, limit: int) -> int:
    """How deep objects and arrays nest in ``text`` (strings skipped), counted up to
    ``limit + 1``. Linear and without recursion, so it is safe on any input."""
    brackets = _NOT_BRACKET.sub("", text)
    depth = deepest = 0
    for char in brackets:
        depth += 1 if char in "[{" else -1
        if depth > deepest:
            deepest = depth
            if deepest > limit:
                break
    return deepest


def check(value: Any, field: str = "") -> None:
    """Refuse the first non-finite number, unpaired surrogate or over-long string (keys
    included) in ``value``, in document order (an object's names before its values).

    Iterative, so depth costs no stack; and it keeps one iterator per open level, building a
    value's path only to name it in an error: a list of 500,000 ratings is walked without a list
    or a path for each of them."""
    root: tuple[str | int, ...] = (field,) if field else ()
    if not isinstance(value, (dict, list)):
        _check_value(value, root, None)
        return
    stack = [(_entries(value, root), root)]
    while stack:
        entries, path = stack[-1]
        for key, item in entries:
            if isinstance(item, (dict, list)):
                inner = (*path, key)
                stack.append((_entries(item, inner), inner))
                break
            _check_value(item, path, key)
        else:
            stack.pop()


def _entries(node: dict[str, Any] | list[Any], path: tuple[str | int, ...]
             ) -> Iterator[tuple[str | int, Any]]:
    """``(key, value)`` of an object, its names checked first; ``(index, item)`` of a list."""
    if isinstance(node, list):
        return enumerate(node)
    for key in node:
        _check_string(key, path, key, "Field name")
    return iter(node.items())


def _check_value(node: Any, path: tuple[str | int, ...], key: str | int | None) -> None:
    """One scalar at ``path`` + ``key`` (``key`` None: at ``path`` itself)."""
    if isinstance(node, str):
        _check_string(node, path, key, "Value of")
    elif isinstance(node, _NonFinite):
        where = _where(path, key)
        if node.text in _NON_NUMERIC:
            raise BadRequest(f"Non-standard token '{node.text}' in [{where}]: numbers must "
                             "be finite", error_type="json_parse_exception")
        raise BadRequest(f"Numeric value ({_clip(node.text)}) out of range in [{where}]: "
                         "numbers must be finite", error_type="input_coercion_exception")


def _where(path: tuple[str | int, ...], key: str | int | None) -> str:
    """The JSON path of a value at ``path`` + ``key`` (``key`` None: at ``path`` itself)."""
    return json_path(path if key is None else (*path, key))


def _check_string(text: str, path: tuple[str | int, ...], key: str | int | None,
                  label: str) -> None:
    if len(text) > MAX_STRING_CHARS:
        where = _where(path, key)
        raise BadRequest(f"{label} [{where}] is too long: {len(text)} characters, at "
                         f"most {MAX_STRING_CHARS} are allowed")
    if text.isascii():
        return
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        where = _where(path, key)
        raise BadRequest(
            f"{label} [{where}] holds an unpaired surrogate "
            f"({_escaped(text[exc.start])}) at character {exc.start}, which UTF-8 cannot "
            "encode") from None


def json_path(path: tuple[str | int, ...]) -> str:
    """``("querySetQueries", 3, "queryText")`` -> ``querySetQueries[3].queryText``; names are
    shown with unpaired surrogates escaped, so that the message itself can be encoded."""
    out = ""
    for part in path:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += ("." if out else "") + _clip(_escaped(part), 64)
    return out or "$"


def _escaped(text: str) -> str:
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


def _clip(text: str, limit: int = 40) -> str:
    return text if len(text) <= limit else text[:limit] + "..."
