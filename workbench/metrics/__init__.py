"""Pure numpy metric functions and their name registry (no Flask, Celery or OpenSearch here).

- ``pointwise``: the metrics of docs/algorithms.md ("Pointwise metrics") and HitRate@k of one ranked
  list (``evaluate``) or many (``evaluate_many``).
- ``condensed``: the opt-in Judged@k and condensed-list NDCG'@k, MAP'@k, Precision'@k
  (docs/algorithms.md, "Condensed metrics and Judged@k") of one list (``evaluate_condensed``) or
  many (``evaluate_condensed_many``), stored apart from the plugin's list.
- ``pairwise``: the similarity of docs/algorithms.md ("Pairwise metrics") of two lists
  (``pairwise_metrics``).
- ``rounding``: the plugin's two-decimal rounding, lenient (``round2``) or strict
  (``round_metric``).
- ``registry``: ``"NDCG@10"`` <-> (``"NDCG"``, 10) <-> function.
"""

from workbench.metrics.condensed import (
    condense,
    condensed_average_precision,
    condensed_metric_names,
    condensed_ndcg,
    condensed_precision,
    evaluate_condensed,
    evaluate_condensed_many,
    judged_at_k,
)
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
    OPT_IN,
    PAIRWISE,
    POINTWISE,
    MetricInfo,
    format_name,
    opt_in_names,
    pairwise_names,
    parse,
    pointwise_names,
)
from workbench.metrics.rounding import java_round, round2, round_metric, round_metrics

__all__ = [
    "METRICS",
    "OPT_IN",
    "PAIRWISE",
    "POINTWISE",
    "MetricError",
    "MetricInfo",
    "average_precision",
    "condense",
    "condensed_average_precision",
    "condensed_metric_names",
    "condensed_ndcg",
    "condensed_precision",
    "coverage",
    "dcg",
    "evaluate",
    "evaluate_condensed",
    "evaluate_condensed_many",
    "evaluate_many",
    "format_name",
    "frequency_weighted",
    "hit_rate",
    "jaccard",
    "java_round",
    "judged_at_k",
    "metric_names",
    "ndcg",
    "opt_in_names",
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
