"""Scoring result lists on the spot (``POST /_plugins/_search_relevance/_evaluate``).

- ``request``: what one evaluation asks (``Request``) and its outcome (``Evaluated``).
- ``run``: judge the hits with a judge of ``workbench.judges`` and compute the list's metrics.
- ``metrics``: the metrics of one judged list.
- ``workbench_shape``: the request and response shape of the workbench's own API.
"""
