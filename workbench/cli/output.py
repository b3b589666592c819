"""What the command line shows: progress bars while jobs run, summaries as tables.

Progress goes to stderr and tables to stdout, so ``workbench ... > summary.txt`` or
``ID=$(workbench query-set create ...)`` keep only the result.
"""

from __future__ import annotations

import os
import sys
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    SpinnerColumn,
    TextColumn,
    TimeElapsedColumn,
)
from rich.table import Table

from workbench.cli.client import WorkbenchClient
from workbench.metrics import registry

# Piped (a CI log), rich would wrap at 80 columns; COLUMNS still wins when set.
_PIPED = not sys.stdout.isatty() and not os.environ.get("COLUMNS")
out = Console(highlight=False, soft_wrap=False, width=120 if _PIPED else None)
err = Console(stderr=True, highlight=False)


def wait_with_progress(client: WorkbenchClient, collection: str, entity_id: str, label: str,
                       timeout: float) -> dict[str, Any]:
    """Poll a judgment or experiment to its end with a progress bar; the final document."""
    with Progress(SpinnerColumn(), TextColumn("{task.description}"), BarColumn(),
                  MofNCompleteColumn(), TimeElapsedColumn(), console=err) as bar:
        task = bar.add_task(label, total=None)

        def show(done: int, total: int) -> None:
            bar.update(task, completed=done, total=total)

        doc = client.wait(collection, entity_id, show, timeout=timeout)
        if doc.get("status") == "COMPLETED":
            total = bar.tasks[0].total or 1  # a job faster than the first poll shows no count
            bar.update(task, completed=total, total=total)
    return doc


def summary_tables(summary: dict[str, Any], emphasis: str | None = None,
                   top: int = 10) -> list[Table]:
    """The ``_summary`` answer as tables: the figures of each configuration, then the
    comparisons with the baseline (pointwise) or the best variants (hybrid).

    Configurations are columns (metrics read down); a hybrid run's variants are rows instead,
    its ``top`` variants by the ``emphasis`` metric, best first.
    """
    configs = summary.get("configurations") or []
    best = summary.get("best") or {}
    emphasis = emphasis or next(iter(best), None)
    hybrid = any(c.get("variantId") for c in configs)
    title = (f"experiment {summary.get('experimentId')}\n{summary.get('type')} · "
             f"{summary.get('status')} · {(summary.get('queries') or {}).get('total')} queries"
             f" · k={summary.get('size')}")
    tables = [_variants_table(title, configs, emphasis, top) if hybrid
              else _configurations_table(title, configs)]
    if best:
        tables.append(_best_table(best))
    comparisons = summary.get("comparisons") or []
    if comparisons and not hybrid:  # hybrid: the best-variant table says what matters
        tables.append(_comparisons_table(comparisons, configs))
    humans = summary.get("humanJudgments")
    if humans:
        tables.append(_humans_table(humans, str(emphasis or summary.get("metric"))))
    return tables


def _humans_table(section: dict[str, Any], metric: str) -> Table:
    """The judge-aware figures of one metric: per configuration, then per comparison."""
    queries = section.get("queries") or {}
    level = f"{float(section.get('confidence') or 0.95):.0%}"
    table = Table(title=f"{metric} corrected by human labels ({section.get('method')}): "
                        f"{queries.get('labelled')} of {queries.get('total')} queries labelled "
                        f"in {section.get('name') or section.get('judgmentId')}",
                  title_justify="left")
    for column in ("", "judge", "humans (labelled)", f"PPI estimate [{level} CI]", "judge bias",
                   "r", "worth n", "p", "significant"):
        table.add_column(column, justify="left" if column == "" else "right")
    names = {c["searchConfigurationId"]: _config_label(c)
             for c in section.get("configurations") or []}
    for config in section.get("configurations") or []:
        figs = (config.get("metrics") or {}).get(metric)
        if figs:
            table.add_row(names[config["searchConfigurationId"]], *_human_cells(figs), "", "")
    comparisons = [c for c in section.get("comparisons") or [] if c.get("metric") == metric]
    for i, c in enumerate(comparisons):
        table.add_row(f"{names.get(c['candidate'], c['candidate'])} - "
                      f"{names.get(c['baseline'], c['baseline'])}",
                      *_human_cells(c, signed=True), _p(c),
                      "yes" if c.get("significant") else "no",
                      end_section=i == len(comparisons) - 1)
    return table


