"""What one evaluation asks, whatever request shape it came in, and what it found."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from workbench.judges.base import Hit, Query, Usage, Verdict
from workbench.judges.context import Sufficiency


@dataclass
class Request:
    """One query's result list to judge and score.

    ``hits`` are in rank order; only the first ``k`` are judged. ``source`` names where they
    came from (an index, or ``hits`` when pasted) and keys the judgment cache. ``judge`` is a
    name of ``workbench.judges.registry`` and ``options`` its settings (``shared``: those given
    for any judge, which a judge that does not take them ignores). ``expected_ids`` /
    ``expected_count``: the relevant documents the caller knows of (or just how many there
    are), which Recall@k and the ideal ranking need; with ids, the ids decide what the metrics
    count as relevant. ``context_sufficiency``: also ask the model ``options["modelId"]``
    whether the judged hits together hold what the reference answers say
    (``workbench.judges.context``).
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
    context_sufficiency: bool = False

    @property
    def top(self) -> list[Hit]:
        return self.hits[: self.k]


@dataclass
class Evaluated:
    """The verdict per judged hit (in rank order), the list's metrics and what judging cost.

    ``counted``: when the metrics do not count the verdicts' ``relevant`` flags (expected ids,
    or reference answers credited one to one), the flags they count, per hit; ``credited``:
    the reference answer each hit was credited with under the one-to-one rule (None: none).
    ``relevant_total``: R, when known. ``sufficiency``: the context sufficiency verdict, when
    asked for (its usage is in ``usage``).
    """

    request: Request
    verdicts: list[Verdict]
    metrics: dict[str, float]
    usage: Usage
    trace: list[dict[str, Any]] = field(default_factory=list)
    extra: dict[str, Any] = field(default_factory=dict)
    counted: list[bool] | None = None
    credited: list[int | None] | None = None
    relevant_total: int | None = None
    sufficiency: Sufficiency | None = None
