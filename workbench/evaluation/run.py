"""Judge one request's hits and score the list.

What the metrics count as relevant:

- With expected ids, the ids decide (as in Evret): a hit is relevant for every metric when its
  id is expected, whatever the judge said, gains are binary (1 for an expected id), and R is
  the number of expected ids (or ``expected_count`` when that is larger). The judge's verdicts
  are still answered per hit; reference answers are not credited.
- Otherwise, with a reference judge (one that ``needs_reference``) and two or more reference
  answers, each reference answer stands for one expected document (Evret's reading) and is
  credited to at most one hit: going down the ranking, a hit is counted when it matches a
  reference answer no earlier hit was credited with (its best match when that one is free, else
  the first free one it matches, in the order given). A later hit that only matches references
  already credited keeps its verdict (``relevant`` is the judge's call on the hit itself, the
  same a REFERENCE_JUDGMENT stores) but is not counted by the metrics. R is the number of
  reference answers (or ``expected_count`` when given).
- Otherwise the verdicts' flags and ratings are counted; R is ``expected_count`` when given,
  else unknown. One reference answer is read as a description of what a relevant result says,
  which many results may match (as REFERENCE_JUDGMENT rates them), so it is not one-to-one.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

from workbench.evaluation.metrics import list_metrics
from workbench.evaluation.request import Evaluated, Request
from workbench.judges import registry
from workbench.judges.base import (
    Hit,
    Judge,
    JudgeFailed,
    OptionError,
    Query,
    Setup,
    Usage,
    Verdict,
)
from workbench.judges.context import ContextJudge
from workbench.services import Services


def evaluate(svc: Services, req: Request) -> Evaluated:
    """The judge's verdicts on the first ``k`` hits and the list's metrics. Raises
    ``JudgeFailed`` (the judge could not judge), ``OptionError`` (a bad option, or no reference
    answer for a judge that needs one) and the registry's errors."""
    judge = registry.create(req.judge, Setup(req.options, svc, req.source, req.debug,
                                             req.shared))
    if judge.needs_reference and not req.query.references:
        raise OptionError("referenceAnswer", f"referenceAnswer is required for the {req.judge} "
                                             "judge")
    top = req.top
    started = time.perf_counter()
    judged = judge.judge(req.query, top)
    if len(judged.verdicts) != len(top):
        raise JudgeFailed(f"judge [{req.judge}] answered {len(judged.verdicts)} verdicts "
                          f"for {len(top)} hits")
    credited = None if req.expected_ids else one_to_one(judge, req.query, top, judged.verdicts,
                                                        judged.usage, judged.matches)
    elapsed_ms = (time.perf_counter() - started) * 1000
    usage = judged.usage
    usage.latency_ms = elapsed_ms  # wall clock: concurrent calls are not counted twice
    counted, gains, total = counting(req, top, judged.verdicts, credited)
    metrics = list_metrics(judged.verdicts, req.k, relevant=counted, gains=gains, total=total)
    done = Evaluated(req, judged.verdicts, metrics, usage, judged.trace, counted=counted,
                     credited=credited, relevant_total=total)
    threshold = getattr(judge, "threshold", None)
    if isinstance(threshold, (int, float)) and not isinstance(threshold, bool):
        done.extra["threshold"] = float(threshold)
    if req.context_sufficiency:
        sufficiency(svc, req, done)
    return done


def one_to_one(judge: Judge, query: Query, hits: Sequence[Hit], verdicts: Sequence[Verdict],
               usage: Usage, known: list[list[bool]] | None = None) -> list[int | None] | None:
    """The reference answer credited to each hit under the one-to-one rule (see the module
    docstring), or None when the rule does not apply. ``known``: the judge's own
    ``Judged.matches``. What extra judging costs is added to ``usage``."""
    if not judge.needs_reference or len(query.references) < 2 or not hits:
        return None
    matches = reference_matches(judge, query, hits, usage, known)
    free = set(range(len(query.references)))
    credited: list[int | None] = []
    for verdict, row in zip(verdicts, matches, strict=True):
        wanted = [i for i, matched in enumerate(row) if matched and i in free]
        if verdict.reference in wanted:
            wanted.insert(0, verdict.reference)  # its best match, when still free
        choice = wanted[0] if wanted else None
        if choice is not None:
            free.discard(choice)
        credited.append(choice)
    return credited


def reference_matches(judge: Judge, query: Query, hits: Sequence[Hit], usage: Usage,
                      known: list[list[bool]] | None = None) -> list[list[bool]]:
    """Which reference answers each hit matches: ``known`` (the judge's ``Judged.matches``, as
    the built-in reference judges give it) when it has a row per hit and a column per answer,
    else the judge's verdict on each reference alone (one more call of the judge per reference
    answer, its usage added)."""
    if known is not None and len(known) == len(hits) \
            and all(len(row) == len(query.references) for row in known):
        return [[bool(m) for m in row] for row in known]
    columns = []
    for reference in query.references:
        judged = judge.judge(Query(query.text, (reference,), query.fields), hits)
        usage.add(judged.usage)
        alone = judged.verdicts
        if len(alone) != len(hits):
            raise JudgeFailed(f"judge [{judge.name}] answered {len(alone)} verdicts for "
                              f"{len(hits)} hits")
        columns.append([v.relevant for v in alone])
    return [list(row) for row in zip(*columns, strict=True)]


def counting(req: Request, hits: Sequence[Hit], verdicts: Sequence[Verdict],
             credited: list[int | None] | None
             ) -> tuple[list[bool] | None, list[float] | None, int | None]:
    """The relevant flags and gains the metrics count (None: the verdicts' own) and R."""
    if req.expected_ids:
        expected = set(req.expected_ids)
        flags = [hit.id in expected for hit in hits]
        return flags, [1.0 if f else 0.0 for f in flags], max(len(expected),
                                                              req.expected_count or 0)
    if credited is not None:
        flags = [c is not None for c in credited]
        gains = [(v.rating or 0.0) if f else 0.0 for v, f in zip(verdicts, flags, strict=True)]
        return flags, gains, req.expected_count or len(req.query.references)
    return None, None, req.expected_count


def sufficiency(svc: Services, req: Request, done: Evaluated) -> None:
    """Adds the context sufficiency verdict of the judged hits and its usage to ``done``."""
    model_id = req.options.get("modelId")
    if not isinstance(model_id, str) or not model_id.strip():
        raise OptionError("modelId", "contextSufficiency needs a modelId")
    if not req.query.references:
        raise OptionError("referenceAnswer", "contextSufficiency needs a referenceAnswer")
    judge = ContextJudge(model_id, svc, req.source, req.debug)
    started = time.perf_counter()
    verdict, usage = judge.judge(req.query, req.top)
    usage.latency_ms = (time.perf_counter() - started) * 1000
    done.usage.add(usage)
    done.sufficiency = verdict
    done.trace.extend(judge.trace)
