"""The judge interface: what a judge is given, what it answers, and how it fails.

A judge rates a batch of hits for one query. It answers one ``Verdict`` per hit, in the hits'
order, and the ``Usage`` it spent. Judges know nothing about jobs, metrics or HTTP: the
evaluation endpoint and the judgment jobs call them, and a judge written outside this repository
(found through the ``workbench.judges`` entry point group, see ``registry``) is called the same
way as a built-in one.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable


@dataclass(frozen=True)
class Query:
    """The query a batch of hits answers: its text, the reference answers (several are
    allowed: a hit matching any of them is relevant) and the query set's custom fields."""

    text: str
    references: tuple[str, ...] = ()
    fields: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Hit:
    """One result to judge: its id and the fields shown to the judge."""

    id: str
    fields: Mapping[str, Any]

    def content(self) -> str:
        """The fields as compact JSON with sorted keys (what an LLM is shown, and part of the
        judgment cache key)."""
        return json.dumps(dict(self.fields), ensure_ascii=False, sort_keys=True,
                          separators=(",", ":"), default=str)

    def text(self) -> str:
        """The field values as one plain text, for judges that compare words."""
        return " ".join(_text(v) for v in self.fields.values()).strip()


def _text(value: Any) -> str:
    if isinstance(value, list):
        return " ".join(_text(v) for v in value)
    if isinstance(value, dict):
        return " ".join(_text(v) for v in value.values())
    return "" if value is None else str(value)


@dataclass
class Verdict:
    """A judge's answer for one hit.

    ``rating`` is on the judge's scale (None: the judge could not rate this hit); ``relevant``
    is the judge's binary call. ``score`` is a similarity behind the rating (reference judges),
    ``reference`` the index of the reference answer the hit matched.
    """

    rating: float | None
    relevant: bool
    score: float | None = None
    rationale: str | None = None
    confidence: float | None = None
    cached: bool = False
    reference: int | None = None


@dataclass
class Usage:
    """What judging cost. ``cost`` is None when the model has no prices (or no model was
    used); ``latency_ms`` is wall-clock time spent judging."""

    input_tokens: int = 0
    output_tokens: int = 0
    calls: int = 0
    cache_hits: int = 0
    latency_ms: float = 0.0
    cost: float | None = None

    @property
    def total_tokens(self) -> int:
        return self.input_tokens + self.output_tokens

    def add(self, other: Usage) -> None:
        self.input_tokens += other.input_tokens
        self.output_tokens += other.output_tokens
        self.calls += other.calls
        self.cache_hits += other.cache_hits
        self.latency_ms += other.latency_ms
        if other.cost is not None:
            self.cost = (self.cost or 0.0) + other.cost

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "inputTokens": self.input_tokens, "outputTokens": self.output_tokens,
            "totalTokens": self.total_tokens, "llmCalls": self.calls,
            "cacheHits": self.cache_hits, "latencyMs": round(self.latency_ms, 3)}
        if self.cost is not None:
            out["cost"] = round(self.cost, 10)
        return out


@dataclass
class Judged:
    """A batch's verdicts (one per hit, in order), what they cost, and, for ``debug``, the
    exchanges with a model. ``matches``, from a judge that compares each hit with each
    reference answer, says which answers each hit matches (one row per hit, one column per
    answer), so crediting answers one to one needs no second judging; None when the judge
    does not tell."""

    verdicts: list[Verdict]
    usage: Usage = field(default_factory=Usage)
    trace: list[dict[str, Any]] = field(default_factory=list)
    matches: list[list[bool]] | None = None


@dataclass(frozen=True)
class Scale:
    """A rating scale: its lowest and highest grade, the grade from which a hit counts as
    relevant, and a label per grade. NDCG gains are ``2**grade - 1`` on this scale."""

    name: str
    low: int
    high: int
    relevant_from: int
    labels: Mapping[int, str]

    def grades(self) -> list[int]:
        return list(range(self.low, self.high + 1))


class JudgeFailed(Exception):
    """The judge could not judge (an LLM unreachable, or answering nothing usable): the
    evaluation endpoint answers 502 with this message, a job ends ERROR with it."""


class OptionError(ValueError):
    """An option given to a judge is not valid: a 400 naming ``option``."""

    def __init__(self, option: str, message: str) -> None:
        super().__init__(message)
        self.option = option


@dataclass
class Setup:
    """What a judge is built with.

    ``options``: the judge's own settings from the request (``threshold``, ``modelId``,
    ``minTokens``...; unknown ones are refused by the judge). ``services``: the process's
    ``workbench.services.Services`` (cluster client, models, config) for judges that need them.
    ``source`` names where the hits came from (an index, or ``hits`` for pasted ones) and keys
    the judgment cache; ``debug`` asks for the exchanges with a model in ``Judged.trace``.
    ``shared`` names options the request gives to whichever judge it picks (such as a
    top-level ``modelId``): a judge that does not take one ignores it instead of refusing it.
    """

    options: Mapping[str, Any] = field(default_factory=dict)
    services: Any = None
    source: str = "hits"
    debug: bool = False
    shared: frozenset[str] = frozenset()


@runtime_checkable
class Judge(Protocol):
    """Rates a batch of hits for one query.

    ``name`` is the name it is registered under; ``needs_reference`` says whether it can only
    judge queries that carry a reference answer (the endpoint checks it before calling).
    ``judge`` returns one verdict per hit, in order, or raises ``JudgeFailed``.
    """

    @property
    def name(self) -> str: ...

    @property
    def needs_reference(self) -> bool: ...

    def judge(self, query: Query, hits: Sequence[Hit]) -> Judged: ...


JudgeFactory = Callable[[Setup], Judge]


def check_options(setup: Setup, allowed: Sequence[str], judge: str) -> None:
    """Refuses options a judge does not take, naming the first one (shared ones excepted)."""
    for name in setup.options:
        if name not in allowed and name not in setup.shared:
            known = ", ".join(allowed) if allowed else "none"
            raise OptionError(name, f"the {judge} judge takes no option [{name}]; "
                                    f"its options are: {known}")


def number_option(setup: Setup, name: str, default: float, low: float, high: float) -> float:
    """A numeric option within ``[low, high]``, or its default."""
    value = setup.options.get(name)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not low <= value <= high:
        raise OptionError(name, f"{name} must be a number between {low:g} and {high:g}, "
                                f"got: {value}")
    return float(value)


def int_option(setup: Setup, name: str, default: int, low: int, high: int) -> int:
    """An integer option within ``[low, high]``, or its default."""
    value = setup.options.get(name)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise OptionError(name, f"{name} must be an integer between {low} and {high}, "
                                f"got: {value}")
    return value


def bool_option(setup: Setup, name: str, default: bool) -> bool:
    value = setup.options.get(name)
    if value is None:
        return default
    if not isinstance(value, bool):
        raise OptionError(name, f"{name} must be true or false, got: {value}")
    return value
