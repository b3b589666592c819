"""An experiment's report, built from its summary: Markdown tables, CSV rows (query x
configuration x metric) or a self-contained HTML page whose plots (``report_plots``) are
embedded as base64 PNG images, so the file can be mailed or attached to a CI run as is."""

from __future__ import annotations

import csv
import html as html_lib
import io
from collections.abc import Mapping
from typing import Any

from workbench.experiments import report_plots
from workbench.experiments.summary_build import Run, rows_of


def _num(value: Any, digits: int = 4) -> str:
    if value is None:
        return "–"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):  # DCG of large gains runs to 1e30: not in fixed point
        return f"{value:.{digits}g}" if abs(value) >= 1e5 else f"{value:.{digits}f}"
    return str(value)


def _p(value: Any) -> str:
    if value is None:
        return "–"
    return "<0.0001" if value < 1e-4 else f"{value:.4f}"


def _label(row: Mapping[str, Any]) -> str:
    name = row.get("name") or row.get("searchConfigurationId")
    return f"{name} [{row['variantId']}]" if row.get("variantId") else str(name)


def tables(summary: Mapping[str, Any]) -> list[tuple[str, list[str], list[list[str]]]]:
    """(title, header, rows) of every table of the report, shared by Markdown and HTML."""
    metric = summary["metric"]
    out: list[tuple[str, list[str], list[list[str]]]] = []
    configs = summary["configurations"]
    if summary["type"] == "HYBRID_OPTIMIZER":  # 82 variants: the ten best by the metric
        configs = sorted(configs, key=lambda r: -(r["metrics"][metric]["mean"] or 0.0))[:10]
        title = f"Ten best variants by {metric}"
    else:
        title = "Configurations"
    header = ["configuration", "queries run", "with hits", "judged", "judgment coverage",
              f"{metric} mean", "median", "sd", "95% CI"]
    rows = []
    for row in configs:
        stats = row["metrics"][metric]
        coverage = (row.get("judgmentCoverage") or {}).get("share")
        ci = stats.get("ci95")
        rows.append([_label(row), _num(row["queries"]["run"]), _num(row["queries"]["withHits"]),
                     _num(row["queries"].get("judged")),
                     "–" if coverage is None else f"{coverage:.1%}", _num(stats["mean"]),
                     _num(stats["median"]), _num(stats["sd"]),
                     "–" if not ci else f"[{ci[0]:.4f}, {ci[1]:.4f}]"])
    out.append((title, header, rows))
    if summary["type"] != "HYBRID_OPTIMIZER":
        names = list(configs[0]["metrics"]) if configs else []
        out.append(("Mean of every metric", ["configuration", *names],
                    [[_label(r), *(_num(r["metrics"][n]["mean"]) for n in names)]
                     for r in configs]))
    if summary.get("comparisons"):
        out.append((f"Against the baseline (alpha {summary['alpha']})",
                    ["metric", "candidate", "mean delta", "wins/losses/ties", "t-test p",
                     "Wilcoxon p", "randomization p", "Cohen's d", "significant"],
                    [[c["metric"], _name(summary, c["candidate"]), _num(c["meanDelta"]),
                      f"{c['wins']}/{c['losses']}/{c['ties']}", _p(c["tTest"]["pValue"]),
                      _p(c["wilcoxon"]["pValue"]), _p(c["randomization"]["pValue"]),
                      _num(c["effectSize"]["cohensD"], 3), _num(c["significant"])]
                     for c in summary["comparisons"]]))
    if summary.get("humanJudgments"):
        out.append(_human_table(summary, summary["humanJudgments"], metric))
    if summary.get("best"):
        out.append(("Best variant per metric (Holm-corrected paired t-tests)",
                    ["metric", "best variant", "mean", "significantly better than"],
                    [[name, str(best["variantId"]), _num(best["mean"]),
                      f"{sum(1 for o in best['others'] if o['significant'])} of "
                      f"{len(best['others'])}"]
                     for name, best in summary["best"].items()]))
    if summary.get("history"):
        out.append((f"Scheduled runs: {metric}",
                    ["run", "timestamp", "mean", "change", "p", "dropped significantly"],
                    [[str(h["scheduledRunId"]), str(h["timestamp"]),
                      _num(h["metrics"].get(metric, {}).get("mean")),
                      _num((h["change"] or {}).get("meanDelta")),
                      _p((h["change"] or {}).get("pValue")),
                      _num((h["change"] or {}).get("droppedSignificantly"))]
                     for h in summary["history"]]))
    return out


