"""``workbench monitor``: create, list, run and read the monitors that watch a search
configuration's quality (docs/monitors.md), over HTTP to a running workbench.

A monitor's body has many fields; the flags cover the common ones and a JSON file the rest
(flags win over the file). Exit codes as the rest of the loop: 0 done, 1 a run ended ERROR,
2 usage or infrastructure error.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any
from urllib.parse import quote

from rich.markup import escape
from rich.table import Table

from workbench.cli import formats
from workbench.cli.client import ClientError, WorkbenchClient
from workbench.cli.output import _mean_ci, err, out

FORMATS = {"html": "html", "md": "md", "csv": "csv"}
POLL_SECONDS = 0.5


def add_command(sub: Any, conn: argparse.ArgumentParser) -> None:
    mon = sub.add_parser("monitor", help="monitors: search quality watched run after run "
                                         "(docs/monitors.md)").add_subparsers(
        dest="action", required=True)
    create = mon.add_parser(
        "create", parents=[conn], help="create a monitor from a JSON body and/or flags",
        description="Create a monitor. FILE holds a whole body (docs/monitors.md lists every "
                    "field); the flags set the common fields and win over the file's.")
    create.add_argument("file", nargs="?", help="a JSON body (optional)")
    create.add_argument("--name")
    create.add_argument("--description")
    create.add_argument("--search-config", help="the search configuration watched (id)")
    create.add_argument("--query-set", help="a fixed panel of queries (query set id)")
    create.add_argument("--ubi-size", type=int, help="also sample this many UBI queries")
    create.add_argument("--ubi-window", help="... logged in this window (Nd or Nh, default 7d)")
    create.add_argument("--ubi-sampling", choices=("random", "topn", "pptss"),
                        help="how the UBI queries are drawn (default random)")
    judge = create.add_mutually_exclusive_group()
    judge.add_argument("--judge", help="a reference judge (token_overlap, ...), no model")
    judge.add_argument("--model", help="an LLM judge: the model id")
    create.add_argument("--context-fields",
                        help="comma-separated fields of a document the judge reads (default: "
                             "all but vectors)")
    create.add_argument("--judgments", action="append", default=[],
                        help="a judgment list whose ratings are reused (repeat)")
    create.add_argument("--metric", action="append", default=[], dest="metrics",
                        help="a metric at k (repeat; default NDCG@k)")
    create.add_argument("--k", type=int, help="results judged per query (default 10)")
    create.add_argument("--cron", help="schedule, a cron expression in UTC (default: none, "
                                       "runs on `monitor run` only)")
    create.add_argument("--alert-drop", type=float,
                        help="alert on a drop of the first metric by more than this")
    create.add_argument("--relative", action="store_true",
                        help="--alert-drop is a share of the baseline mean (0.05: 5 %%)")

    mon.add_parser("list", parents=[conn], help="the monitors, as a table")

    runs = mon.add_parser("runs", parents=[conn], help="a monitor's recent runs, newest first")
    runs.add_argument("monitor")
    runs.add_argument("--size", type=int, default=20, help="how many runs (default 20)")
    runs.add_argument("--json", action="store_true", help="the runs route's answer")

    report = mon.add_parser("report", parents=[conn],
                            help="write a monitor's report: its metric over time with each "
                                 "run's interval and state")
    report.add_argument("monitor")
    report.add_argument("--format", choices=sorted(FORMATS), default="html")
    report.add_argument("--out", help="the file (default monitor-ID.FORMAT; - for stdout)")

    run = mon.add_parser("run", parents=[conn], help="start one run of a monitor now")
    run.add_argument("monitor")
    run.add_argument("--wait", action="store_true",
                     help="wait for the run to end and print it (exit 1 if it ended ERROR)")


def body_of(args: argparse.Namespace, text: str | None) -> dict[str, Any]:
    """The monitor body: the file's JSON, then the flags over it."""
    body: dict[str, Any] = {}
    if text is not None:
        data = formats._json(text)
        if not isinstance(data, dict):
            raise formats.FormatError("a monitor body is a JSON object")
        body = data
    for key, value in (("name", args.name), ("description", args.description),
                       ("searchConfigurationId", args.search_config), ("k", args.k)):
        if value is not None:
            body[key] = value
    queries = dict(body.get("queries") or {})
    if args.query_set:
        queries["querySetId"] = args.query_set
    if args.ubi_size is not None or args.ubi_window or args.ubi_sampling:
        ubi = dict(queries.get("ubi") or {})
        for key, value in (("size", args.ubi_size), ("window", args.ubi_window),
                           ("sampling", args.ubi_sampling)):
            if value is not None:
                ubi[key] = value
        queries["ubi"] = ubi
    if queries:
        body["queries"] = queries
    if args.judge:
        body["judge"] = {"judge": args.judge}
    elif args.model:
        body["judge"] = {"modelId": args.model}
    if args.context_fields:
        body["judge"] = dict(body.get("judge") or {}, contextFields=[
            f.strip() for f in args.context_fields.split(",") if f.strip()])
    if args.judgments:
        body["judgmentList"] = args.judgments
    if args.metrics:
        body["metrics"] = args.metrics
    if args.cron:
        body["schedule"] = {"cron": args.cron, "timezone": "UTC"}
    if args.alert_drop is not None:
        metric = (body.get("metrics") or [f"NDCG@{body.get('k', 10)}"])[0]
        body["alerts"] = [{"metric": metric, "drop": args.alert_drop,
                           "relative": args.relative}]
    missing = [flag for flag, key in (("--name", "name"),
                                      ("--search-config", "searchConfigurationId"),
                                      ("--query-set or --ubi-size", "queries"),
                                      ("--judge or --model", "judge")) if not body.get(key)]
    if missing:
        raise formats.FormatError(f"missing {', '.join(missing)} (or put them in the JSON "
                                  "body)")
    return body


