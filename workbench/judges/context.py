"""Context sufficiency: do the retrieved hits, together, hold everything the reference answer
says? A set-level LLM judgment (one verdict for the whole list, not one per hit), after the
context sufficiency judge of Databricks' agent evaluation: the model is given the query, the
reference answers as the facts to find, and the hits, and answers ``sufficient`` (true/false),
a one-sentence ``rationale`` and the facts it found ``missing``.

Per-hit judges say whether each result is relevant; this says whether retrieval as a whole
brought what an answer needs, which a list of individually relevant results may not. The answer
goes through the judgment cache (keyed by the query and its references, the hits' ids and shown
content, the model and this prompt), so asking again costs nothing.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from workbench.judges.base import Hit, Query, Usage
from workbench.judges.llm import ask
from workbench.judges.ratings import ParseFailure
from workbench.llm.base import ChatModel
from workbench.llm.pricing import pricing_of
from workbench.llm.registry import resolve
from workbench.store.judgment_cache import CacheKey, JudgmentCache, prompt_code

NAME = "context_sufficiency"
CODE = "CONTEXT_SUFFICIENCY"

SYSTEM_PROMPT = """You are an expert evaluator of retrieval for question answering. You are \
given a search query, the reference answer(s) to it, and the numbered results a retrieval \
system returned. Decide whether the results TOGETHER contain enough information to give the \
reference answer: every fact the reference answer states must be supported by at least one \
result (the wording may differ). Do not use your own knowledge: only what the results say \
counts. List each fact of the reference answer that no result supports. Answer ONLY with a JSON \
object of the form {"sufficient": true|false, "rationale": "<one sentence>", \
"missing": ["<fact>", ...]} and nothing else."""

RESPONSE_FORMAT: dict[str, Any] = {"type": "json_schema", "json_schema": {
    "name": NAME, "strict": True,
    "schema": {"type": "object",
               "properties": {"sufficient": {"type": "boolean"},
                              "rationale": {"type": "string"},
                              "missing": {"type": "array", "items": {"type": "string"}}},
               "required": ["sufficient", "rationale", "missing"],
               "additionalProperties": False}}}


@dataclass
class Sufficiency:
    """The verdict: ``sufficient``, why, and the facts of the reference answer not found."""

    sufficient: bool
    rationale: str
    missing: list[str] = field(default_factory=list)
    cached: bool = False

    def as_dict(self) -> dict[str, Any]:
        return {"sufficient": self.sufficient, "rationale": self.rationale,
                "missing": list(self.missing), "cached": self.cached}


def user_prompt(query: Query, hits: Sequence[Hit]) -> str:
    """The query, the reference answers (always a JSON list) and the results as a JSON array."""
    return "\n".join([
        f"Query: {query.text}",
        "Reference answers: " + json.dumps(list(query.references), ensure_ascii=False),
        "Results: " + json.dumps([{"id": h.id, "content": h.content()} for h in hits],
                                 ensure_ascii=False)])


def cache_key(query: Query, source: str, hits: Sequence[Hit], model_id: str) -> CacheKey:
    """One key for the whole list: the hits' ids and contents, in order, are hashed."""
    text = query.text + "#" + json.dumps({"referenceAnswer": list(query.references)},
                                         ensure_ascii=False, separators=(",", ":"))
    listing = json.dumps([[h.id, h.content()] for h in hits], ensure_ascii=False)
    digest = hashlib.sha1(listing.encode()).hexdigest()[:16]
    fields = tuple(sorted({name for hit in hits for name in hit.fields}))
    return CacheKey(text, f"{source}::{NAME}::{digest}", fields, model_id,
                    prompt_code(SYSTEM_PROMPT, CODE))


def parse(text: str) -> Sufficiency | None:
    """The verdict in a model's answer: the first JSON object with a ``sufficient`` that is a
    boolean (or "yes"/"no"); None when there is none."""
    decoder = json.JSONDecoder()
    start = text.find("{")
    while start >= 0:
        try:
            value, _ = decoder.raw_decode(text, start)
        except ValueError:
            value = None
        if isinstance(value, dict):
            verdict = _verdict(value)
            if verdict is not None:
                return verdict
        start = text.find("{", start + 1)
    return None


def _verdict(value: dict[str, Any]) -> Sufficiency | None:
    raw = value.get("sufficient")
    if isinstance(raw, str) and raw.strip().lower() in ("yes", "no", "true", "false"):
        raw = raw.strip().lower() in ("yes", "true")
    if not isinstance(raw, bool):
        return None
    missing = value.get("missing")
    facts = [str(m) for m in missing if isinstance(m, (str, int, float))] \
        if isinstance(missing, list) else []
    return Sufficiency(raw, str(value.get("rationale") or "").strip(), facts)


def _stored(entry: dict[str, Any]) -> Sufficiency:
    """A cached verdict: ``rating`` "1"/"0", ``rationale`` a JSON object holding the rationale
    and the missing facts (the cache index has no field of its own for them)."""
    try:
        details = json.loads(str(entry.get("rationale") or "{}"))
    except ValueError:
        details = {}
    if not isinstance(details, dict):
        details = {}
    missing = details.get("missing")
    return Sufficiency(str(entry.get("rating")) == "1", str(details.get("rationale") or ""),
                       [str(m) for m in missing] if isinstance(missing, list) else [],
                       cached=True)


@dataclass
class ContextJudge:
    """Asks ``model_id`` for the context sufficiency of a list of hits."""

    model_id: str
    services: Any
    source: str = "hits"
    debug: bool = False
    trace: list[dict[str, Any]] = field(default_factory=list)

    def judge(self, query: Query, hits: Sequence[Hit]) -> tuple[Sufficiency, Usage]:
        """The verdict and what it cost. Raises ``JudgeFailed`` when the model gives no usable
        answer, ``UnknownModel`` for a model that does not exist."""
        usage = Usage()
        if not hits:
            return Sufficiency(False, "No results were retrieved.",
                               list(query.references)), usage
        svc = self.services
        model = resolve(self.model_id, svc.config, svc.models)
        cache = JudgmentCache(svc.client)
        key = cache_key(query, self.source, hits, self.model_id)
        entry = cache.entries([key]).get(key)
        if entry is not None:
            usage.cache_hits = 1
            return _stored(entry), usage
        verdict = self._ask(model, query, hits, usage)
        cache.store({key: {"rating": "1" if verdict.sufficient else "0",
                           "rationale": json.dumps({"rationale": verdict.rationale,
                                                    "missing": verdict.missing},
                                                   ensure_ascii=False)}})
        prices = pricing_of(model)
        if prices is not None:
            usage.cost = prices.cost(usage.input_tokens, usage.output_tokens)
        return verdict, usage

    def _ask(self, model: ChatModel, query: Query, hits: Sequence[Hit],
             usage: Usage) -> Sufficiency:
        """Down the structured-output ladder (``workbench.judges.llm.ask``)."""

        def read(text: str) -> Sufficiency:
            verdict = parse(text)
            if verdict is None:
                raise ParseFailure("the answer holds no JSON object with a boolean "
                                   "'sufficient'")
            return verdict

        trace: list[dict[str, Any]] = []
        try:
            return ask(model, SYSTEM_PROMPT, user_prompt(query, hits), RESPONSE_FORMAT, read,
                       usage, trace if self.debug else None,
                       "failed to judge context sufficiency",
                       wait=self.services.config.llm_timeout)
        finally:
            self.trace.extend({"judge": NAME, **exchange} for exchange in trace)
