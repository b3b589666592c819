"""The one exception of the metrics package (kept apart so every module can raise it)."""

from __future__ import annotations


class MetricError(ValueError):
    """An evaluation cannot produce metrics: a rating or a metric value is not a finite number.

    The message is the contract's (docs/algorithms.md, "Formulas"); experiment code stores it as the
    reason of a failed evaluation.
    """