def create(client: WorkbenchClient, args: argparse.Namespace) -> int:
    text = None if args.file is None else _read(args.file)
    body = body_of(args, text)
    answer = client.srw("PUT", "/monitors", body)
    err.print(f"monitor {escape(repr(body['name']))} watching {body['searchConfigurationId']}")
    print(answer["monitor_id"])
    return 0


def _read(path: str) -> str:
    """A JSON body's text ("-": standard input)."""
    return sys.stdin.read() if path == "-" else Path(path).read_text(encoding="utf-8-sig")


def list_monitors(client: WorkbenchClient, args: argparse.Namespace) -> int:
    answer = client.srw("GET", "/monitors", params={"size": 1000})
    docs = [hit["_source"] for hit in ((answer or {}).get("hits") or {}).get("hits") or []]
    table = Table(title=f"{len(docs)} monitors", title_justify="left")
    for column in ("id", "name", "search configuration", "queries", "judge", "schedule"):
        table.add_column(column, no_wrap=column in ("id", "search configuration"))
    for doc in sorted(docs, key=lambda d: str(d.get("name"))):
        table.add_row(*(escape(str(cell)) for cell in (
            doc.get("id"), doc.get("name"), doc.get("searchConfigurationId"),
            _queries(doc.get("queries") or {}), _judge(doc.get("judge") or {}),
            (doc.get("schedule") or {}).get("cron") or "on demand")))
    out.print(table)
    return 0


def _queries(queries: dict[str, Any]) -> str:
    parts = []
    if queries.get("querySetId"):
        parts.append("panel")
    if queries.get("ubi"):
        ubi = queries["ubi"]
        parts.append(f"UBI {ubi.get('size')} over {ubi.get('window', '7d')}")
    return " + ".join(parts)


def _judge(judge: dict[str, Any]) -> str:
    return str(judge.get("judge") or (f"model {judge['modelId']}" if judge.get("modelId")
                                      else ""))


