"""The consistency filter of a generated set (docs/cold-start.md): a query is kept only when a
judge rates its own source document relevant to it.

The judge is one of ``workbench.judges`` (``llm``, ``token_overlap``, ``semantic`` or an
installed one), given the generated query and the source document's context fields as the one
hit to judge. It never searches: judging the hits of a search configuration would make the set
favour the configuration it is meant to evaluate. A judge that compares with reference answers
(``token_overlap``, ``semantic``) is given the query itself as the reference: it then asks
whether the document holds the query's words (or its meaning). The ``llm`` judge grades the
pair on its rubric with the set's own model (one model, so one price and one budget).

A query the judge rates not relevant is dropped (``filteredQueries``); a query the judge could
not rate (the model failed) is dropped too (``unjudgedQueries``): a set kept only of checked
queries is what was asked for.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any

from workbench.judges import llm as llm_judge
from workbench.judges import registry
from workbench.judges.base import Hit, Judge, JudgeFailed, Query, Setup, Usage
from workbench.querygen.documents import SourceDocument

LLM = llm_judge.NAME


def judge_options(spec: dict[str, Any], model_id: str | None) -> dict[str, Any]:
    """The options the judge of a stored ``filter`` is built with: the spec without ``judge``,
    and for the ``llm`` judge the set's model."""
    options = {k: v for k, v in spec.items() if k != "judge"}
    if spec.get("judge") == LLM and model_id is not None:
        options["modelId"] = model_id
    return options


def build(spec: dict[str, Any], model_id: str | None, services: Any = None,
          source: str = "hits") -> Judge:
    """The judge of a ``filter`` (``{"judge": name, ...options}``). Raises what
    ``registry.create`` raises for a judge unknown or options it refuses."""
    return registry.create(spec["judge"], Setup(judge_options(spec, model_id), services,
                                                source=source))


def pair(judge: Judge, text: str, document: SourceDocument) -> tuple[Query, Hit]:
    """What the judge is asked: the query (its own reference answer for a judge that needs
    one) and the source document as the one hit."""
    references = (text,) if judge.needs_reference else ()
    return Query(text, references), Hit(document.id, document.fields)


def consistent(judge: Judge, text: str, document: SourceDocument) -> tuple[bool, Usage]:
    """Whether ``judge`` rates ``document`` relevant to the query ``text``, and what asking
    cost. ``JudgeFailed`` when it could not judge."""
    query, hit = pair(judge, text, document)
    judged = judge.judge(query, [hit])
    return judged.verdicts[0].relevant, judged.usage


@dataclass
class Tally:
    """What the filter did: queries dropped as not relevant, queries it could not judge (and
    the last reason), and the judge's usage."""

    name: str
    filtered: int = 0
    unjudged: int = 0
    last_failure: str | None = None
    usage: Usage = field(default_factory=Usage)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def check(self, judge: Judge, text: str, document: SourceDocument,
              usage: Usage | None = None) -> bool:
        """Whether the query is kept; its usage goes to ``usage`` (else to the tally's)."""
        spent = Usage()
        try:
            kept, spent = consistent(judge, text, document)
        except JudgeFailed as exc:
            with self._lock:
                self.unjudged += 1
                self.last_failure = str(exc)
            return False
        finally:
            with self._lock:
                (usage if usage is not None else self.usage).add(spent)
        if not kept:
            with self._lock:
                self.filtered += 1
        return kept

    def summary(self) -> dict[str, Any]:
        out: dict[str, Any] = {"filter": self.name, "filteredQueries": self.filtered,
                               "unjudgedQueries": self.unjudged}
        if self.last_failure:
            out["lastFilterFailureReason"] = self.last_failure
        return out

    def nothing_kept(self, made: int) -> str:
        """Why a set whose ``made`` queries were all dropped ends ERROR."""
        reason = (f"no query passed the consistency filter: the {self.name} judge rated "
                  f"{self.filtered} of {made} queries not relevant to their source document")
        if self.unjudged:
            reason += f" and could not judge {self.unjudged} ({self.last_failure})"
        return reason