def _human_cells(figs: dict[str, Any], signed: bool = False) -> list[str]:
    ppi = figs.get("ppi") or {}
    interval = ppi.get("ci")
    worth = figs.get("effectiveLabelledQueries")
    r = (figs.get("agreement") or {}).get("pearson")
    return [_number((figs.get("judge") or {}).get("mean"), signed),
            _number((figs.get("humans") or {}).get("mean"), signed),
            (f"{_number(ppi.get('estimate'), signed)} [{_number(interval[0], signed)}, "
             f"{_number(interval[1], signed)}]") if interval else "",
            _number(figs.get("bias"), signed=True),
            "" if r is None else f"{r:.2f}",
            "" if worth is None else f"{worth:.0f}"]


def _configurations_table(title: str, configs: list[dict[str, Any]]) -> Table:
    table = Table(title=title, title_justify="left")
    table.add_column("mean ±95% CI")
    for config in configs:
        table.add_column(_config_label(config), justify="right")
    table.add_row("queries run/hits/judged", *(_counts(c) for c in configs))
    table.add_row("judged share of top-k", *(_coverage(c) for c in configs), end_section=True)
    for name in _metric_names(configs):
        table.add_row(name, *(_mean_ci((c.get("metrics") or {}).get(name) or {})
                              for c in configs))
    return table


def _variants_table(title: str, configs: list[dict[str, Any]], emphasis: str | None,
                    top: int) -> Table:
    """One row per variant; the condensed metrics (``Judged@k``, ``NDCG'@k``...) only when one
    of them is the ``emphasis``: a row of fourteen columns does not fit a terminal."""
    metrics = [name for name in _metric_names(configs)
               if name == emphasis or registry.parse(name)[0] not in registry.OPT_IN]
    if emphasis in metrics:
        configs = sorted(configs, key=lambda c: -_mean(c, str(emphasis)))
    table = Table(title=f"{title} · top {min(top, len(configs))} of {len(configs)} variants"
                        + (f" by {emphasis}" if emphasis in metrics else ""),
                  title_justify="left")
    table.add_column("variant")
    table.add_column("judged", justify="right")
    for name in metrics:
        table.add_column(name, justify="right")
    for config in configs[:top]:
        table.add_row(_config_label(config), _coverage(config),
                      *(_number(((config.get("metrics") or {}).get(name) or {}).get("mean"))
                        for name in metrics))
    return table


def _comparisons_table(comparisons: list[dict[str, Any]], configs: list[dict[str, Any]]
                       ) -> Table:
    names = {c["searchConfigurationId"]: _config_label(c) for c in configs}
    candidates = {c["candidate"] for c in comparisons}
    baseline = names.get(comparisons[0]["baseline"], comparisons[0]["baseline"])
    title = (f"{names.get(next(iter(candidates)))} vs {baseline} (paired over queries)"
             if len(candidates) == 1 else f"each configuration vs {baseline} (paired)")
    table = Table(title=title, title_justify="left")
    columns = ["metric", *(["candidate"] if len(candidates) > 1 else []), "delta", "W/L/T",
               "p t-test", "p Wilcoxon", "p random.", "Cohen's d", "significant"]
    for column in columns:
        table.add_column(column, justify="left" if column in ("metric", "candidate") else "right")
    for c in comparisons:
        table.add_row(c["metric"], *([names.get(c["candidate"], c["candidate"])]
                                     if len(candidates) > 1 else []),
                      _number(c["meanDelta"], signed=True),
                      f"{c['wins']}/{c['losses']}/{c['ties']}",
                      _p(c.get("tTest")), _p(c.get("wilcoxon")), _p(c.get("randomization")),
                      _d(c.get("effectSize")), "yes" if c.get("significant") else "no")
    return table


def _counts(config: dict[str, Any]) -> str:
    queries = config.get("queries") or {}
    return "/".join(str(queries.get(key, "-")) for key in ("run", "withHits", "judged"))


def _coverage(config: dict[str, Any]) -> str:
    share = (config.get("judgmentCoverage") or {}).get("share")
    return "-" if share is None else f"{share:.0%}"


def _number(value: Any, signed: bool = False) -> str:
    """Three decimals, or four significant digits for big values (DCG on a x100 scale)."""
    if value is None:
        return ""
    sign = "+" if signed else ""
    return f"{value:{sign}.4g}" if abs(value) >= 1000 else f"{value:{sign}.3f}"


def _best_table(best: dict[str, Any]) -> Table:
    table = Table(title="best variant per metric (Holm-corrected against the others)",
                  title_justify="left")
    for column in ("metric", "best variant", "mean", "others", "significantly worse"):
        table.add_column(column, justify="right" if column in ("mean", "others",
                                                               "significantly worse") else "left")
    for metric, entry in best.items():
        others = entry.get("others") or []
        params = entry.get("parameters") or {}
        table.add_row(metric, escape(_params_label(params) or str(entry.get("variantId"))),
                      _number(entry.get("mean")),
                      str(len(others)), str(sum(1 for o in others if o.get("significant"))))
    return table


