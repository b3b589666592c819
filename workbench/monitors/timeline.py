"""A monitor's metrics over time, one row per run (oldest first), as Markdown or CSV: what
``GET monitors/{id}/_report`` answers (the HTML report with plots is workbench/monitors/report.py).
"""

from __future__ import annotations

import csv
import io
from typing import Any

FORMATS = ("md", "csv")
COLUMNS = ("runId", "timestamp", "status", "state", "metric", "mean", "ci95Low", "ci95High",
           "n")


def rows(monitor: dict[str, Any], runs: list[dict[str, Any]]) -> list[list[Any]]:
    """One row per run and metric (the monitor's metrics, then Judged@k), oldest run first."""
    names = list(dict.fromkeys([*monitor.get("metrics", []), f"Judged@{monitor.get('k', 10)}"]))
    out = []
    for run in runs:
        for name in names:
            summary = (run.get("metrics") or {}).get(name) or {}
            ci = summary.get("ci95") or [None, None]
            out.append([run.get("id"), run.get("timestamp"), run.get("status"),
                        run.get("state", ""), name, summary.get("mean"), ci[0], ci[1],
                        summary.get("n")])
    return out


def _cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, float):
        return f"{value:.4f}"
    return str(value)


def render(monitor: dict[str, Any], runs: list[dict[str, Any]], fmt: str) -> tuple[str, str]:
    """(text, content type) of the report in ``fmt`` (one of ``FORMATS``)."""
    table = rows(monitor, runs)
    if fmt == "csv":
        buffer = io.StringIO()
        writer = csv.writer(buffer, lineterminator="\n")
        writer.writerow(COLUMNS)
        writer.writerows([[_cell(c) for c in row] for row in table])
        return buffer.getvalue(), "text/csv; charset=utf-8"
    lines = [f"# Monitor {monitor.get('name', '')} ({monitor.get('id')})", "",
             "| " + " | ".join(COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
    lines += ["| " + " | ".join(_cell(c) for c in row) + " |" for row in table]
    return "\n".join(lines) + "\n", "text/markdown; charset=utf-8"
