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
"""

from __future__ import annotations

import json
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from workbench.jobs.base import JobFailed
from workbench.jobs.control import JobControl
from workbench.judges.base import JudgeFailed, Usage
from workbench.judges.llm import ask
from workbench.judges.ratings import ParseFailure
from workbench.llm.registry import resolve
from workbench.querygen.documents import SourceDocument
from workbench.querygen.queries import GeneratedQuery, normalise
from workbench.services import Services

SYSTEM = (
    "You write the search queries real users type into a search box. Given one document of "
    "a search index, write one query a user would type to find exactly this document. "
    "Answer with JSON only: {\"query\": \"...\"}."
)
INSTRUCTIONS = {
    "lexical": "Write a short keyword query (2 to 6 words) using words from the document, as a "
               "user who knows what the product is called would type it.",
    "semantic": "Write a short query (3 to 10 words) that describes what the user needs, in "
                "other words than the document's, as a user who does not know the product's "
                "name would type it.",
}
RESPONSE_FORMAT: dict[str, Any] = {
    "type": "json_schema",
    "json_schema": {
        "name": "generated_query",
        "strict": True,
        "schema": {"type": "object", "properties": {"query": {"type": "string"}},
                   "required": ["query"], "additionalProperties": False},
    },
}
MAX_OUTPUT_TOKENS = 64
_DECODER = json.JSONDecoder()


def user_prompt(document: SourceDocument, category: str) -> str:
    """What the model is shown: the instruction of the category and the document's fields."""
    shown = json.dumps(document.fields, ensure_ascii=False, default=str)
    return f"{INSTRUCTIONS[category]}\n\nDocument:\n{shown}"


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
    """What the calls gave: the queries (in document order), the failures and the usage."""

    queries: list[GeneratedQuery] = field(default_factory=list)
    failed: int = 0
    refused: int = 0  # answers that broke the query-text rules once normalised
    last_failure: str | None = None
    usage: Usage = field(default_factory=Usage)

    def summary(self) -> dict[str, Any]:
        out: dict[str, Any] = {"failedDocuments": self.failed, "refusedQueries": self.refused}
        if self.last_failure:
            out["lastFailureReason"] = self.last_failure
        out["usage"] = self.usage_doc()
        return out

    def usage_doc(self) -> dict[str, Any]:
        return {"llmCalls": self.usage.calls, "inputTokens": self.usage.input_tokens,
                "outputTokens": self.usage.output_tokens,
                "latencyMs": round(self.usage.latency_ms, 3)}

    def raise_if_nothing(self) -> None:
        if not self.queries:
            reason = self.last_failure or "every answer broke the query-text rules"
            raise JobFailed(f"no query could be generated: {reason}")


def categories_for(count: int, categories: list[str]) -> list[str]:
    """The category of each of ``count`` documents: the categories in turn."""
    return [categories[i % len(categories)] for i in range(count)]


def llm_queries(svc: Services, model_id: str, documents: list[SourceDocument],
                categories: list[str], control: JobControl) -> Outcome:
    """One query per document from the model ``model_id`` (see the module's docstring)."""
    model = resolve(model_id, svc.config, svc.models)
    outcome = Outcome()
    lock = threading.Lock()
    results: list[GeneratedQuery | None] = [None] * len(documents)
    control.usage = outcome.usage_doc

    def one(position: int, document: SourceDocument, category: str) -> None:
        if control.cancelled():
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
        else:
            query = normalise(text)
            with lock:
                if query is None:
                    outcome.refused += 1
                else:
                    results[position] = GeneratedQuery(query, category, document.id)
        finally:
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
    outcome.queries = [q for q in results if q is not None]
    return outcome
