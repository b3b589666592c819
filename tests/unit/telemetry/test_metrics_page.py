"""docs/metrics.md lists every metric the workbench exports, with its type, labels and help,
exactly as the code declares them; and its example alert rules use only those metrics."""

from __future__ import annotations

import re
from pathlib import Path

import yaml
from prometheus_client.metrics import MetricWrapperBase

from workbench.telemetry import exporter, instruments

PAGE = Path(__file__).resolve().parents[3] / "docs" / "metrics.md"


def declared() -> list[tuple[str, str, str, str]]:
    """(name, type, labels, help) of every metric, in the order the code declares them."""
    rows = []
    for metric in vars(instruments).values():
        if isinstance(metric, MetricWrapperBase):
            name = metric._name + ("_total" if metric._type == "counter" else "")
            labels = ", ".join(f"`{label}`" for label in metric._labelnames)
            rows.append((name, metric._type, labels, metric._documentation))
    for name, help_text in (exporter.QUEUED, exporter.OLDEST):
        rows.append((name, "gauge", "", help_text))
    return rows


def documented() -> list[tuple[str, str, str, str]]:
    rows = []
    for line in PAGE.read_text().splitlines():
        if line.startswith("| `workbench_"):
            name, kind, labels, help_text = (c.strip() for c in line.strip("|").split("|", 3))
            rows.append((name.strip("`"), kind, labels, help_text))
    return rows


def test_the_page_lists_every_metric_as_declared() -> None:
    assert documented() == declared()


def test_the_alert_rules_use_exported_metrics() -> None:
    names = {name for name, *_ in declared()}
    series = names | {n.removesuffix("_seconds") + "_seconds_" + part
                      for n in names if n.endswith("_seconds")
                      for part in ("bucket", "sum", "count")}
    fence = PAGE.read_text().split("<!-- example: config prometheus-rules -->", 1)[1]
    rules = yaml.safe_load(fence.split("```yaml\n", 1)[1].split("```", 1)[0])
    exprs = [rule["expr"] for group in rules["groups"] for rule in group["rules"]]
    assert len(exprs) == 4
    for expr in exprs:
        used = set(re.findall(r"workbench_\w+", expr))
        assert used and used <= series, (expr, used - series)
