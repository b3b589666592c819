"""Metric names kept apart from their computation: ``"NDCG@10"`` <-> (``"NDCG"``, 10) <-> ``ndcg``.

A name is a base name, plus ``@k`` for metrics cut at k (everything pointwise except ``MRR``);
pairwise names carry no cutoff. Names are exactly those the plugin writes in results, plus the
workbench's ``HitRate@k`` after its seven pointwise ones, plus the opt-in condensed metrics
(``Judged@k``, ``NDCG'@k``, ``MAP'@k``, ``Precision'@k``; ``OPT_IN``), which no experiment writes
unless asked.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import partial
from types import MappingProxyType
from typing import Any

from workbench.metrics import condensed, pairwise, pointwise


@dataclass(frozen=True)
class MetricInfo:
    """One registered metric: its base name, whether the name takes ``@k``, and its function."""

    base: str
    at_k: bool
    function: Callable[..., Any]
    family: str  # "pointwise" or "pairwise"


_POINTWISE_FUNCTIONS: dict[str, Callable[..., Any]] = {
    "Coverage": pointwise.coverage,
    "Precision": pointwise.precision,
    "Recall": pointwise.recall,
    "MAP": pointwise.average_precision,
    "MRR": pointwise.reciprocal_rank,
    "DCG": pointwise.dcg,
    "NDCG": pointwise.ndcg,
    "HitRate": pointwise.hit_rate,
}

POINTWISE: Mapping[str, MetricInfo] = MappingProxyType(
    {
        base: MetricInfo(base, at_k, _POINTWISE_FUNCTIONS[base], "pointwise")
        for base, at_k in pointwise.METRIC_ORDER
    }
)
# Pointwise metrics computed only when asked for (docs/algorithms.md, "Condensed metrics and
# Judged@k"): registered so their names parse, but not in POINTWISE, whose names
# (``pointwise_names``) are the default list every experiment writes.
_OPT_IN_FUNCTIONS: dict[str, Callable[..., Any]] = {
    "Judged": condensed.judged_at_k,
    "NDCG'": condensed.condensed_ndcg,
    "MAP'": condensed.condensed_average_precision,
    "Precision'": condensed.condensed_precision,
}
OPT_IN: Mapping[str, MetricInfo] = MappingProxyType(
    {
        base: MetricInfo(base, at_k, _OPT_IN_FUNCTIONS[base], "pointwise")
        for base, at_k in condensed.CONDENSED_METRIC_ORDER
    }
)
PAIRWISE: Mapping[str, MetricInfo] = MappingProxyType(
    {
        "jaccard": MetricInfo("jaccard", False, pairwise.jaccard, "pairwise"),
        "rbo50": MetricInfo("rbo50", False, partial(pairwise.rbo, p=0.5), "pairwise"),
        "rbo90": MetricInfo("rbo90", False, partial(pairwise.rbo, p=0.9), "pairwise"),
        "frequencyWeighted": MetricInfo(
            "frequencyWeighted", False, pairwise.frequency_weighted, "pairwise"
        ),
    }
)
METRICS: Mapping[str, MetricInfo] = MappingProxyType({**POINTWISE, **OPT_IN, **PAIRWISE})

# A base name, optionally primed (a condensed metric: ``NDCG'``), then ``@k``.
_NAME = re.compile(r"([A-Za-z][A-Za-z0-9]*?'?)(?:@(0|[1-9][0-9]*))?")


def format_name(base: str, k: int | None = None) -> str:
    """The stored name of a metric: ``format_name("NDCG", 10) == "NDCG@10"``, ``"MRR"`` as is."""
    info = _info(base)
    if info.at_k != (k is not None):
        raise ValueError(f"metric [{base}] {'needs' if info.at_k else 'takes no'} a cutoff @k")
    return f"{base}@{k}" if k is not None else base


def parse(name: str) -> tuple[str, int | None]:
    """``"NDCG@10"`` -> ``("NDCG", 10)``, ``"MRR"`` -> ``("MRR", None)``; ValueError if unknown.

    A metric cut at k must carry ``@k`` (digits, no sign or leading zero); others must not.
    """
    match = _NAME.fullmatch(name)
    if match is None:
        raise ValueError(f"unknown metric [{name}]")
    base, cutoff = match.group(1), match.group(2)
    k = None if cutoff is None else int(cutoff)
    try:
        format_name(base, k)
    except ValueError:
        raise ValueError(f"unknown metric [{name}]") from None
    return base, k


def function(name: str) -> Callable[..., Any]:
    """The function computing a metric, from its base name or full name (``"NDCG@10"``)."""
    base = name if name in METRICS else parse(name)[0]
    return METRICS[base].function


def pointwise_names(k: int) -> list[str]:
    """The names experiments write, in order: ``Coverage@k, Precision@k, Recall@k, MAP@k, MRR,
    DCG@k, NDCG@k`` (docs/algorithms.md, "Formulas"), then ``HitRate@k``."""
    return [format_name(base, k if info.at_k else None) for base, info in POINTWISE.items()]


def opt_in_names(k: int) -> list[str]:
    """The opt-in pointwise names, in order: ``Judged@k, NDCG'@k, MAP'@k, Precision'@k``; not
    part of ``pointwise_names``."""
    return [format_name(base, k if info.at_k else None) for base, info in OPT_IN.items()]


def pairwise_names() -> list[str]:
    """The pairwise names (docs/algorithms.md, "Pairwise metrics") in order: ``jaccard, rbo50,
    rbo90, frequencyWeighted``."""
    return list(PAIRWISE)


def _info(base: str) -> MetricInfo:
    try:
        return METRICS[base]
    except KeyError:
        raise ValueError(f"unknown metric [{base}]") from None
