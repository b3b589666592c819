"""The plots of an HTML report, drawn with matplotlib (Agg backend: no display needed) and
returned as base64 PNG for embedding:

* per-query delta bars of each candidate against the baseline (the report's metric);
* the distribution of the metric over queries per configuration (box plot; for the hybrid
  optimizer the ten best variants);
* the hybrid grid as a heat map (normalisation x combination against the first weight), with
  the RRF variants as an extra row by rank constant;
* the metric of a scheduled experiment over its runs, runs that dropped significantly marked.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import matplotlib.pyplot as plt
import numpy as np

from workbench.experiments.summary_build import Run, rows_of
from workbench.plots import png as _png


def _name(summary: Mapping[str, Any], config_id: str) -> str:
    for row in summary["configurations"]:
        if row["searchConfigurationId"] == config_id:
            return str(row.get("name") or config_id)
    return config_id


def delta_bars(summary: Mapping[str, Any]) -> list[tuple[str, str]]:
    out = []
    metric = summary["metric"]
    for comparison in summary.get("comparisons") or []:
        if comparison["metric"] != metric:
            continue
        deltas = np.array(sorted(p["delta"] for p in comparison["perQuery"]))
        fig, ax = plt.subplots(figsize=(9, 3.2))
        colors = np.where(deltas > 0, "#2a7d2a", np.where(deltas < 0, "#b03030", "#999999"))
        ax.bar(np.arange(deltas.size), deltas, color=colors, width=1.0)
        ax.axhline(0, color="#333", linewidth=0.8)
        ax.set_xlabel("queries (sorted by delta)")
        ax.set_ylabel(f"Δ {metric}")
        p = comparison["tTest"]["pValue"]
        ax.set_title(f"{_name(summary, comparison['candidate'])} − "
                     f"{_name(summary, comparison['baseline'])}: "
                     f"{comparison['wins']} wins, {comparison['losses']} losses, "
                     f"{comparison['ties']} ties; mean Δ {comparison['meanDelta']:+.4f}"
                     + ("" if p is None else f", p = {p:.3g}"), fontsize=10)
        out.append((f"Per-query {metric} delta: {_name(summary, comparison['candidate'])} "
                    "against the baseline", _png(fig)))
    return out


def distributions(experiment: Mapping[str, Any], own: Run,
                  summary: Mapping[str, Any]) -> list[tuple[str, str]]:
    metric = summary["metric"]
    _, rows = rows_of(experiment, own)
    if not rows:
        return []
    if experiment.get("type") == "HYBRID_OPTIMIZER":
        rows = sorted(rows, key=lambda r: -float(np.mean(r.values[metric] or [0.0])))[:10]
        labels = [str(r.variant_id) for r in rows]
    elif experiment.get("type") == "PAIRWISE_COMPARISON":
        rows = rows[:1]
        labels = [" vs ".join(_name(summary, c) for c in experiment["searchConfigurationList"])]
    else:
        labels = [_name(summary, r.config_id) for r in rows]
    fig, ax = plt.subplots(figsize=(9, 0.5 * len(rows) + 1.8))
    ax.boxplot([r.values[metric] for r in rows], orientation="horizontal", showmeans=True)
    ax.set_yticks(np.arange(1, len(rows) + 1), labels, fontsize=8)
    ax.invert_yaxis()
    ax.set_xlabel(f"{metric} per query (triangle: mean)")
    return [(f"Distribution of {metric} over queries", _png(fig))]


def heat_map(summary: Mapping[str, Any]) -> list[tuple[str, str]]:
    metric = summary["metric"]
    weighted: dict[str, dict[float, float]] = {}
    rrf: dict[int, float] = {}
    for row in summary["configurations"]:
        params = row.get("parameters") or {}
        mean = row["metrics"][metric]["mean"]
        if params.get("combination") == "rrf":
            rrf[int(params.get("rank_constant", 60))] = mean
        elif params.get("weights"):
            label = f"{params.get('normalization')} / {params.get('combination')}"
            weighted.setdefault(label, {})[float(params["weights"][0])] = mean
    if not weighted:
        return []
    weights = sorted({w for cells in weighted.values() for w in cells})
    labels = list(weighted)
    grid = np.array([[weighted[label].get(w, np.nan) for w in weights] for label in labels])
    fig, ax = plt.subplots(figsize=(9, 0.45 * len(labels) + 1.8))
    image = ax.imshow(grid, aspect="auto", cmap="viridis")
    ax.set_xticks(np.arange(len(weights)), [f"{w:g}" for w in weights])
    ax.set_yticks(np.arange(len(labels)), labels, fontsize=8)
    ax.set_xlabel("weight of the first sub-query")
    for (i, j), value in np.ndenumerate(grid):
        if np.isfinite(value):
            ax.text(j, i, f"{value:.3f}", ha="center", va="center", fontsize=7,
                    color="white" if value < np.nanmean(grid) else "black")
    fig.colorbar(image, ax=ax, label=f"mean {metric}")
    title = f"Hybrid variants: mean {metric}"
    if rrf:
        title += "; RRF by rank constant: " + ", ".join(f"{k}: {v:.3f}"
                                                        for k, v in sorted(rrf.items()))
    ax.set_title(title, fontsize=9)
    return [(f"Hybrid grid: mean {metric} per normalisation, combination and weight",
             _png(fig))]


def over_time(summary: Mapping[str, Any]) -> list[tuple[str, str]]:
    history = summary.get("history") or []
    if not history:
        return []
    metric = summary["metric"]
    means = [h["metrics"].get(metric, {}).get("mean") for h in history]
    x = np.arange(len(history))
    fig, ax = plt.subplots(figsize=(9, 3.2))
    ax.plot(x, [np.nan if m is None else m for m in means], marker="o")
    dropped = [i for i, h in enumerate(history) if (h.get("change") or {}).get(
        "droppedSignificantly")]
    if dropped:
        ax.scatter(dropped, [means[i] for i in dropped], color="#b03030", s=90, zorder=3,
                   label="dropped significantly")
        ax.legend()
    ax.set_xticks(x, [str(h.get("timestamp") or "")[:16] for h in history], rotation=30,
                  ha="right", fontsize=8)
    ax.set_ylabel(f"mean {metric}")
    ax.set_title(f"{metric} over scheduled runs", fontsize=10)
    return [(f"Scheduled runs: mean {metric} over time", _png(fig))]


def plots(experiment: Mapping[str, Any], own: Run,
          summary: Mapping[str, Any]) -> list[tuple[str, str]]:
    """(caption, base64 PNG) of every plot that applies to this experiment."""
    return [*delta_bars(summary), *distributions(experiment, own, summary), *heat_map(summary),
            *over_time(summary)]
