"""Reference judges: rate a document 0/1 by comparing it with a query's ``referenceAnswer``.

Two judges, both cheap and deterministic, for query sets whose entries carry the expected
answer:

- ``token_overlap``: the share of the reference's words that the document contains, with
  lenient word matching (see ``token_overlap_score``).
- ``semantic``: the cosine similarity of the two texts' all-MiniLM-L6-v2 sentence embeddings
  (``workbench.judgments.embedding``), which also credits paraphrases.

A document is relevant (rating 1) when its score reaches the judge's threshold.
"""

from __future__ import annotations

import math
import re
import sys
import unicodedata
from collections.abc import Sequence
from functools import cache

import numpy as np

JUDGES = ("token_overlap", "semantic")

# token_overlap 0.5: at least half of the reference's distinct words must appear in the
# document. References are short answers (typically 2-8 words), so requiring all of them (1.0)
# fails a correct document over one missing filler word, while anything below one half lets a
# document that shares only incidental words ("the", "for", a brand) pass.
# semantic 0.5: with all-MiniLM-L6-v2, texts on unrelated subjects score about 0.0-0.2 and the
# same subject in other words about 0.6-0.9 (the sentence-transformers quickstart gives 0.67 for
# "The weather is lovely today." / "It's so sunny outside!" and 0.10 against "He drove to the
# stadium."); 0.5 sits between the two groups, on the side that needs the same topic.
DEFAULT_THRESHOLDS: dict[str, float] = {"token_overlap": 0.5, "semantic": 0.5}

# Shorter tokens only ever match exactly: "a" or "tv" would otherwise be found inside most
# documents.
MIN_SUBSTRING_LENGTH = 3


@cache
def _word_pattern() -> re.Pattern[str]:
    """Runs of letters, digits and combining marks. Python's ``\\w`` leaves out combining marks
    (categories Mn, Mc, Me), which would cut words of scripts such as Devanagari apart, so they
    are added; built once, on first use (a scan of all code points, about 0.15 s)."""
    marks = [chr(c) for c in range(sys.maxunicode + 1)
             if unicodedata.category(chr(c)) in ("Mn", "Mc", "Me")]
    return re.compile("(?:[^\\W_]|[" + re.escape("".join(marks)) + "])+")


def normalise_tokens(text: str) -> list[str]:
    """The words of ``text`` for matching, in order, repeats kept.

    Unicode NFKC normalisation (so compatibility forms such as full-width letters, ligatures and
    superscripts compare equal to the plain ones), then case folding (a lowercase that also
    maps e.g. "ß" to "ss"), then splitting on every character that is not a letter, a digit or
    a combining mark: punctuation, whitespace, symbols and the underscore all separate words,
    so "Wi-Fi" gives ["wi", "fi"] and "3.5mm" gives ["3", "5mm"]. Empty pieces are dropped.
    """
    folded = unicodedata.normalize("NFKC", text).casefold()
    return _word_pattern().findall(folded)


def _found(token: str, document_tokens: set[str], document_joined: str) -> bool:
    """Whether one reference token is found among the document's tokens (the rule of
    ``token_overlap_score``)."""
    if token in document_tokens:
        return True
    if len(token) < MIN_SUBSTRING_LENGTH:
        return False
    # The token inside a document token: a space never occurs in a token, so searching the
    # space-joined document tokens finds exactly that.
    if token in document_joined:
        return True
    # A document token (of the minimum length or longer) inside the token: look the token's
    # substrings up, or scan the document's tokens when that is fewer steps.
    n = len(token)
    if n * n // 2 > len(document_tokens):
        return any(len(d) >= MIN_SUBSTRING_LENGTH and d in token for d in document_tokens)
    return any(token[i:j] in document_tokens
               for i in range(n) for j in range(i + MIN_SUBSTRING_LENGTH, n + 1))


def token_overlap_score(reference: str, document: str) -> float:
    """The fraction, 0.0 to 1.0, of the reference's distinct tokens found in the document.

    Both texts go through ``normalise_tokens``. A reference token counts as found when
    - it equals a document token, or
    - both it and a document token have at least 3 characters and one is a substring of the
      other ("earbud" / "earbuds", "headphones" / "phones"); tokens of 1 or 2 characters only
      match exactly.
    Besides, when the whole normalised reference (its tokens joined by single spaces, at least
    3 characters long) occurs in the normalised document (joined the same way) starting at the
    beginning of a token, the score is 1.0: this credits a phrase whose last word is cut short,
    such as the reference "USB C" in "USB cable", while "tv stand" is not found in "atv
    stands" (the start of the match must be a word start, or short tokens would slip through
    the 3-character rule). A reference without any token scores 0.0: it says nothing to compare
    with.
    """
    reference_tokens = normalise_tokens(reference)
    if not reference_tokens:
        return 0.0
    document_tokens = normalise_tokens(document)
    phrase = " ".join(reference_tokens)
    if len(phrase) >= MIN_SUBSTRING_LENGTH and f" {phrase}" in " " + " ".join(document_tokens):
        return 1.0
    distinct_reference = set(reference_tokens)
    distinct_document = set(document_tokens)
    joined = " ".join(distinct_document)
    found = sum(_found(token, distinct_document, joined) for token in distinct_reference)
    return found / len(distinct_reference)


def semantic_score(reference: str, documents: Sequence[str]) -> list[float]:
    """The cosine similarity (-1.0 to 1.0) between the reference's embedding and each
    document's, in the documents' order.

    Embeddings are all-MiniLM-L6-v2's (unit length, so the cosine is a dot product), which reads
    at most 256 word pieces of a text: the rest of a long document is not seen. The model is
    loaded on first use; ``EmbeddingModelMissing`` says how to install it when it is absent.
    """
    if not documents:
        return []
    from workbench.judgments.embedding import model  # numpy model, loaded only when needed

    vectors = model().encode([reference, *documents])
    similarities = np.clip(vectors[1:] @ vectors[0], -1.0, 1.0)
    return [float(s) for s in similarities]


def judge(
    name: str, reference: str, documents: Sequence[str], threshold: float | None = None
) -> list[tuple[int, float]]:
    """``(rating, score)`` per document, in order: rating 1 when the judge's score is at least
    ``threshold`` (the judge's ``DEFAULT_THRESHOLDS`` entry when None), else 0."""
    if name not in JUDGES:
        raise ValueError(f"unknown reference judge {name!r}; the judges are {', '.join(JUDGES)}")
    if threshold is None:
        threshold = DEFAULT_THRESHOLDS[name]
    elif isinstance(threshold, bool) or not math.isfinite(threshold):
        raise ValueError(f"threshold must be a finite number, not {threshold!r}")
    if name == "token_overlap":
        scores = [token_overlap_score(reference, document) for document in documents]
    else:
        scores = semantic_score(reference, documents)
    return [(1 if score >= threshold else 0, score) for score in scores]
