"""An A/B test's results as a self-contained HTML page: the verdict, the plugin UI's reading
beside it, the preference over time (a matplotlib plot embedded as base64 PNG, as the
experiment reports do) and the per-query table."""

from __future__ import annotations

import html
from collections.abc import Mapping
from typing import Any

import matplotlib.pyplot as plt

from workbench.plots import png

TOP_QUERIES = 50


def _num(value: Any) -> str:
    if value is None:
        return "–"
    if isinstance(value, float):
        return f"{value:.4f}"
    return html.escape(str(value))


def plot_over_time(buckets: list[Mapping[str, Any]]) -> str | None:
    """Cumulative Δ_AB and decided impressions per bucket, as a base64 PNG (None: no data)."""
    if not buckets:
        return None
    starts = [str(b["start"]) for b in buckets]
    wins_a = wins_b = ties = 0
    deltas: list[float] = []
    for b in buckets:
        wins_a, wins_b, ties = wins_a + b["wins_a"], wins_b + b["wins_b"], ties + b["ties"]
        decided = wins_a + wins_b + ties
        deltas.append((wins_a + ties / 2) / decided - 0.5 if decided else 0.0)
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(8, 5), sharex=True)
    top.plot(range(len(starts)), deltas, marker="o")
    top.axhline(0, color="grey", linewidth=0.8)
    top.set_ylabel("cumulative Δ_AB (>0: A preferred)")
    bottom.bar(range(len(starts)), [b["wins_a"] for b in buckets], label="A wins")
    bottom.bar(range(len(starts)), [b["wins_b"] for b in buckets],
               bottom=[b["wins_a"] for b in buckets], label="B wins")
    bottom.set_ylabel("impressions won")
    bottom.legend(loc="upper left")
    step = max(1, len(starts) // 8)
    bottom.set_xticks(range(0, len(starts), step), starts[::step], rotation=30, ha="right",
                      fontsize=7)
    return png(fig)


def page(result: Mapping[str, Any]) -> str:
    """The HTML report of one ``_results`` answer."""
    version = result["version"]
    interval = result["confidence_interval"]
    ui = result["plugin_ui_clicks"]
    facts = [
        ("Version", version["version"]),
        ("Configuration A", version["search_configuration_a"]),
        ("Configuration B", version["search_configuration_b"]),
        ("Impressions", result["impressions"]),
        ("Impressions with a click", result["impressions_with_clicks"]),
        ("Wins A / wins B / ties", f"{result['wins_a']} / {result['wins_b']} / {result['ties']}"),
        ("Δ_AB (> 0: A preferred)", _num(result["delta_ab"])),
        (f"{interval['level']:.0%} interval of Δ_AB (queries resampled)",
         f"{_num(interval['lower'])} to {_num(interval['upper'])}"),
        ("p (exact sign test)", _num(result["p_value"])),
        ("Winner", result["winner"] or "none (not significant)"),
        ("Total clicks, z-test (the plugin UI's computation on these clicks)",
         f"A {result['total_clicks']['clicks_a']} / B {result['total_clicks']['clicks_b']} "
         f"clicks, p = {_num(result['total_clicks']['p_value'])}"),
        ("Plugin UI's own click events (total clicks, z-test)",
         f"A {ui['clicks_a']} / B {ui['clicks_b']} clicks, p = {_num(ui['p_value'])}"),
    ]
    rows = "".join(f"<tr><th>{html.escape(k)}</th><td>{_num(v)}</td></tr>" for k, v in facts)
    warning = (f"<p class='warning'>{html.escape(result['warning'])}</p>"
               if result.get("warning") else "")
    image = plot_over_time(result["timeline"]["buckets"])
    plot = (f"<h2>Over time (per {result['timeline']['interval']})</h2>"
            f"<img alt='preference over time' src='data:image/png;base64,{image}'>"
            if image else "")
    queries = "".join(
        f"<tr><td>{html.escape(q['query'])}</td><td>{q['impressions']}</td>"
        f"<td>{q['wins_a']}</td><td>{q['wins_b']}</td><td>{q['ties']}</td>"
        f"<td>{_num(q['delta_ab'])}</td></tr>" for q in result["per_query"][:TOP_QUERIES])
    title = html.escape(f"A/B test {result['test_id']}")
    return (
        "<!DOCTYPE html><html><head><meta charset='utf-8'>"
        f"<title>{title}</title><style>body{{font-family:sans-serif;margin:2em}}"
        "table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:4px 8px;"
        "text-align:left}.warning{color:#a60}</style></head><body>"
        f"<h1>{title}</h1>{warning}<table>{rows}</table>{plot}"
        f"<h2>Queries (top {TOP_QUERIES} by impressions)</h2><table><tr><th>query</th>"
        "<th>impressions</th><th>A wins</th><th>B wins</th><th>ties</th><th>Δ_AB</th></tr>"
        f"{queries}</table></body></html>")
