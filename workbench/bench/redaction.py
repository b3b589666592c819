"""Log redaction: the cost of ``workbench.telemetry.logs.redact`` as its input grows from 1 KB
to 1 MB.

A quadratic pattern once let one request value hang an API worker (50,000 characters cost 4.5 s).
Every pattern must now be linear: for each worst-case shape the ratio of the cost at one size to
the cost at the size ten times smaller is reported; linear growth gives about 10, quadratic 100.
The shapes are the ones that used to backtrack or could: one long alphanumeric run, repeated
``authorization: basic `` prefixes, ``api_key=`` runs, ``scheme://`` runs and a URL whose
``user:`` is followed by a long run with no ``@``.

``redact`` is measured alone (no length cap), so the figures are the patterns' own. The log filter
itself first cuts a message to ``MAX_MESSAGE_CHARS``; its cost on a 1 MB message against one of
exactly that length is reported too (bounded: a ratio near 1). Medians of five runs, each of
enough repetitions to last about 20 ms.
"""

from __future__ import annotations

import logging
import statistics
import time
from collections.abc import Callable
from itertools import pairwise

from workbench.bench.common import Bench, Result
from workbench.telemetry.logs import MAX_MESSAGE_CHARS, RedactingFilter, redact

NAME = "redaction"
SIZES = (1_000, 10_000, 100_000, 1_000_000)
LINEAR = 20.0  # per 10x size step: linear is ~10, quadratic ~100
RUNS = 5
MIN_RUN_SECONDS = 0.02

SHAPES: dict[str, Callable[[int], str]] = {
    "alphanumeric run": lambda n: "a" * n,
    "authorization: basic prefixes": lambda n: _repeat("authorization: basic ", n),
    "api_key= runs": lambda n: _repeat("api_key=", n),
    "scheme:// runs": lambda n: _repeat("http://", n),
    "URL user: with no @": lambda n: "http://user:" + "p" * (n - 12),
    "URLs with credentials": lambda n: _repeat("https://u:p@h/ ", n),
}


def _repeat(unit: str, size: int) -> str:
    return (unit * (size // len(unit) + 1))[:size]


def run(bench: Bench) -> list[Result]:
    sizes = SIZES[:-1] if bench.quick else SIZES
    results = []
    for shape, make in SHAPES.items():
        costs = {size: cost(redact, make(size)) for size in sizes}
        figures = {_label(size): round(seconds * 1e3, 4) for size, seconds in costs.items()}
        print(f"   {shape}: " + ", ".join(f"{k} {v} ms" for k, v in figures.items()), flush=True)
        for small, large in pairwise(sizes):
            results.append(Result(NAME, f"{shape}, {_label(large)} vs {_label(small)}",
                                  costs[large], costs[small], unit="s", target=LINEAR,
                                  details={"ms per size": figures}))
    log_filter = RedactingFilter()

    def filtered(message: str) -> None:
        log_filter.filter(logging.LogRecord("bench", logging.WARNING, __file__, 1, "%s",
                                            (message,), None))

    largest = sizes[-1]
    results.append(Result(
        NAME, f"log filter, {_label(largest)} message vs one of MAX_MESSAGE_CHARS",
        cost(filtered, "a" * largest), cost(filtered, "a" * MAX_MESSAGE_CHARS), unit="s",
        target=2.0, details={"MAX_MESSAGE_CHARS": MAX_MESSAGE_CHARS,
                             "why": "a message is cut before it is redacted"}))
    return results


def cost(fn: Callable[[str], object], text: str) -> float:
    """Median seconds per call over ``RUNS`` runs, each repeated to last ``MIN_RUN_SECONDS``."""
    started = time.perf_counter()
    fn(text)
    once = time.perf_counter() - started
    repeat = max(1, int(MIN_RUN_SECONDS / max(once, 1e-7)))
    samples = []
    for _ in range(RUNS):
        started = time.perf_counter()
        for _ in range(repeat):
            fn(text)
        samples.append((time.perf_counter() - started) / repeat)
    return statistics.median(samples)


def _label(size: int) -> str:
    return f"{size // 1_000_000} MB" if size >= 1_000_000 else f"{size // 1_000} KB"
