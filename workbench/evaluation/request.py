"""What one evaluation asks, whatever request shape it came in, and what it found."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from workbench.judges.base import Hit, Query, Usage, Verdict


@dataclass
class Request:
    """One query's result list to judge and score.

    ``hits`` are in rank order; only the first ``k`` are judged. ``source`` names where they
    came from (an index, or ``hits`` when pasted) and keys the judgment cache. ``judge`` is a
    name of ``workbench.judges.registry`` and ``options`` its settings (``shared``: those given
    for any judge, which a judge that does not take them ignores). ``expected_ids`` /
    ``expected_count``: the relevant documents the caller knows of (or just how many there
    are), which Recall@k and the ideal ranking need.
    """

    query: Query
    hits: list[Hit]
    source: str
    k: int
    judge: str
    options: dict[str, Any] = field(default_factory=dict)
    debug: bool = False
    shared: frozenset[str] = frozenset()
    expected_ids: list[str] | None = None
    expected_count: int | None = None

    @property
    def top(self) -> list[Hit]:
        return self.hits[: self.k]


@dataclass
class Evaluated:
    """The verdict per judged hit (in rank order), the list's metrics and what judging cost."""

    request: Request
    verdicts: list[Verdict]
    metrics: dict[str, float]
    usage: Usage
    trace: list[dict[str, Any]] = field(default_factory=list)
    extra: dict[str, Any] = field(default_factory=dict)
