"""The ``token_overlap`` judge: a hit is relevant when enough of a reference answer's words are
in it. Cheap, deterministic, no model; for query sets whose entries carry reference answers.

The score of a hit is the best score over the query's reference answers (the hit is credited
with the one it matches best); a hit is relevant (rating 1) when that score reaches
``threshold``.

Options: ``threshold`` (0.5), and two rules of Evret's ``TokenOverlapJudge``:
``minTokens`` (1: a score needs at least this many distinct reference tokens found in the hit,
else it is 0) and ``queryBoost`` (false: when a found token also appears in the query, 0.1 is
added once, capped at 1.0). The defaults leave the score unchanged. Of Evret's rules the
workbench follows: the minimum is checked on distinct shared tokens before the ratio is taken;
the boost is a single +0.1, only for a score the minimum let through, clamped to 1.0; a
reference found whole in the hit scores 1.0 before either rule (Evret's containment step). It
does not follow: the removal of English stopwords before counting (the workbench tokenises
every script alike and counts every token, so "the" is a shared token; a list of stopwords
would also change today's scores), Evret's token weights (digits 1.5, short tokens 0.75, long
ones 1.35), its phrase bonus, its negation-mismatch rule, a hit found whole inside the
reference, and its defaults (15 tokens, ratio 0.6, boost on).
"""

from __future__ import annotations

import re
import sys
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache

from workbench.judges.base import (
    Hit,
    Judged,
    Query,
    Setup,
    Verdict,
    bool_option,
    check_options,
    int_option,
    number_option,
)

NAME = "token_overlap"
# At least half of the reference's distinct words must appear in the document. References are
# short answers (typically 2-8 words), so requiring all of them (1.0) fails a correct document
# over one missing filler word, while anything below one half lets a document that shares only
# incidental words ("the", "for", a brand) pass.
DEFAULT_THRESHOLD = 0.5
# Evret's boost for a found token that the query also contains.
QUERY_BOOST = 0.1
MAX_MIN_TOKENS = 10_000

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


def token_overlap_score(reference: str, document: str, min_tokens: int = 1,
                        query: str | None = None) -> float:
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

    ``min_tokens``: fewer distinct reference tokens found than this scores 0.0 (the whole
    reference found still scores 1.0). ``query``: when given (the judge's ``queryBoost``), a
    found token that is also found among the query's tokens, by the same rule, adds 0.1 to the
    score, at most 1.0.
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
    found = [token for token in distinct_reference if _found(token, distinct_document, joined)]
    if not found or len(found) < min_tokens:
        return 0.0
    score = len(found) / len(distinct_reference)
    if query is not None:
        query_tokens = set(normalise_tokens(query))
        query_joined = " ".join(query_tokens)
        if any(_found(token, query_tokens, query_joined) for token in found):
            score = min(1.0, score + QUERY_BOOST)
    return score


def best_reference(scores: Sequence[float]) -> tuple[float, int | None]:
    """The highest score and the index of the reference that gave it (the first on ties);
    ``(0.0, None)`` without references."""
    if not scores:
        return 0.0, None
    best = max(range(len(scores)), key=lambda i: (scores[i], -i))
    return float(scores[best]), best


def threshold_verdicts(rows: Sequence[Sequence[float]], threshold: float) -> Judged:
    """The verdicts of a reference judge from its scores (one row per hit, one column per
    reference answer): each hit takes its best score, and is relevant (rating 1) with the
    reference it matched when that score reaches ``threshold``; ``matches`` holds which
    answers each hit reaches the threshold with."""
    verdicts = []
    for row in rows:
        score, index = best_reference([float(v) for v in row])
        relevant = score >= threshold
        verdicts.append(Verdict(1.0 if relevant else 0.0, relevant, score=score,
                                reference=index if relevant else None))
    return Judged(verdicts, matches=[[float(v) >= threshold for v in row] for row in rows])


@dataclass(frozen=True)
class TokenOverlapJudge:
    threshold: float = DEFAULT_THRESHOLD
    min_tokens: int = 1
    query_boost: bool = False
    name: str = NAME
    needs_reference: bool = True

    def scores(self, query: Query, hits: Sequence[Hit]) -> list[list[float]]:
        """The score of every hit (rows) against every reference answer (columns)."""
        boost = query.text if self.query_boost else None
        return [[token_overlap_score(reference, text, self.min_tokens, boost)
                 for reference in query.references]
                for text in (hit.text() for hit in hits)]

    def judge(self, query: Query, hits: Sequence[Hit]) -> Judged:
        return threshold_verdicts(self.scores(query, hits), self.threshold)



OPTIONS = ("threshold", "minTokens", "queryBoost")


def build(setup: Setup) -> TokenOverlapJudge:
    check_options(setup, OPTIONS, NAME)
    return TokenOverlapJudge(number_option(setup, "threshold", DEFAULT_THRESHOLD, 0.0, 1.0),
                             int_option(setup, "minTokens", 1, 1, MAX_MIN_TOKENS),
                             bool_option(setup, "queryBoost", False))