def _human_table(summary: Mapping[str, Any], section: Mapping[str, Any], metric: str
                 ) -> tuple[str, list[str], list[list[str]]]:
    """The judge-aware figures of the emphasised metric: every configuration, then every
    comparison with the baseline (docs/significance.md)."""
    queries = section["queries"]
    title = (f"{metric} corrected by human labels ({section['method']}, {section['interval']} "
             f"intervals): {queries['labelled']} of {queries['total']} queries labelled in "
             f"{section.get('name') or section['judgmentId']}")
    header = ["", "judge mean", "humans mean (labelled)", "PPI estimate",
              f"{section['confidence']:.0%} CI", "judge bias", "Pearson r",
              "worth (labelled queries)", "p", "significant"]

    def cells(figs: Mapping[str, Any]) -> list[str]:
        ppi = figs.get("ppi") or {}
        ci = ppi.get("ci")
        return [_num(figs["judge"]["mean"]), _num(figs["humans"]["mean"]),
                _num(ppi.get("estimate")), "–" if not ci else f"[{ci[0]:.4f}, {ci[1]:.4f}]",
                _num(figs["bias"]), _num(figs["agreement"]["pearson"], 3),
                _num(figs["effectiveLabelledQueries"], 1)]

    rows = [[_label(c), *cells(c["metrics"][metric]), "", ""]
            for c in section["configurations"] if metric in c["metrics"]]
    rows += [[f"{_name(summary, c['candidate'])} - {_name(summary, c['baseline'])}",
              *cells(c), _p(c["pValue"]), _num(c["significant"])]
             for c in section["comparisons"] if c["metric"] == metric]
    return title, header, rows


def _name(summary: Mapping[str, Any], config_id: str) -> str:
    for row in summary["configurations"]:
        if row["searchConfigurationId"] == config_id:
            return str(row.get("name") or config_id)
    return config_id


def _title(summary: Mapping[str, Any]) -> str:
    return f"Experiment {summary['experimentId']} ({summary['type']})"


def _facts(summary: Mapping[str, Any]) -> list[str]:
    return [f"query set `{summary['querySetId']}`, {summary['queries']['total']} queries, "
            f"k = {summary['size']}",
            f"judgment lists: {', '.join(summary['judgmentList']) or 'none'}",
            f"baseline `{_name(summary, summary['baseline'])}`, metric {summary['metric']}, "
            f"alpha {summary['alpha']}"]


def markdown(summary: Mapping[str, Any]) -> str:
    lines = [f"# {_title(summary)}", ""]
    lines += [f"* {fact}" for fact in _facts(summary)]
    for warning in summary["warnings"]:
        lines.append(f"* **{warning['level']}** ({warning['code']}): {warning['message']}")
    for title, header, rows in tables(summary):
        lines += ["", f"## {title}", "", "| " + " | ".join(header) + " |",
                  "|" + "---|" * len(header)]
        lines += ["| " + " | ".join(cell.replace("|", "\\|") for cell in row) + " |"
                  for row in rows]
    return "\n".join(lines) + "\n"


def csv_rows(experiment: Mapping[str, Any], own: Run, summary: Mapping[str, Any]) -> str:
    """One row per query x configuration (or variant) x metric, with the stored value."""
    names = {r["searchConfigurationId"]: r.get("name") for r in summary["configurations"]}
    queries, rows = rows_of(experiment, own)
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(["query", "searchConfigurationId", "configuration", "variant", "metric",
                     "value", "hits"])
    for row in rows:
        for i, query in enumerate(queries):
            for metric, values in row.values.items():
                writer.writerow([query, row.config_id, names.get(row.config_id) or "",
                                 row.variant_id or "", metric, values[i], len(row.hits[i])])
    return out.getvalue()


_STYLE = """body{font-family:system-ui,sans-serif;margin:2em;color:#222;max-width:1100px}
table{border-collapse:collapse;margin:1em 0;font-size:14px}
th,td{border:1px solid #ccc;padding:4px 8px;text-align:left}th{background:#f3f3f3}
.error{color:#a00;font-weight:bold}.warning{color:#a60}figure{margin:1.5em 0}
figure img{max-width:100%;border:1px solid #eee}"""


def html(experiment: Mapping[str, Any], own: Run, summary: Mapping[str, Any]) -> str:
    esc = html_lib.escape
    parts = ["<!DOCTYPE html>", "<html lang=\"en\"><head><meta charset=\"utf-8\">",
             f"<title>{esc(_title(summary))}</title><style>{_STYLE}</style></head><body>",
             f"<h1>{esc(_title(summary))}</h1><ul>"]
    parts += [f"<li>{esc(fact)}</li>" for fact in _facts(summary)]
    parts += [f"<li class=\"{esc(w['level'])}\">{esc(w['level'])} ({esc(w['code'])}): "
              f"{esc(w['message'])}</li>" for w in summary["warnings"]]
    parts.append("</ul>")
    for title, header, rows in tables(summary):
        parts.append(f"<h2>{esc(title)}</h2><table><tr>"
                     + "".join(f"<th>{esc(h)}</th>" for h in header) + "</tr>")
        parts += ["<tr>" + "".join(f"<td>{esc(c)}</td>" for c in row) + "</tr>" for row in rows]
        parts.append("</table>")
    parts.append("<h2>Plots</h2>")
    for caption, png in report_plots.plots(experiment, own, summary):
        parts.append(f"<figure><img class=\"plot\" alt=\"{esc(caption)}\" "
                     f"src=\"data:image/png;base64,{png}\"><figcaption>{esc(caption)}"
                     "</figcaption></figure>")
    parts.append("</body></html>")
    return "\n".join(parts) + "\n"
