"""Queries from an LLM: one question per sampled document, "what would a user type to find
this?", in the category the document was given (docs/cold-start.md, "How queries are asked").

Categories alternate over the documents in their order (``lexical``, ``semantic``, ...), so a
set holds them in the proportions asked. A *lexical* query uses the document's own words, as a
user who knows the product's name types it; a *semantic* one says the need in other words, as
a user who does not. The answer is asked as structured output (``{"query": "..."}``) down the
format ladder every LLM call of the workbench uses (``judges.llm.ask``), and read leniently:
the first JSON object with a string ``query``, else the first non-blank line.

Calls run on a thread pool bounded by ``WORKBENCH_LLM_CONCURRENCY``, as an LLM judgment's do,
so the job's wall time approaches calls x latency / concurrency; the cancel flag and the time
limit are checked before every call. A document whose call fails is counted and its reason
kept; the set ends ``ERROR`` only when no document gave a query.

With the consistency filter (``querygen.filter``) a document's query is judged in the same task
as it is written. With a budget (``maxTokens``/``maxCost``, ``llm.budget``) a document starts
only once its expected tokens (``querygen.cost``: the generation call and, with the ``llm``
filter, the judge's call) are reserved; the first document that does not fit closes the budget,
and the documents after it are skipped (``skippedDocuments``) without a call.
"""

from __future__ import annotations

import json
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from workbench.jobs.base import JobFailed, keep_metadata
from workbench.jobs.control import JobControl
from workbench.judges.base import Judge, JudgeFailed, Usage
from workbench.judges.llm import ask
from workbench.judges.ratings import ParseFailure
from workbench.llm.base import ModelUnusable
from workbench.llm.budget import Budget, tokenizer_of
from workbench.llm.mlcommons import UnknownModel
from workbench.llm.pricing import Pricing, pricing_of
from workbench.llm.registry import resolve
from workbench.querygen.cost import document_tokens, usage_doc
from workbench.querygen.documents import SourceDocument
from workbench.querygen.filter import Tally
from workbench.querygen.prompt import INSTRUCTIONS, RESPONSE_FORMAT, SYSTEM, user_prompt
from workbench.querygen.queries import GeneratedQuery, normalise
from workbench.services import Services

__all__ = ["INSTRUCTIONS", "RESPONSE_FORMAT", "SYSTEM", "Outcome", "categories_for",
           "llm_queries", "read_query", "user_prompt"]
MAX_OUTPUT_TOKENS = 64
_DECODER = json.JSONDecoder()


def read_query(text: str) -> str:
    """The query in a model's answer: the first JSON object's ``query`` string, else the first
    non-blank line that is not JSON; ``ParseFailure`` when there is none."""
    for start in (i for i, c in enumerate(text) if c == "{"):
        try:
            value, _ = _DECODER.raw_decode(text, start)
        except ValueError:
            continue
        if isinstance(value, dict) and isinstance(value.get("query"), str):
            return str(value["query"])
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith(("{", "[", "```")):
            return line
    raise ParseFailure("the answer holds no query")


@dataclass
class Outcome:
    """What the calls gave: the queries (in document order), the failures, the documents the
    budget skipped, the filter's tally and the usage (the model's calls and the judge's)."""

    queries: list[GeneratedQuery] = field(default_factory=list)
    failed: int = 0
    refused: int = 0  # answers that broke the query-text rules once normalised
    skipped: int = 0  # documents the budget left without a call
    made: int = 0  # queries written, before the filter
    unusable: str | None = None  # why the model cannot be called as set up (unknown, no key)
    last_failure: str | None = None
    usage: Usage = field(default_factory=Usage)
    pricing: Pricing | None = None
    budget: Budget | None = None
    tally: Tally | None = None

    def summary(self) -> dict[str, Any]:
        out: dict[str, Any] = {"failedDocuments": self.failed, "refusedQueries": self.refused}
        if self.tally is not None:
            out.update(self.tally.summary())
        if self.last_failure:
            out["lastFailureReason"] = self.last_failure
        if self.budget is not None and self.budget.reached:
            # as an LLM judgment the budget stopped: budgetReached, and the reason to read
            out["budgetReached"] = True
            out["skippedDocuments"] = self.skipped
            out["lastFailureReason"] = self.budget.reason
        out["usage"] = self.usage_doc()
        return out

    def usage_doc(self) -> dict[str, Any]:
        return usage_doc(self.usage, self.pricing)

    def raise_if_nothing(self) -> None:
        if self.queries:
            return
        if self.made and self.tally is not None:
            raise JobFailed(self.tally.nothing_kept(self.made))
        if self.budget is not None and self.budget.reached and not self.made:
            reason = self.budget.reason
        else:
            reason = self.last_failure or "every answer broke the query-text rules"
        raise JobFailed(f"no query could be generated: {reason}")


