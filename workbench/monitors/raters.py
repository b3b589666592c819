"""Who rates a monitor's pairs: a reference judge of ``workbench.judges`` or an LLM through the
judgment jobs' ``LlmRater`` (its cache, budget and usage). Both answer the same three things:
how a document is shown (``describe``), the ratings of the pairs not yet known (``rate``) and
the gold pairs rated afresh, bypassing every cache (``rerate``)."""

from __future__ import annotations

import json
from typing import Any, Protocol

from workbench.jobs.base import JobFailed
from workbench.judges import registry
from workbench.judges.base import Hit, Judge, JudgeFailed, OptionError, Query, Setup
from workbench.judges.registry import BrokenJudge, UnknownJudge
from workbench.judgments.llm.job import JobUsage, LlmRater
from workbench.judgments.reference_job import shown_fields
from workbench.judgments.retrieval import Target
from workbench.llm.base import LLMError
from workbench.services import Services
from workbench.store.vector_fields import vector_fields


class Rater(Protocol):
    def describe(self, source: dict[str, Any]) -> str: ...

    def rate(self, targets: list[Target]) -> tuple[dict[tuple[str, str], float], int]:
        """(query key, docId) -> rating of every hit not in ``target.known`` that could be
        rated, and how many of them came from a cache (no call made)."""
        ...

    def rerate(self, targets: list[Target]) -> dict[tuple[str, str], float]: ...

    def usage(self) -> dict[str, Any]: ...

    def cost(self) -> float: ...


class ReferenceRater:
    """A reference judge (``token_overlap``...): deterministic, no cache, no cost."""

    def __init__(self, svc: Services, spec: dict[str, Any], index: str) -> None:
        try:
            self.judge: Judge = registry.create(
                spec["judge"], Setup(dict(spec.get("judgeOptions") or {}), svc,
                                     source="monitor"))
        except (UnknownJudge, OptionError, BrokenJudge) as exc:
            raise JobFailed(f"the judge cannot be built: {exc}") from None
        self.fields = list(spec.get("contextFields") or [])
        self.vectors = frozenset() if self.fields else vector_fields(svc.client, [index])
        self.calls = 0

    def describe(self, source: dict[str, Any]) -> str:
        return shown_fields(source, self.fields, self.vectors)

    def _judge(self, target: Target, todo: list[tuple[str, str]]
               ) -> dict[tuple[str, str], float]:
        entry = target.entry
        answer = entry.reference_answer
        if not todo or (self.judge.needs_reference and not answer):
            return {}
        query = Query(entry.query_text, (answer,) if answer else (), dict(entry.custom_fields))
        hits = [Hit(doc_id, json.loads(shown)) for doc_id, shown in todo]
        try:
            verdicts = self.judge.judge(query, hits).verdicts
        except JudgeFailed as exc:
            raise JobFailed(f"the judge failed: {exc}") from None
        self.calls += 1
        return {(entry.key, hit.id): float(v.rating) for hit, v in zip(hits, verdicts, strict=True)
                if v.rating is not None}

    def rate(self, targets: list[Target]) -> tuple[dict[tuple[str, str], float], int]:
        out: dict[tuple[str, str], float] = {}
        for target in targets:
            out.update(self._judge(target, [h for h in target.hits if h[0] not in target.known]))
        return out, 0

    def rerate(self, targets: list[Target]) -> dict[tuple[str, str], float]:
        out: dict[tuple[str, str], float] = {}
        for target in targets:
            out.update(self._judge(target, target.hits))
        return out

    def usage(self) -> dict[str, Any]:
        return {"judgeCalls": self.calls}

    def cost(self) -> float:
        return 0.0


class ModelRater:
    """An LLM: the judgment cache is read (and written) as LLM judgments do; a budget stops the
    calls, leaving the pairs it did not pay for unrated."""

    def __init__(self, svc: Services, spec: dict[str, Any], index: str,
                 budget: dict[str, Any] | None) -> None:
        self.svc, self.index = svc, index
        self.metadata = {**spec, **(budget or {})}
        try:
            self.rater = LlmRater(svc, self.metadata, index)
        except (LLMError, KeyError, ValueError) as exc:
            raise JobFailed(f"the model cannot be used: {exc}") from None
        self.rater.find_vectors([index])
        self.fresh: LlmRater | None = None

    def describe(self, source: dict[str, Any]) -> str:
        return self.rater.describe(source)

    @staticmethod
    def _answers(rater: LlmRater, targets: list[Target]) -> dict[tuple[str, str], float]:
        """The model's ratings; a model that failed every call it made (not stopped by the
        budget) fails the run with its last reason."""
        outcomes = rater.rate(targets)
        made = {(t.entry.key, doc_id): float(rating)
                for t, outcome in zip(targets, outcomes, strict=True)
                for doc_id, rating in outcome.ratings.items()}
        errors = [error for outcome in outcomes for error in outcome.errors]
        if errors and not made and not any(outcome.unpaid for outcome in outcomes):
            raise JobFailed(f"the model rated nothing: {errors[-1]}")
        return made

    def rate(self, targets: list[Target]) -> tuple[dict[tuple[str, str], float], int]:
        before = {t.entry.key: set(t.known) for t in targets}
        self.rater.use_cache(targets)
        cached = {(t.entry.key, d): float(r) for t in targets for d, r in t.known.items()
                  if d not in before[t.entry.key]}
        return {**cached, **self._answers(self.rater, targets)}, len(cached)

    def rerate(self, targets: list[Target]) -> dict[tuple[str, str], float]:
        # the same model, prompt and budget, the cache bypassed (and written afresh)
        self.fresh = LlmRater(self.svc, {**self.metadata, "overwriteCache": True}, self.index)
        self.fresh.vectors = self.rater.vectors
        self.fresh.budget = self.rater.budget  # one budget for the whole run
        return self._answers(self.fresh, targets)

    def usage(self) -> dict[str, Any]:
        total = JobUsage()
        total.add(self.rater.usage)
        if self.fresh is not None:
            total.add(self.fresh.usage)
        return self.rater.usage_metadata(total)

    def cost(self) -> float:
        return float(self.usage().get("cost") or 0.0)


def build(svc: Services, monitor: dict[str, Any], index: str) -> Rater:
    spec = dict(monitor["judge"])
    if "modelId" in spec:
        return ModelRater(svc, spec, index, monitor.get("budget"))
    return ReferenceRater(svc, spec, index)