def _runs(client: WorkbenchClient, monitor_id: str, size: int) -> list[dict[str, Any]]:
    answer = client.srw("GET", f"/monitors/{quote(monitor_id, safe='')}/runs",
                        params={"size": size})
    return list((answer or {}).get("runs") or [])


def runs_table(runs: list[dict[str, Any]], title: str | None = None) -> Table:
    """The runs (as the route gives them, newest first): time, state, each metric's mean with
    its 95 % interval, the judged share, the pairs rated anew and the cost."""
    metrics: list[str] = []
    for run in runs:
        metrics += [m for m in run.get("metrics") or {}
                    if m not in metrics and not m.startswith("Judged@")]
    judged = next((m for run in runs for m in run.get("metrics") or {}
                   if m.startswith("Judged@")), None)
    title = title or (f"{len(runs)} run" + ("s, newest first" if len(runs) != 1 else ""))
    table = Table(title=title, title_justify="left")
    table.add_column("time")
    table.add_column("state")
    for metric in metrics:
        table.add_column(f"{metric} ±95%", justify="right")
    for column in ("judged", "queries", "new pairs", "cost"):
        table.add_column(column, justify="right")
    for run in runs:
        stats = run.get("metrics") or {}
        share = (stats.get(judged) or {}).get("mean") if judged else None
        rated = run.get("rated") or {}
        n = next((s.get("n") for s in stats.values() if s.get("n") is not None), None)
        table.add_row(
            str(run.get("timestamp") or "").replace("T", " ")[:19],
            str(run.get("state") or run.get("status")),
            *(_mean_ci(stats.get(m) or {}) or "-" for m in metrics),
            "-" if share is None else f"{share:.0%}", "-" if n is None else str(n),
            "-" if rated.get("new") is None else f"{rated['new']} of {rated.get('pairs')}",
            _cost(run.get("usage") or {}))
    return table


def _cost(usage: dict[str, Any]) -> str:
    if usage.get("cost") is not None:
        return f"{usage['cost']:.4f}"
    return f"{usage['totalTokens']} tokens" if usage.get("totalTokens") else "-"


def show_runs(client: WorkbenchClient, args: argparse.Namespace) -> int:
    runs = _runs(client, args.monitor, args.size)
    if args.json:
        print(json.dumps({"runs": runs, "total": len(runs)}, indent=2))
        return 0
    out.print(runs_table(runs))
    for run in runs:
        if run.get("status") == "ERROR":
            err.print(f"run {run.get('id')} ended ERROR: {escape(str(run.get('error')))}")
    return 0


def write_report(client: WorkbenchClient, args: argparse.Namespace) -> int:
    page = client.srw("GET", f"/monitors/{quote(args.monitor, safe='')}/_report",
                      params={"format": args.format})
    text = page if isinstance(page, str) else json.dumps(page)
    if args.out == "-":
        print(text, end="")
        return 0
    path = Path(args.out or f"monitor-{args.monitor}.{FORMATS[args.format]}")
    path.write_text(text, encoding="utf-8")
    err.print(f"report of monitor {args.monitor} -> {path}")
    return 0


def run_now(client: WorkbenchClient, args: argparse.Namespace) -> int:
    answer = client.srw("POST", f"/monitors/{quote(args.monitor, safe='')}/_run")
    run_id = str(answer["run_id"])
    if not args.wait:
        print(run_id)
        return 0
    deadline = time.monotonic() + args.timeout
    with err.status(f"run {run_id}"):
        while True:
            run = next((r for r in _runs(client, args.monitor, 50) if r.get("id") == run_id),
                       None)
            if run is not None and run.get("status") not in ("PROCESSING", "RETRYING"):
                break
            if time.monotonic() > deadline:
                raise ClientError(f"run {run_id} still running after {args.timeout:.0f} s")
            time.sleep(POLL_SECONDS)
    out.print(runs_table([run], title=f"run {run_id}"))
    if run.get("status") == "ERROR":
        err.print(f"run {run_id} ended ERROR: {escape(str(run.get('error')))}")
        return 1
    return 0
