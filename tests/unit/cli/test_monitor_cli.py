"""``workbench monitor``: the body its flags and file make, and the runs table (no server)."""

from __future__ import annotations

import argparse
import io
import json
from typing import Any

import pytest
from rich.console import Console

from workbench.cli import formats, monitor


def parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    monitor.add_command(parser.add_subparsers(dest="command"), argparse.ArgumentParser(
        add_help=False))
    return parser.parse_args(["monitor", "create", *argv])


def test_flags_make_a_whole_body() -> None:
    args = parse("--name", "nightly", "--search-config", "sc", "--query-set", "qs",
                 "--ubi-size", "50", "--ubi-window", "3d", "--judge", "token_overlap",
                 "--metric", "NDCG@5", "--metric", "MAP@5", "--k", "5", "--cron", "0 3 * * *",
                 "--alert-drop", "0.1", "--relative", "--judgments", "j1")
    assert monitor.body_of(args, None) == {
        "name": "nightly", "searchConfigurationId": "sc", "k": 5,
        "queries": {"querySetId": "qs", "ubi": {"size": 50, "window": "3d"}},
        "judge": {"judge": "token_overlap"}, "judgmentList": ["j1"],
        "metrics": ["NDCG@5", "MAP@5"], "schedule": {"cron": "0 3 * * *", "timezone": "UTC"},
        "alerts": [{"metric": "NDCG@5", "drop": 0.1, "relative": True}]}


def test_flags_win_over_the_file_and_keep_its_other_fields() -> None:
    text = json.dumps({"name": "from file", "searchConfigurationId": "sc",
                       "queries": {"ubi": {"size": 20, "sampling": "topn"}},
                       "judge": {"modelId": "m"}, "goldPairs": 0, "budget": {"maxTokens": 9}})
    args = parse("--name", "from flags", "--ubi-window", "1d", "--model", "m2")
    assert monitor.body_of(args, text) == {
        "name": "from flags", "searchConfigurationId": "sc",
        "queries": {"ubi": {"size": 20, "sampling": "topn", "window": "1d"}},
        "judge": {"modelId": "m2"}, "goldPairs": 0, "budget": {"maxTokens": 9}}


def test_context_fields_join_the_judge_of_the_flags_or_the_file() -> None:
    args = parse("--judge", "token_overlap", "--context-fields", "title, brand")
    text = json.dumps({"name": "n", "searchConfigurationId": "sc",
                       "queries": {"querySetId": "qs"}})
    assert monitor.body_of(args, text)["judge"] == {"judge": "token_overlap",
                                                    "contextFields": ["title", "brand"]}
    args = parse("--context-fields", "title")
    text = json.dumps({"name": "n", "searchConfigurationId": "sc",
                       "queries": {"querySetId": "qs"}, "judge": {"modelId": "m"}})
    assert monitor.body_of(args, text)["judge"] == {"modelId": "m", "contextFields": ["title"]}


def test_the_default_alert_metric_is_ndcg_at_k() -> None:
    args = parse("--name", "n", "--search-config", "sc", "--query-set", "qs", "--judge", "j",
                 "--alert-drop", "0.05")
    assert monitor.body_of(args, None)["alerts"] == [
        {"metric": "NDCG@10", "drop": 0.05, "relative": False}]


@pytest.mark.parametrize(("argv", "text", "message"), [
    (["--search-config", "sc", "--query-set", "qs", "--judge", "j"], None,
     "missing --name (or put them in the JSON body)"),
    (["--name", "n"], None, "missing --search-config, --query-set or --ubi-size, --judge or "
                            "--model (or put them in the JSON body)"),
    ([], "[1, 2]", "a monitor body is a JSON object"),
])
def test_what_is_missing_is_named(argv: list[str], text: str | None, message: str) -> None:
    with pytest.raises(formats.FormatError) as caught:
        monitor.body_of(parse(*argv), text)
    assert str(caught.value) == message


def test_the_judge_flags_exclude_each_other() -> None:
    with pytest.raises(SystemExit):
        parse("--judge", "token_overlap", "--model", "m")


def test_the_runs_table() -> None:
    runs: list[dict[str, Any]] = [
        {"id": "r2", "timestamp": "2026-11-29T09:07:12.345Z", "status": "COMPLETED",
         "state": "ALERT", "metrics": {"NDCG@10": {"mean": 0.5, "ci95": [0.4, 0.6], "n": 30},
                                       "Judged@10": {"mean": 0.976, "ci95": [0.9, 1.0]}},
         "rated": {"pairs": 300, "new": 0}, "usage": {"cost": 0.01234}},
        {"id": "r1", "timestamp": "2026-11-28T09:07:12Z", "status": "ERROR",
         "error": "boom", "metrics": {}, "rated": {}, "usage": {"totalTokens": 12}}]
    console = Console(width=120, record=True, file=io.StringIO())
    console.print(monitor.runs_table(runs))
    assert [line.rstrip() for line in console.export_text().splitlines()] == [
        "2 runs, newest first",
        "┏━━━━━━━━━━━━━━━━━━━━━┳━━━━━━━┳━━━━━━━━━━━━━━┳━━━━━━━━┳━━━━━━━━━┳━━━━━━━━━━━┳━━━━━━━━━━━┓",
        "┃ time                ┃ state ┃ NDCG@10 ±95% ┃ judged ┃ queries ┃ new pairs ┃      cost ┃",
        "┡━━━━━━━━━━━━━━━━━━━━━╇━━━━━━━╇━━━━━━━━━━━━━━╇━━━━━━━━╇━━━━━━━━━╇━━━━━━━━━━━╇━━━━━━━━━━━┩",
        "│ 2026-11-29 09:07:12 │ ALERT │ 0.500 ±0.100 │    98% │      30 │  0 of 300 │    0.0123 │",
        "│ 2026-11-28 09:07:12 │ ERROR │            - │      - │       - │         - │ 12 tokens │",
        "└─────────────────────┴───────┴──────────────┴────────┴─────────┴───────────┴───────────┘"]