def categories_for(count: int, categories: list[str]) -> list[str]:
    """The category of each of ``count`` documents: the categories in turn."""
    return [categories[i % len(categories)] for i in range(count)]


def llm_queries(svc: Services, model_id: str, documents: list[SourceDocument],
                categories: list[str], control: JobControl,
                limits: tuple[int | None, float | None] = (None, None),
                judge: Judge | None = None, tally: Tally | None = None) -> Outcome:
    """One query per document from the model ``model_id``, kept when ``judge`` (the filter)
    rates its document relevant, within ``limits`` (``maxTokens``, ``maxCost``); see the
    module's docstring."""
    model = resolve(model_id, svc.config, svc.models)
    pricing = pricing_of(model)
    max_tokens, max_cost = limits
    budget = (None if max_tokens is None and max_cost is None
              else Budget(max_tokens, max_cost, pricing))
    count = tokenizer_of(model).count if budget is not None else None
    outcome = Outcome(pricing=pricing, budget=budget, tally=tally)
    lock = threading.Lock()
    results: list[GeneratedQuery | None] = [None] * len(documents)
    control.usage = outcome.usage_doc

    def one(position: int, document: SourceDocument, category: str) -> None:
        if control.cancelled() or outcome.unusable:
            return
        held = None
        if budget is not None and count is not None:
            held = budget.reserve(*document_tokens(document, category, judge, count))
            if held is None:
                with lock:
                    outcome.skipped += 1
                control.advance()
                control.write()
                return
        usage = Usage()
        try:
            text = ask(model, SYSTEM, user_prompt(document, category), RESPONSE_FORMAT,
                       read_query, usage, None, "could not write a query",
                       wait=svc.config.llm_timeout, max_output=MAX_OUTPUT_TOKENS)
        except JudgeFailed as exc:
            with lock:
                outcome.failed += 1
                outcome.last_failure = str(exc)
        except (UnknownModel, ModelUnusable) as exc:  # no document can succeed: stop asking
            with lock:
                outcome.unusable = outcome.unusable or str(exc)
        else:
            query = normalise(text)
            if query is None:
                with lock:
                    outcome.refused += 1
            else:
                with lock:
                    outcome.made += 1
                if judge is None or tally is None or tally.check(judge, query, document, usage):
                    results[position] = GeneratedQuery(query, category, document.id)
        finally:
            if held is not None and budget is not None:
                budget.settle(held, usage.input_tokens, usage.output_tokens)
            with lock:
                outcome.usage.add(usage)
            control.advance()
            control.write()

    workers = max(1, min(len(documents), svc.config.llm_concurrency))
    with ThreadPoolExecutor(workers, thread_name_prefix="querygen") as pool:
        futures = [pool.submit(one, i, doc, cat) for i, (doc, cat)
                   in enumerate(zip(documents, categories_for(len(documents), categories),
                                    strict=True))]
        for future in futures:
            future.result()  # a crash (not a model failure) fails the job, as it should
    control.check()
    if outcome.unusable:
        error = JobFailed(f"no query could be generated: {outcome.unusable}")
        keep_metadata(error, usage=outcome.usage_doc())
        raise error
    outcome.queries = [q for q in results if q is not None]
    return outcome
