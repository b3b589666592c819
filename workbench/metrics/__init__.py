"""Pure numpy metric functions and their name registry (no Flask, Celery or OpenSearch here).

- ``pointwise``: the metrics of docs/algorithms.md ("Pointwise metrics") and HitRate@k of one ranked
  list (``evaluate``) or many (``evaluate_many``).
- ``pairwise``: the similarity of docs/algorithms.md ("Pairwise metrics") of two lists
  (``pairwise_metrics``).
- ``rounding``: the plugin's two-decimal rounding, lenient (``round2``) or strict
  (``round_metric``).
- ``registry``: ``"NDCG@10"`` <-> (``"NDCG"``, 10) <-> function.
"""

from workbench.metrics.errors import MetricError
from workbench.metrics.pairwise import frequency_weighted, jaccard, pairwise_metrics, rbo
from workbench.metrics.pointwise import (
    average_precision,
    coverage,
    dcg,
    evaluate,
    evaluate_many,
    hit_rate,
    metric_names,
    ndcg,
    plugin_metric_names,
    precision,
    recall,
    reciprocal_rank,
    relevance_threshold,
    validate_ratings,
)
from workbench.metrics.registry import (
    METRICS,
    PAIRWISE,
    POINTWISE,
    MetricInfo,
    format_name,
    pairwise_names,
    parse,
    pointwise_names,
)
from workbench.metrics.rounding import java_round, round2, round_metric, round_metrics

__all__ = [
    "METRICS",
    "PAIRWISE",
    "POINTWISE",
    "MetricError",
    "MetricInfo",
    "average_precision",
    "coverage",
    "dcg",
    "evaluate",
    "evaluate_many",
    "format_name",
    "frequency_weighted",
    "hit_rate",
    "jaccard",
    "java_round",
    "metric_names",
    "ndcg",
    "pairwise_metrics",
    "pairwise_names",
    "parse",
    "plugin_metric_names",
    "pointwise_names",
    "precision",
    "rbo",
    "recall",
    "reciprocal_rank",
    "relevance_threshold",
    "round2",
    "round_metric",
    "round_metrics",
    "validate_ratings",
]
