"""Judge one request's hits and score the list."""

from __future__ import annotations

import time

from workbench.evaluation.metrics import list_metrics
from workbench.evaluation.request import Evaluated, Request
from workbench.judges import registry
from workbench.judges.base import JudgeFailed, OptionError, Setup
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
    elapsed_ms = (time.perf_counter() - started) * 1000
    if len(judged.verdicts) != len(top):
        raise JudgeFailed(f"judge [{req.judge}] answered {len(judged.verdicts)} verdicts "
                          f"for {len(top)} hits")
    usage = judged.usage
    usage.latency_ms = elapsed_ms  # wall clock: concurrent calls are not counted twice
    done = Evaluated(req, judged.verdicts, list_metrics(judged.verdicts, req.k), usage,
                     judged.trace)
    threshold = getattr(judge, "threshold", None)
    if isinstance(threshold, (int, float)) and not isinstance(threshold, bool):
        done.extra["threshold"] = float(threshold)
    return done
