"""The documents queries are generated from: a seeded random sample of an index, each document
limited to the fields a prompt shows and its long texts cut.

* **Reproducible.** The documents come in the order of a ``random_score`` seeded with ``seed``
  over ``_seq_no`` (``store/random_draw.py``), so the same index contents, count, seed, fields and
  stratify field give the same documents in the same order; another seed gives another draw.
  The cluster salts the scores with the concrete index's name and the shard, so a copy of the
  index under another name draws differently. Random scores spread the draw over the index.
* **Usable.** A document with no text (no string with a letter or digit) in its fields is skipped
  and the next one taken: nothing could be asked about it. Each search asks for about twice the
  count, and the draw pages on when too many are skipped.
* **Stratified** (``stratify_field``, a keyword field): the ``STRATA`` most frequent values are
  counted; each value gets one document while the count allows (the most frequent values first),
  the rest of the count is shared in proportion to what each value has left (largest
  remainders), each value's documents are drawn with the same seed, and the draws are
  interleaved (the first of each value, then the second...). Documents without a value, or with
  a value past the first ``STRATA``, are not drawn.
* **Fields as judgments show them** (``judgments/llm/prompt.py``, ``context_string``): without
  ``context_fields`` the whole ``_source`` but its vector fields at any depth
  (``store/vector_fields.py``); with them, only those, keyed by the names given, read through
  nested objects for a dotted path (``attributes.color``) and from the parent's value for a
  multi-field (``title.keyword``). Each string is cut to ``max_tokens`` cl100k_base tokens, as
  judgment prompts cut long hits (``llm/tokens.py``).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from opensearchpy import OpenSearch
from opensearchpy.exceptions import NotFoundError, RequestError

from workbench.llm.tokens import truncate_tokens
from workbench.querygen.errors import UnknownContextFields, UnknownIndex, UnusableStratifyField
from workbench.store import random_draw
from workbench.store.vector_fields import vector_fields, without_fields

#: how many values of ``stratify_field`` are drawn from (the most frequent ones)
STRATA = 50
#: ``from + size`` of a search stays within OpenSearch's default ``index.max_result_window``
RESULT_WINDOW = 10_000

_MISSING = object()


@dataclass(frozen=True)
class SourceDocument:
    """One sampled document: its id and the fields a prompt shows of it."""

    id: str
    fields: dict[str, Any]


def check_context_fields(client: OpenSearch, index: str, fields: Sequence[str]) -> None:
    """Raise ``UnknownIndex`` when ``index`` (a name, alias or pattern) names no index, and
    ``UnknownContextFields`` naming, in the order given, the ``fields`` that no mapping of it has
    (a dotted path through ``properties``; a multi-field under ``fields`` counts)."""
    try:
        mappings = random_draw.index_mappings(client, index)
    except NotFoundError as exc:
        raise UnknownIndex(index) from exc
    if not mappings:
        raise UnknownIndex(index)
    missing = [name for name in dict.fromkeys(fields)
               if not any(_mapped(mapping.get("properties") or {}, name.split("."))
                          for mapping in mappings.values())]
    if missing:
        raise UnknownContextFields(missing)


def _mapped(properties: dict[str, Any], parts: list[str]) -> bool:
    spec = properties.get(parts[0])
    if not isinstance(spec, dict):
        return False
    rest = parts[1:]
    return not rest or _mapped(spec.get("properties") or {}, rest) \
        or _mapped(spec.get("fields") or {}, rest)


def sample_documents(client: OpenSearch, index: str, count: int, seed: int,
                     context_fields: Sequence[str] = (), stratify_field: str | None = None,
                     max_tokens: int = 400) -> list[SourceDocument]:
    """``count`` documents of ``index`` (fewer when it has fewer usable ones), drawn as the
    module says. Raises ``UnknownIndex``, ``UnknownContextFields`` or, when ``stratify_field``
    has no countable values, ``UnusableStratifyField``."""
    check_context_fields(client, index, context_fields)
    if count <= 0:
        return []
    vectors = frozenset() if context_fields else vector_fields(client, [index])
    draw = _Draw(client, index, seed, tuple(context_fields), vectors, max_tokens)
    if stratify_field is None:
        return draw.take(count)[0]
    try:
        values = random_draw.value_counts(client, index, stratify_field, STRATA)
    except RequestError as exc:  # a text field: no fielddata to count
        raise UnusableStratifyField(stratify_field) from exc
    if not values:
        raise UnusableStratifyField(stratify_field)
    quotas = allocate(count, [size for _, size in values])
    drawn: list[list[SourceDocument]] = []
    exhausted: list[bool] = []
    for (value, _), quota in zip(values, quotas, strict=True):
        docs, done = draw.take(quota, (stratify_field, value)) if quota else ([], False)
        drawn.append(docs)
        exhausted.append(done)
    short = count - sum(len(docs) for docs in drawn)
    for position, (value, _) in enumerate(values):  # values with skipped documents: others fill
        if short <= 0:
            break
        if exhausted[position] or not quotas[position]:
            continue
        more, _ = draw.take(quotas[position] + short, (stratify_field, value))
        short -= len(more) - len(drawn[position])
        drawn[position] = more
    return list(_interleave(drawn))


def allocate(count: int, sizes: Sequence[int]) -> list[int]:
    """How many documents each stratum gives: one each while ``count`` allows (the first
    strata first: they are the largest), the rest in proportion to what each has left beyond
    that one, by largest remainders (ties to the earlier stratum); never more than a size."""
    if count <= len(sizes):
        return [1 if position < count else 0 for position in range(len(sizes))]
    room = [max(0, size - 1) for size in sizes]
    rest = min(count - len(sizes), sum(room))
    if rest <= 0:
        return [1 if size else 0 for size in sizes]
    total = sum(room)
    extra = [rest * left // total for left in room]
    order = sorted(range(len(sizes)), key=lambda i: (-(rest * room[i] % total), i))
    for position in order[:rest - sum(extra)]:
        extra[position] += 1
    return [1 + share for share in extra]


def _interleave(drawn: list[list[SourceDocument]]) -> Iterator[SourceDocument]:
    for position in range(max((len(docs) for docs in drawn), default=0)):
        for docs in drawn:
            if position < len(docs):
                yield docs[position]


class _Draw:
    """The seeded random order of one index (or of one value of a field), read page by page."""

    def __init__(self, client: OpenSearch, index: str, seed: int, context_fields: tuple[str, ...],
                 vectors: frozenset[str], max_tokens: int) -> None:
        self.client = client
        self.index = index
        self.seed = seed
        self.context_fields = context_fields
        self.vectors = vectors
        self.max_tokens = max_tokens
        # A multi-field's value is its parent's: fetch the parent of every dotted path.
        self.includes = sorted({part for name in context_fields
                                for part in (name, name.rpartition(".")[0]) if part})
        self.excludes = sorted({pattern for name in vectors for pattern in (name, "*." + name)})

    def take(self, count: int, term: tuple[str, str] | None = None
             ) -> tuple[list[SourceDocument], bool]:
        """The first ``count`` usable documents in the seeded order, and whether the order ran
        out before that (or reached the result window)."""
        page = min(count * 2 + 10, random_draw.PAGE_LIMIT)
        docs: list[SourceDocument] = []
        offset = 0
        while len(docs) < count:
            size = min(page, RESULT_WINDOW - offset)
            if size <= 0:
                return docs, True
            try:
                hits = random_draw.random_page(self.client, self.index, self.seed, offset, size,
                                               self.includes, self.excludes, term)
            except NotFoundError as exc:  # deleted since it was checked
                raise UnknownIndex(self.index) from exc
            for doc_id, source in hits:
                fields = self.fields(source)
                if _has_text(fields):
                    docs.append(SourceDocument(doc_id, fields))
                    if len(docs) == count:
                        return docs, False
            if len(hits) < size:
                return docs, True
            offset += size
        return docs, False

    def fields(self, source: dict[str, Any]) -> dict[str, Any]:
        """What a prompt shows of ``source``, long strings cut."""
        if self.context_fields:
            picked = {}
            for name in self.context_fields:
                value = _at(source, name.split("."))
                if value is not _MISSING:
                    picked[name] = value
        else:
            picked = without_fields(source, self.vectors)
        cut: dict[str, Any] = _cut(picked, self.max_tokens)
        return cut


def _at(value: Any, parts: list[str]) -> Any:
    """The value at a dotted path: through objects (a key may hold dots itself), over each
    element of a list, and a scalar's own value for what remains (a multi-field)."""
    if not parts:
        return value
    if isinstance(value, dict):
        for end in range(len(parts), 0, -1):
            key = ".".join(parts[:end])
            if key in value:
                found = _at(value[key], parts[end:])
                if found is not _MISSING:
                    return found
        return _MISSING
    if isinstance(value, list):
        found = [item for item in (_at(element, parts) for element in value)
                 if item is not _MISSING]
        return found if found else _MISSING
    return value if value is not None else _MISSING


def _cut(value: Any, max_tokens: int) -> Any:
    if isinstance(value, str):
        return truncate_tokens(value, max_tokens)
    if isinstance(value, dict):
        return {key: _cut(item, max_tokens) for key, item in value.items()}
    if isinstance(value, list):
        return [_cut(item, max_tokens) for item in value]
    return value


def _has_text(value: Any) -> bool:
    if isinstance(value, str):
        return any(character.isalnum() for character in value)
    if isinstance(value, dict):
        return any(_has_text(item) for item in value.values())
    if isinstance(value, list):
        return any(_has_text(item) for item in value)
    return False
