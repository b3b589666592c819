"""Many evaluations in one request (``POST /_plugins/_search_relevance/_evaluate/_batch``).

The request is ``{"queries": [...], <shared settings>}``: each entry is an ``_evaluate`` body in
either shape (``workbench_shape`` or ``brief_shape``); the shared settings (``judge``,
``modelId``, ``k``, ``fields``, ``judgeOptions``) fill in what an entry does not say itself.
Every entry is read and its judge built before any is judged, so a bad entry costs no LLM call;
its error names it (``queries[2].hits[0] has no id``). The entries are then judged concurrently,
as many at once as keeps the LLM calls in flight within ``WORKBENCH_LLM_CONCURRENCY``.

The answer has each entry's own answer, in its own shape, and a summary: the query count, the
mean of each metric over the queries (the brief's ``ndcg``/``map``/``mrr`` always, and each
workbench metric every query reports under the same name), the usage summed, and the batch's
wall-clock latency.
"""

from __future__ import annotations

import math
import re
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from workbench.errors import BadRequest
from workbench.evaluation import brief_shape, workbench_shape
from workbench.evaluation.request import Evaluated, Request
from workbench.evaluation.run import evaluate
from workbench.judges import registry
from workbench.judges.base import OptionError, Setup, Usage
from workbench.judges.llm import BATCH as LLM_BATCH
from workbench.llm.deadline import DeadlinePassed
from workbench.schemas.body import load
from workbench.schemas.evaluate import BatchSchema, entry_body
from workbench.services import Services
from workbench.store.identity import carry

# A message that starts with a field path (``hits[0] has no id``) is prefixed with the entry's
# path; any other gets ``queries[i]: `` in front.
_FIELD_PATH = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(?:\[\d+\])?(?:\.[A-Za-z_][A-Za-z0-9_]*"
                         r"(?:\[\d+\])?)*(?= )")
_FIELDS = frozenset(["query", "queryText", "hits", "eval", "k", "fields", "judge",
                     "judgeOptions", "modelId", "referenceAnswer", "debug", "threshold",
                     "searchQuery", "index", "searchConfigurationId", "scale"])


@dataclass
class Entry:
    """One evaluation of the batch: its position, shape, body (shared settings applied) and
    what it asks."""

    position: int
    brief: bool
    body: dict[str, Any]
    request: Request


class EntryFailed(Exception):
    """Entry ``position`` failed with ``cause``; the API answers as for ``cause`` alone, with
    the entry named in the reason."""

    def __init__(self, position: int, cause: Exception,
                 usage: dict[str, Any] | None = None) -> None:
        super().__init__(f"queries[{position}]: {cause}")
        self.position = position
        self.cause = cause
        #: what the entries that were judged cost (a failed batch job keeps it)
        self.usage = usage


def located(position: int, message: str) -> str:
    """``message`` about entry ``position``, named by its path in the batch request."""
    match = _FIELD_PATH.match(message)
    if match and re.split(r"[.\[]", match.group(0))[0] in _FIELDS:
        return f"queries[{position}].{message}"
    return f"queries[{position}]: {message}"


def with_shared(entry: dict[str, Any], shared: dict[str, Any], brief: bool) -> dict[str, Any]:
    """The entry with the shared settings it does not give itself."""
    out = dict(entry)
    for name in ("judge", "modelId", "k"):
        if name in shared and out.get(name) is None:
            out[name] = shared[name]
    if "judgeOptions" in shared:
        own = out.get("judgeOptions")
        if own is None:
            out["judgeOptions"] = shared["judgeOptions"]
        elif isinstance(own, dict) and isinstance(shared["judgeOptions"], dict):
            out["judgeOptions"] = {**shared["judgeOptions"], **own}
    if "fields" in shared:
        if not brief:
            out.setdefault("fields", shared["fields"])
        elif out.get("eval") is None or (isinstance(out["eval"], dict)
                                         and "fields" not in out["eval"]):
            out["eval"] = {**(out.get("eval") or {}), "fields": shared["fields"]}
    return out