def print_summary(summary: dict[str, Any], emphasis: str | None = None) -> None:
    for table in summary_tables(summary, emphasis):
        out.print(table)
    for warning in summary.get("warnings") or []:
        style = "bold red" if warning.get("level") == "error" else "yellow"
        out.print(f"[{style}]{warning.get('level', 'warning')}[/{style}]: "
                  f"{escape(str(warning.get('message')))}")


def _metric_names(configs: list[dict[str, Any]]) -> list[str]:
    names: list[str] = []
    for config in configs:
        for name in config.get("metrics") or {}:
            if name not in names:
                names.append(name)
    return names


def _config_label(config: dict[str, Any]) -> str:
    """A configuration's name (or a variant's parameters), escaped: rich reads [..] as markup."""
    if config.get("variantId"):
        return escape(_params_label(config.get("parameters") or {}) or str(config["variantId"]))
    return escape(str(config.get("name") or config.get("searchConfigurationId")))


def _params_label(params: dict[str, Any]) -> str:
    """A hybrid variant in a few characters: ``min_max arithmetic_mean w=0.3/0.7``."""
    parts = []
    for key, value in params.items():
        if key in ("normalization", "combination"):
            parts.append(str(value))
        elif key == "weights" and isinstance(value, list):
            parts.append("w=" + "/".join(str(w) for w in value))
        else:
            parts.append(f"{key}={value}")
    return " ".join(parts)


def _mean(config: dict[str, Any], metric: str) -> float:
    stats = (config.get("metrics") or {}).get(metric) or {}
    return float(stats.get("mean") or 0.0)


def _mean_ci(stats: dict[str, Any]) -> str:
    mean = stats.get("mean")
    if mean is None:
        return ""
    ci = stats.get("ci95")
    if ci and None not in ci:
        return f"{_number(mean)} ±{_number((ci[1] - ci[0]) / 2)}"
    return _number(mean)


def _p(test: dict[str, Any] | None) -> str:
    value = (test or {}).get("pValue")
    return "" if value is None else f"{value:.3g}"


def _d(effect: dict[str, Any] | None) -> str:
    value = (effect or {}).get("cohensD")
    return "" if value is None else f"{value:+.2f}"


def ab_results_tables(result: dict[str, Any]) -> list[Table]:
    """An A/B test's verdict, the plugin UI's reading beside it, and its busiest queries."""
    version = result["version"]
    interval = result["confidence_interval"]
    verdict = Table(title=f"A/B test {escape(str(result['test_id']))}, version "
                          f"{version['version']}", title_justify="left", show_header=False)
    verdict.add_column("what")
    verdict.add_column("value", justify="right")
    ui, totals = result["plugin_ui_clicks"], result["total_clicks"]
    for what, value in (
        ("impressions", str(result["impressions"])),
        ("with a click", str(result["impressions_with_clicks"])),
        ("wins A / wins B / ties",
         f"{result['wins_a']} / {result['wins_b']} / {result['ties']}"),
        ("delta AB (> 0: A preferred)", _number(result["delta_ab"], signed=True)),
        (f"{interval['level']:.0%} interval (queries resampled)",
         f"{_number(interval['lower'], signed=True)} to "
         f"{_number(interval['upper'], signed=True)}"),
        ("p, exact sign test", _p_value(result["p_value"])),
        ("winner", str(result["winner"] or "none (not significant)")),
        ("total clicks A / B, z-test p", f"{totals['clicks_a']} / {totals['clicks_b']}, "
                                         f"{_p_value(totals['p_value'])}"),
        ("plugin UI clicks A / B, p", f"{ui['clicks_a']} / {ui['clicks_b']}, "
                                       f"{_p_value(ui['p_value'])}"),
    ):
        verdict.add_row(what, escape(value))
    queries = Table(title="queries with the most impressions", title_justify="left")
    for column in ("query", "impressions", "A wins", "B wins", "ties", "delta AB"):
        queries.add_column(column, justify="left" if column == "query" else "right")
    for row in result["per_query"][:10]:
        queries.add_row(escape(str(row["query"])), str(row["impressions"]), str(row["wins_a"]),
                        str(row["wins_b"]), str(row["ties"]),
                        _number(row["delta_ab"], signed=True))
    return [verdict, queries]


def _p_value(value: float | None) -> str:
    if value is None:
        return "-"
    return "<0.0001" if value < 1e-4 else f"{value:.4f}"


def print_ab_results(result: dict[str, Any]) -> None:
    for table in ab_results_tables(result):
        out.print(table)
    if result.get("warning"):
        out.print(f"[yellow]warning[/yellow]: {escape(str(result['warning']))}")
