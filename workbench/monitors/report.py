"""A monitor's report, built from its stored runs: the metric over time with each run's 95 %
interval and its state marked, as a self-contained HTML page (the plot embedded as a base64 PNG,
``workbench.plots``), as Markdown, or as CSV rows (run x metric). The route
``GET monitors/{id}/_report?format=html|md|csv`` and ``workbench monitor report`` serve them."""

from __future__ import annotations

import csv
import html as html_lib
import io
from collections.abc import Mapping, Sequence
from typing import Any

import matplotlib.pyplot as plt
import numpy as np

from workbench.plots import png

# How each state is drawn: OK runs plain, the others marked (the colour-blind-safe Okabe-Ito
# orange, vermilion and blue).
STATE_STYLE = {"OK": ("o", "#444444"), "INCONCLUSIVE": ("s", "#e69f00"),
               "ALERT": ("v", "#d55e00"), "JUDGE_DRIFT": ("D", "#0072b2")}
CSV_HEADER = ["runId", "timestamp", "status", "state", "metric", "mean", "ci95Low", "ci95High",
              "n"]


def _chronological(runs: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """Oldest first (the runs route answers newest first)."""
    return sorted(runs, key=lambda r: (str(r.get("timestamp") or ""), str(r.get("id") or "")))


def _metrics(monitor: Mapping[str, Any], runs: Sequence[Mapping[str, Any]]) -> list[str]:
    """The monitor's metrics, then any other metric its runs carry (Judged@k...), in order."""
    names = [str(m) for m in monitor.get("metrics") or []]
    for run in runs:
        for name in run.get("metrics") or {}:
            if name not in names:
                names.append(name)
    return names


def _num(value: Any, digits: int = 4) -> str:
    if value is None:
        return "–"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return str(value)


def _interval(stats: Mapping[str, Any] | None) -> str:
    if not stats or stats.get("mean") is None:
        return "–"
    ci = stats.get("ci95")
    if not ci or ci[0] is None:
        return _num(stats["mean"])
    return f"{stats['mean']:.4f} [{ci[0]:.4f}, {ci[1]:.4f}]"


def _cost(run: Mapping[str, Any]) -> str:
    usage = run.get("usage") or {}
    cost, tokens = usage.get("cost"), usage.get("totalTokens")
    if cost is not None:
        return f"{cost:.4f}"
    return f"{tokens} tokens" if tokens else "–"


def _reason(run: Mapping[str, Any]) -> str:
    if run.get("status") == "ERROR":
        return f"ERROR: {run.get('error') or 'no reason recorded'}"
    gold = run.get("gold") or {}
    if gold.get("drift"):
        return (f"judge drift: {gold.get('changed')} of {gold.get('pairs')} gold pairs rated "
                "differently")
    return "; ".join(f"{d.get('metric')}: {d.get('reason')}" for d in run.get("decisions") or []
                     if d.get("state") != "OK" and d.get("reason"))


def table(monitor: Mapping[str, Any], runs: Sequence[Mapping[str, Any]]
          ) -> tuple[list[str], list[list[str]]]:
    """(header, rows) of the runs, oldest first, shared by Markdown and HTML."""
    metrics = [m for m in _metrics(monitor, runs) if not m.startswith("Judged@")]
    judged = next((m for m in _metrics(monitor, runs) if m.startswith("Judged@")), None)
    header = ["time", "state", *metrics, *([judged] if judged else []), "queries", "new pairs",
              "cost", "why"]
    rows = []
    for run in _chronological(runs):
        stats = run.get("metrics") or {}
        n = next((s.get("n") for s in stats.values() if s.get("n") is not None), None)
        rows.append([str(run.get("timestamp") or ""), str(run.get("state") or run.get("status")),
                     *(_interval(stats.get(m)) for m in metrics),
                     *([_num((stats.get(judged) or {}).get("mean"))] if judged else []),
                     _num(n), _num((run.get("rated") or {}).get("new")), _cost(run),
                     _reason(run)])
    return header, rows


def _title(monitor: Mapping[str, Any]) -> str:
    return f"Monitor {monitor.get('name') or monitor.get('id')}"


def _facts(monitor: Mapping[str, Any], runs: Sequence[Mapping[str, Any]]) -> list[str]:
    queries = monitor.get("queries") or {}
    source = []
    if queries.get("querySetId"):
        source.append(f"query set {queries['querySetId']}")
    if queries.get("ubi"):
        ubi = queries["ubi"]
        source.append(f"UBI sample ({ubi.get('sampling', 'random')}, {ubi.get('size')} "
                      f"queries over {ubi.get('window', '7d')})")
    judge = monitor.get("judge") or {}
    states: dict[str, int] = {}
    for run in runs:
        state = str(run.get("state") or run.get("status"))
        states[state] = states.get(state, 0) + 1
    return [f"id {monitor.get('id')}, search configuration "
            f"{monitor.get('searchConfigurationId')}, k = {monitor.get('k', 10)}",
            "queries: " + (" and ".join(source) or "none"),
            "judge: " + str(judge.get("modelId") or judge.get("judge") or "none"),
            "schedule: " + str((monitor.get("schedule") or {}).get("cron") or "on demand"),
            f"{len(runs)} runs: " + (", ".join(f"{n} {s}" for s, n in sorted(states.items()))
                                     or "none yet")]


def plot(monitor: Mapping[str, Any], runs: Sequence[Mapping[str, Any]]
         ) -> list[tuple[str, str]]:
    """(caption, base64 PNG) per metric of the monitor: its mean per run with the 95 %
    interval as an error bar, each run's marker by its state."""
    ordered = [r for r in _chronological(runs) if r.get("metrics")]
    out = []
    for metric in [m for m in _metrics(monitor, ordered) if not m.startswith("Judged@")]:
        points = [(i, r) for i, r in enumerate(ordered)
                  if (r["metrics"].get(metric) or {}).get("mean") is not None]
        if not points:
            continue
        fig, ax = plt.subplots(figsize=(9, 3.4))
        x = np.array([i for i, _ in points])
        means = np.array([r["metrics"][metric]["mean"] for _, r in points], dtype=float)
        lows, highs = [], []
        for (_, r), mean in zip(points, means, strict=True):
            ci = r["metrics"][metric].get("ci95") or [None, None]
            lows.append(mean - (ci[0] if ci[0] is not None else mean))
            highs.append((ci[1] if ci[1] is not None else mean) - mean)
        ax.errorbar(x, means, yerr=[lows, highs], color="#999999", linewidth=1, capsize=3,
                    zorder=1)
        for state, (marker, colour) in STATE_STYLE.items():
            chosen = [k for k, (_, r) in enumerate(points) if r.get("state") == state]
            if chosen:
                ax.scatter(x[chosen], means[chosen], marker=marker, color=colour, s=45,
                           zorder=2, label=state)
        ax.legend(fontsize=8, loc="best")
        ax.set_xticks(x, [str(r.get("timestamp") or "")[:16] for _, r in points],
                      rotation=30, ha="right", fontsize=8)
        ax.set_ylabel(f"mean {metric} (95 % interval)")
        ax.set_title(f"{_title(monitor)}: {metric} per run", fontsize=10)
        out.append((f"{metric} over the monitor's runs, with each run's 95 % interval and "
                    "state", png(fig)))
    return out


def markdown(monitor: Mapping[str, Any], runs: Sequence[Mapping[str, Any]]) -> str:
    header, rows = table(monitor, runs)
    lines = [f"# {_title(monitor)}", "", *(f"* {fact}" for fact in _facts(monitor, runs)), "",
             "## Runs", "", "| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(cell.replace("|", "\\|") for cell in row) + " |"
              for row in rows]
    return "\n".join(lines) + "\n"


def csv_rows(monitor: Mapping[str, Any], runs: Sequence[Mapping[str, Any]]) -> str:
    """One row per run x metric, oldest run first: its mean, interval and query count."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(CSV_HEADER)
    for run in _chronological(runs):
        for metric, stats in (run.get("metrics") or {}).items():
            ci = stats.get("ci95") or [None, None]
            writer.writerow([run.get("id"), run.get("timestamp"), run.get("status"),
                             run.get("state") or "", metric,
                             *("" if v is None else v for v in (stats.get("mean"), ci[0], ci[1],
                                                                 stats.get("n")))])
    return out.getvalue()


_STYLE = """body{font-family:system-ui,sans-serif;margin:2em;color:#222;max-width:1100px}
table{border-collapse:collapse;margin:1em 0;font-size:14px}
th,td{border:1px solid #ccc;padding:4px 8px;text-align:left}th{background:#f3f3f3}
.ALERT{color:#d55e00;font-weight:bold}.JUDGE_DRIFT{color:#0072b2;font-weight:bold}
.INCONCLUSIVE{color:#a07000}.ERROR{color:#a00}figure{margin:1.5em 0}
figure img{max-width:100%;border:1px solid #eee}"""


def html(monitor: Mapping[str, Any], runs: Sequence[Mapping[str, Any]]) -> str:
    esc = html_lib.escape
    title = esc(_title(monitor))
    parts = ["<!DOCTYPE html>", "<html lang=\"en\"><head><meta charset=\"utf-8\">",
             f"<title>{title}</title><style>{_STYLE}</style></head><body>",
             f"<h1>{title}</h1><ul>", *(f"<li>{esc(f)}</li>" for f in _facts(monitor, runs)),
             "</ul>"]
    for caption, image in plot(monitor, runs):
        parts.append(f"<figure><img class=\"plot\" alt=\"{esc(caption)}\" "
                     f"src=\"data:image/png;base64,{image}\"><figcaption>{esc(caption)}"
                     "</figcaption></figure>")
    header, rows = table(monitor, runs)
    parts.append("<h2>Runs</h2><table><tr>" + "".join(f"<th>{esc(h)}</th>" for h in header)
                 + "</tr>")
    parts += ["<tr>" + "".join(f"<td class=\"{esc(c)}\">{esc(c)}</td>" if i == 1
                               else f"<td>{esc(c)}</td>" for i, c in enumerate(row)) + "</tr>"
              for row in rows]
    parts.append("</table></body></html>")
    return "\n".join(parts) + "\n"
