"""The reference generator: queries built from a document's own fields, without a model.

It is the baseline a model-made query set must beat, so it is deterministic, free and simple
enough to read in one go. It writes what a shopper types for a product: the brand and the first
words that name the product, lowercased. From the title-like field:

1. **The head of the title.** Catalogue titles put the product first and then lists of
   features, sizes and selling points after a separator, so the title is cut at each ``,``
   ``;`` ``:`` ``|`` ``(`` ``[``, spaced dash (``-`` ``–`` ``—``) or sentence end, and the
   first part that says more than the brand is read (``Duracell - CopperTop AA ...`` reads
   ``CopperTop AA ...``).
2. **Words a shopper leaves out go**: stop words (``for``, ``with``, ``the``...), words with a
   digit (sizes, pack counts, model numbers: ``12"``, ``2x``, ``8.5``, ``sj1051``), units and
   pack words (``pack``, ``oz``, ``count``...), letter sizes (``xl``) and marketing words
   (``new``, ``best``, ``premium``...), and single letters; punctuation at a word's ends goes,
   inside it stays (``women's``, ``easy-to-use``).
3. **Brand first.** With a ``brand`` field its words (at most ``BRAND_WORDS`` of them, cleaned
   the same way) lead the query and are dropped from the title's words, so a title that starts
   with the brand does not say it twice.
4. **Two to five words**: the words are cut to ``MAX_WORDS``; fewer than ``MIN_WORDS`` make no
   query (one word is a category, not a product).

With ``per_document`` above one, further queries come from the same words: the product words
without the brand, the brand with the last level of a ``category`` field, and a one-word
``color`` value with the product words; the first query is always the one above, the others
are taken in an order drawn from ``seed`` and the document's id. Every text then goes through
``queries.normalise`` and ``queries.dedupe``.
"""

from __future__ import annotations

import random
import re
from collections.abc import Sequence
from typing import Any

from workbench.querygen.documents import SourceDocument
from workbench.querygen.queries import GeneratedQuery, dedupe, normalise

CATEGORY = "reference"
MIN_WORDS = 2
MAX_WORDS = 5
BRAND_WORDS = 3
#: the fields read as a document's title, in order of preference
TITLE_FIELDS = ("title", "name", "product_title")
#: a string longer than this is a description, not a title (for documents without a title field)
SHORT_STRING = 200

_SEPARATOR = re.compile(r"[,;:|(\[{]|\s[-\u2013\u2014/]\s|[\u2013\u2014]|\.\s|\.$")
_WORD_SPLIT = re.compile(r"[\s/+]+")
STOP_WORDS = frozenset((
    "an", "and", "are", "as", "at", "be", "by", "for", "from", "in", "into", "is", "it", "of",
    "on", "or", "the", "to", "with", "w/", "his", "her", "its", "our", "your", "their", "this",
    "that", "these", "those"))
NOISE_WORDS = frozenset((
    # units and packs
    "pack", "packs", "pk", "count", "ct", "pcs", "pc", "piece", "pieces", "oz", "ounce",
    "ounces", "fl", "lb", "lbs", "inch", "inches", "cm", "mm", "ml", "gb", "tb", "mah",
    # letter sizes
    "xs", "xxs", "xl", "xxl", "xxxl",
    # marketing
    "new", "best", "premium", "quality", "top", "great", "perfect", "ideal", "upgraded",
    "upgrade", "latest", "improved", "amazing", "sale", "hot", "original", "genuine",
    "authentic"))


def reference_queries(documents: Sequence[SourceDocument], per_document: int = 1,
                      seed: int = 0) -> list[GeneratedQuery]:
    """Up to ``per_document`` queries for each document, in document order, normalised and
    without duplicates (the module says how each is made)."""
    made = []
    for document in documents:
        for text in _candidates(document, per_document, seed):
            normal = normalise(text)
            if normal is not None:
                made.append(GeneratedQuery(normal, CATEGORY, document.id))
    return dedupe(made)


def _candidates(document: SourceDocument, per_document: int, seed: int) -> list[str]:
    title = title_of(document.fields)
    if title is None or per_document <= 0:
        return []
    brand = words(_first_string(document.fields.get("brand")) or "")[:BRAND_WORDS]
    brand_set = set(brand)
    product = next((kept for part in _SEPARATOR.split(title)
                    if (kept := [word for word in words(part) if word not in brand_set])), [])
    candidates = [_query(brand + product)]
    if per_document > 1:
        extra = [_query(product)]
        category = _last_string(document.fields.get("category"))
        if brand and category:
            extra.append(_query(brand + words(category)))
        color = words(_first_string(document.fields.get("color")) or "")
        if len(color) == 1:
            extra.append(_query(color + product))
        extra = [text for text in dict.fromkeys(extra) if text and text != candidates[0]]
        random.Random(f"{seed}:{document.id}").shuffle(extra)
        candidates += extra
    return [text for text in candidates if text][:per_document]


def _query(chosen: list[str]) -> str:
    """The words as one query, cut to ``MAX_WORDS``; empty when fewer than ``MIN_WORDS``."""
    chosen = list(dict.fromkeys(chosen))[:MAX_WORDS]
    return " ".join(chosen) if len(chosen) >= MIN_WORDS else ""


def title_of(fields: dict[str, Any]) -> str | None:
    """The first of ``TITLE_FIELDS`` with text, else the longest short string of several words
    that is not a link (the first of equals), else None."""
    for name in TITLE_FIELDS:
        value = _first_string(fields.get(name))
        if value:
            return value
    best = None
    for value in fields.values():
        if (isinstance(value, str) and " " in value.strip() and "://" not in value
                and len(value) <= SHORT_STRING and (best is None or len(value) > len(best))):
            best = value
    return best


def words(text: str) -> list[str]:
    """The lowercased words of ``text`` a shopper would type (the module's rule 2)."""
    kept = []
    for raw in _WORD_SPLIT.split(text.lower().replace("\u2019", "'")):
        word = raw.strip("\"'`\u2018\u2019\u201c\u201d.,;:!?*()[]{}<>|-\u2013\u2014#&")
        if (len(word) > 1 and not any(character.isdigit() for character in word)
                and word not in STOP_WORDS and word not in NOISE_WORDS):
            kept.append(word)
    return kept


def _first_string(value: Any) -> str | None:
    if isinstance(value, list):
        value = next((item for item in value if isinstance(item, str) and item.strip()), None)
    return value.strip() if isinstance(value, str) and value.strip() else None


def _last_string(value: Any) -> str | None:
    if isinstance(value, list):
        value = next((item for item in reversed(value) if isinstance(item, str) and item.strip()),
                     None)
    return value.strip() if isinstance(value, str) and value.strip() else None
