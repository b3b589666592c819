"""Team Draft Interleaving (Radlinski, Kurup & Joachims, "How does clickthrough data reflect
retrieval quality?", CIKM 2008).

One user sees one list drafted from the results of both rankers, as two captains pick teams:
the team with fewer picks goes next, a coin decides on equal counts, and the picking team takes
its highest-ranked document not yet shown. Clicks are credited to the team that drafted the
document, so the ranker whose documents get more clicks per impression is preferred; the coin
makes position bias fall on both teams alike.

The coin comes from ``random.Random(seed_for(...))``: the same user sees the same list for the
same query and test version (pages stay consistent), and every logged impression can be rebuilt
from its four inputs. Drawing the coins from one generator in pick order also makes a shorter
interleaving a prefix of a longer one, so page 2 (``from`` + ``size``) continues page 1.
"""

from __future__ import annotations

import hashlib
import json
import random
from collections.abc import Sequence
from dataclasses import dataclass

A = "A"
B = "B"


def seed_for(test_id: str, version: int, query: str, client_id: str) -> int:
    """A 64-bit seed from sha256 of the four values, joined unambiguously as a JSON list.

    Deterministic so one client sees one list per query and test version, and so any impression
    can be reconstructed later from what was logged.
    """
    key = json.dumps([test_id, version, query, client_id], ensure_ascii=False)
    return int.from_bytes(hashlib.sha256(key.encode("utf-8")).digest()[:8], "big")


@dataclass(frozen=True)
class Pick:
    """One document of the interleaved list and the team ("A" or "B") that drafted it."""

    doc_id: str
    team: str


def team_draft(a: Sequence[str], b: Sequence[str], length: int, seed: int) -> list[Pick]:
    """Interleave ranking ``a`` (team A) and ``b`` (team B) into at most ``length`` picks.

    Stops as soon as either list has no document left that is not already shown, so neither team
    keeps picking alone (a one-sided tail would credit its clicks to one ranker by construction).
    A document in both lists appears once, on the team that drafted it first; a repeated id in one
    list is skipped like any document already shown.
    """
    rng = random.Random(seed)
    picks: list[Pick] = []
    shown: set[str] = set()
    next_a = next_b = 0
    count_a = count_b = 0
    while len(picks) < length:
        while next_a < len(a) and a[next_a] in shown:
            next_a += 1
        while next_b < len(b) and b[next_b] in shown:
            next_b += 1
        if next_a == len(a) or next_b == len(b):
            break
        if count_a < count_b or (count_a == count_b and rng.random() < 0.5):
            doc, team = a[next_a], A
            count_a += 1
        else:
            doc, team = b[next_b], B
            count_b += 1
        shown.add(doc)
        picks.append(Pick(doc, team))
    return picks


def interleaved(a: Sequence[str], b: Sequence[str], depth: int, seed: int
                ) -> list[tuple[str, str]]:
    """(id, team) of the first ``depth`` hits of the list one search shows.

    The list holds as many hits as the longer of ``a`` and ``b``, as the plugin's does (its
    draft stops at ``max(|A|, |B|)``): two lists of 3 with nothing in common show 3, not 6.
    First the team draft, which ends once either side has no new document (so the teams stay
    balanced); then the rest of the other side's hits, in its order, marked with its team in
    lower case (``a``, ``b``): shown, but not credited.
    """
    length = min(depth, max(len(a), len(b)))
    picks = [(p.doc_id, p.team) for p in team_draft(a, b, length, seed)]
    if len(picks) < length:
        seen = {doc_id for doc_id, _ in picks}
        for team, ids in ((A, a), (B, b)):
            for doc_id in ids:
                if len(picks) >= length:
                    break
                if doc_id not in seen:
                    seen.add(doc_id)
                    picks.append((doc_id, team.lower()))
    return picks