def parse(svc: Services, body: dict[str, Any]) -> list[Entry]:
    """Every entry read and its judge built (a 400 naming the first bad one): the batch's own
    fields first (schemas/evaluate.BatchSchema), then each entry in turn."""
    shared = load(BatchSchema(), body)
    raw = shared.pop("queries")
    entries = []
    for position, given in enumerate(raw):
        item = entry_body(position, given)
        brief = brief_shape.is_brief(item)
        merged = with_shared(item, shared, brief)
        try:
            request = brief_shape.parse(merged) if brief else workbench_shape.parse(svc, merged)
            check_judge(svc, request)
        except BadRequest as exc:
            raise BadRequest(located(position, exc.reason)) from exc
        except (OptionError, registry.UnknownJudge, registry.BrokenJudge) as exc:
            raise EntryFailed(position, exc) from exc
        entries.append(Entry(position, brief, merged, request))
    return entries


def check_judge(svc: Services, request: Request) -> None:
    """Build the entry's judge once, so a bad option or judge is found before judging."""
    judge = registry.create(request.judge, Setup(request.options, svc, request.source,
                                                 request.debug, request.shared))
    if judge.needs_reference and not request.query.references:
        raise OptionError("referenceAnswer", f"referenceAnswer is required for the "
                                             f"{request.judge} judge")


def workers(svc: Services, entries: list[Entry]) -> int:
    """Entries judged at once: the LLM judge makes up to one call per ``LLM_BATCH`` hits at
    once, so this many entries keep the calls within the LLM concurrency."""
    widest = max(math.ceil(len(e.request.top) / LLM_BATCH) for e in entries)
    per_entry = min(widest, svc.config.llm_concurrency)
    return max(1, min(len(entries), svc.config.llm_concurrency // per_entry))


def run(svc: Services, entries: list[Entry],
        evaluate_one: Callable[[Services, Request], Evaluated] = evaluate) -> dict[str, Any]:
    """Judge every entry and answer each in its shape with the batch's summary. Raises
    ``EntryFailed`` for the first entry (by position) that failed."""
    started = time.perf_counter()

    def one(entry: Entry) -> Evaluated | Exception:
        try:
            return evaluate_one(svc, entry.request)
        except Exception as exc:  # noqa: BLE001 - re-raised below, for the first failing entry
            return exc

    with ThreadPoolExecutor(workers(svc, entries)) as pool:
        outcomes = list(pool.map(carry(one), entries))
    elapsed_ms = (time.perf_counter() - started) * 1000
    late = [o for o in outcomes if isinstance(o, DeadlinePassed)]
    if late:  # out of time: say how far the batch got, not which entry was cut
        finished = sum(1 for o in outcomes if not isinstance(o, Exception))
        late[0].deadline.progress = f"{finished} of {len(entries)} evaluations were complete"
        raise late[0].refresh()
    done = [o for o in outcomes if not isinstance(o, Exception)]
    for entry, outcome in zip(entries, outcomes, strict=True):
        if isinstance(outcome, Exception):
            raise EntryFailed(entry.position, outcome,
                              summed_usage(done, elapsed_ms)) from outcome
    results = [brief_shape.render(d, e.body) if e.brief else workbench_shape.render(d)
               for e, d in zip(entries, done, strict=True)]
    return {"results": results, "summary": summary(done, elapsed_ms)}


def summary(done: list[Evaluated], elapsed_ms: float) -> dict[str, Any]:
    """Query count, mean metrics and summed usage (with the batch's wall-clock latency)."""
    usage = summed_usage(done, elapsed_ms)
    values: dict[str, list[float]] = {}
    for one in done:
        for name, value in brief_shape.metrics(one).items():
            values.setdefault(name, []).append(value)
    common = set(done[0].metrics).intersection(*(one.metrics for one in done[1:]))
    for name in done[0].metrics:
        if name in common:
            values[name] = [one.metrics[name] for one in done]
    means = {name: mean(v) for name, v in values.items()}
    return {"queries": len(done), "metrics": means, "usage": usage}


def summed_usage(done: list[Evaluated], elapsed_ms: float) -> dict[str, Any]:
    """The usage of the judged entries together, with the batch's wall-clock latency."""
    usage = Usage()
    for one in done:
        usage.add(one.usage)
    usage.latency_ms = elapsed_ms
    return usage.as_dict()


def mean(values: list[Any]) -> float | None:
    """The mean of the numbers (a metric a query could not compute, null, is left out)."""
    numbers = [v for v in values if isinstance(v, (int, float)) and not isinstance(v, bool)]
    return sum(numbers) / len(numbers) if numbers else None
