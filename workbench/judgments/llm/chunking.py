"""Token counting and chunking of the hits sent to the LLM judge (docs/algorithms.md, "Chunking").

The plugin counts cl100k_base tokens of the whole ``messages`` string after adding each hit and
starts a new chunk when ``tokenLimit`` is exceeded. Doing that literally re-tokenises the whole
prompt for every hit (quadratic in the number of hits). ``chunk_hits`` gets the same chunks from
per-piece counts, using a property of the cl100k pre-tokenizer:

In the escaped messages string every hit object starts with ``{\\"id\\":``. No token-splitting
regex piece can end on ``\\`` when a ``"`` follows (only a run of punctuation covers those two
characters, and it extends over all adjacent punctuation), so a piece always ends right before
that ``id``; the regex has no look-behind and looks ahead one character at most, so the text
before that point and the text after it are split into exactly the same pieces whether tokenised
together or apart. Tokens of the whole string are therefore the sum of the tokens of the segments
between those points, and each segment's count is computed once.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from workbench.judgments.llm.prompt import hit_object, hits_json, user_content_parts
from workbench.llm.base import json_escape
from workbench.llm.tokens import count_tokens, truncate_tokens

Hit = tuple[str, str]

_MESSAGES_HEAD = '[{"role":"system","content":"'
_MESSAGES_MIDDLE = '"},{"role":"user","content":"'
_MESSAGES_TAIL = '"}]'
_OBJECT_START = json_escape('{"')  # each escaped hit object opens with this, then `id`


def _truncate(text: str, excess: int) -> str:
    """``text`` cut to its first ``max(1, tokens - excess)`` tokens, decoded back to text."""
    return truncate_tokens(text, count_tokens(text) - excess)


class _PromptCounter:
    """Tokens of ``messages_string(system, user_content(..., hits_json(chunk)))`` by segments.

    With the user content cut into ``parts`` around ``m`` hits insertions, the messages string is
    ``HEAD + esc(P0) + J + esc(P1) + ... + J + esc(Pm) + TAIL`` with
    ``J = [{\\"R1,{\\"R2 ... ,{\\"Rk]`` (``Ri`` = hit i's escaped object after ``{\\"``).
    Its tokens are ``lead + m * sum(mid(Ri) for all but the last hit) + ends(Rk)``.
    """

    def __init__(self, system: str, parts: list[str]) -> None:
        self.insertions = len(parts) - 1
        head = _MESSAGES_HEAD + json_escape(system) + _MESSAGES_MIDDLE + json_escape(parts[0])
        if self.insertions == 0:
            self.lead = count_tokens(head + _MESSAGES_TAIL)
            return
        self.lead = count_tokens(head + "[" + _OBJECT_START)
        # What follows the last hit of insertion j, up to the next `id` or the end of the string.
        self.after_last = [
            "]" + json_escape(part) + ("[" + _OBJECT_START if j < self.insertions else "")
            for j, part in enumerate(parts[1:], start=1)
        ]
        self.after_last[-1] += _MESSAGES_TAIL

    @staticmethod
    def _rest(hit: Hit) -> str:
        """The escaped hit object without its opening ``{\\"``."""
        return json_escape(hit_object(*hit))[len(_OBJECT_START):]

    def mid(self, hit: Hit) -> int:
        """Tokens a hit adds when another hit follows it (for one insertion)."""
        if self.insertions == 0:
            return 0
        return count_tokens(self._rest(hit) + "," + _OBJECT_START)

    def ends(self, hit: Hit) -> int:
        """Tokens of the segments that start at a hit placed last, over all insertions."""
        if self.insertions == 0:
            return 0
        rest = self._rest(hit)
        return sum(count_tokens(rest + after) for after in self.after_last)

    def total(self, mids: int, last: Hit) -> int:
        """Tokens of the messages string for a chunk: ``mids`` = sum of mid() of the others."""
        return self.lead + self.insertions * mids + self.ends(last)


def chunk_hits(
    system: str,
    template: str | None,
    query_text: str,
    custom_fields: Mapping[str, str],
    hits: Sequence[Hit],
    token_limit: int,
) -> list[list[Hit]]:
    """Split ``hits`` into prompts of at most ``token_limit`` tokens, as docs/algorithms.md
    ("Chunking") describes.

    Hits are added in order; when the messages string of the chunk plus the next hit exceeds the
    limit, the chunk is emitted and the hit starts a new one; a hit too big on its own has its
    context cut to fit (by the excess, at least one token kept) and is emitted alone. Unlike the
    plugin, a hit that starts a new chunk is checked on its own as well, so no prompt exceeds the
    limit (unless one token of context is already too much). Hit order is kept.
    """
    parts = user_content_parts(template, query_text, custom_fields)
    if not hits:
        return []
    whole = (_MESSAGES_HEAD + json_escape(system) + _MESSAGES_MIDDLE
             + json_escape(hits_json(hits).join(parts)) + _MESSAGES_TAIL)
    if len(whole.encode()) <= token_limit:  # every token is at least one byte: all fit
        return [list(hits)]
    counter = _PromptCounter(system, parts)
    chunks: list[list[Hit]] = []
    current: list[Hit] = []
    mids = 0  # sum of counter.mid() over `current`
    for hit in hits:
        total = counter.total(mids, hit)
        if total <= token_limit:
            current.append(hit)
            mids += counter.mid(hit)
        elif not current:
            hit_id, context = hit
            chunks.append([(hit_id, _truncate(context, total - token_limit))])
        else:
            chunks.append(current)
            alone = counter.total(0, hit)
            if alone <= token_limit:
                current, mids = [hit], counter.mid(hit)
            else:  # unlike the plugin, a hit that starts a chunk is checked too
                hit_id, context = hit
                chunks.append([(hit_id, _truncate(context, alone - token_limit))])
                current, mids = [], 0
    if current:
        chunks.append(current)
    return chunks
