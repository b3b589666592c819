"""Generated queries: what a text must be to become one, duplicates, and the stored entries.

Whatever generated a text (a model, or the reference rules of ``reference.py``), it goes
through ``normalise`` and ``dedupe`` before it is stored, so a generated set holds only texts
the manual path would take and no query twice.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from workbench.schemas.text import query_set_value_error

#: the longest generated query kept, in characters: a query is what someone types in a search
#: box, and a text longer than this is a description, not a query
MAX_QUERY_LENGTH = 120

# Pairs of quotes one text may be wrapped in, as a model writes a quoted answer.
_QUOTE_PAIRS = {'"': '"', "'": "'", "`": "`", "\u201c": "\u201d", "\u2018": "\u2019",
                "\u00ab": "\u00bb", "\u201e": "\u201c"}
# A list marker a model puts before each line: "1. ", "2) ", "- ", "* ", "• ".
_LIST_MARKER = re.compile(r"^(?:\d{1,3}[.)]|[-*\u2022])\s+")
# Punctuation that ends a sentence rather than a query ("?" is typed, so it stays).
_TRAILING = ".,;!"


@dataclass(frozen=True)
class GeneratedQuery:
    """One generated query: its text, how it was made, and the document it was made from."""

    text: str
    category: str
    source_id: str


def normalise(text: str) -> str | None:
    """``text`` as it is stored, or None when it cannot be a query.

    Whitespace runs (newlines included) become one space; a leading list marker, wrapping quotes
    and trailing sentence punctuation (``.``, ``,``, ``;``, ``!``) go; case is kept as typed.
    Refused (None): an empty text, one longer than ``MAX_QUERY_LENGTH``, one the manual path
    refuses (``schemas.text.query_set_value_error``: quotes, backslashes, ``<``, ``>``), and two
    characters it takes but a generated query must not hold:

    * ``#``: an LLM judgment names a query ``text#{custom fields}`` and the readers of
      judgments and the 3.1 ``query#reference`` form split at the first ``#``, so a generated
      text with one would be read as a shorter query with a reference;
    * ``:``: a configuration that puts the text in a ``query_string`` query reads ``word:`` as
      a field name, so such a query would not search what it says.
    """
    text = " ".join(text.split())
    text = _LIST_MARKER.sub("", text, count=1)
    while True:
        before = text
        text = text.rstrip(_TRAILING).strip()
        if len(text) >= 2 and _QUOTE_PAIRS.get(text[0]) == text[-1]:
            text = text[1:-1].strip()
        if text == before:
            break
    if not text or len(text) > MAX_QUERY_LENGTH:
        return None
    if query_set_value_error(text) is not None or "#" in text or ":" in text:
        return None
    return text


def _key(text: str) -> str:
    return " ".join(text.casefold().split())


def dedupe(queries: Iterable[GeneratedQuery]) -> list[GeneratedQuery]:
    """``queries`` in order without repeats: the first of those whose texts are equal ignoring
    case and whitespace is kept (from whichever document it came)."""
    seen: set[str] = set()
    kept = []
    for query in queries:
        key = _key(query.text)
        if key not in seen:
            seen.add(key)
            kept.append(query)
    return kept


def as_entries(queries: Sequence[GeneratedQuery]) -> list[dict[str, Any]]:
    """The ``querySetQueries`` entries as a manual set stores them (``schemas/query_sets.py``,
    ``_entry``): ``queryText`` and ``customFields`` (strings), here ``category`` and
    ``sourceDocId``. A document id the text rules refuse (a quote, a newline...) is left out
    of the entry rather than stored where a manual set could not put it."""
    entries = []
    for query in queries:
        custom = {"category": query.category}
        if query_set_value_error(query.source_id) is None:
            custom["sourceDocId"] = query.source_id
        entries.append({"queryText": query.text, "customFields": custom})
    return entries
