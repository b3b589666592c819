"""A monitor's report from three hand-written runs (given newest first, as the runs route
answers): the table, the CSV rows and the HTML page with one plot per metric."""

from __future__ import annotations

import base64
import re
from typing import Any

import pytest

from workbench.monitors import report

MONITOR: dict[str, Any] = {
    "id": "m-1", "name": "products <nightly>", "searchConfigurationId": "sc-1", "k": 10,
    "metrics": ["NDCG@10"], "queries": {"querySetId": "qs-1"},
    "judge": {"judge": "token_overlap"}, "schedule": {"cron": "0 3 * * *"}}


def run(run_id: str, day: int, state: str, mean: float, ci: list[float], judged: float,
        new: int, **extra: Any) -> dict[str, Any]:
    return {"id": run_id, "monitorId": "m-1", "timestamp": f"2026-11-{day:02d}T03:00:00Z",
            "status": "COMPLETED", "state": state,
            "metrics": {"NDCG@10": {"mean": mean, "ci95": ci, "n": 12},
                        "Judged@10": {"mean": judged, "ci95": [judged, judged], "n": 12}},
            "rated": {"pairs": 120, "new": new, "reused": 120 - new, "cached": 0},
            "usage": {}, "gold": {"pairs": 20, "changed": 0, "drift": False},
            "decisions": [], **extra}


RUNS = [  # newest first
    run("r3", 3, "ALERT", 0.5, [0.41, 0.59], 0.9, 4, decisions=[
        {"metric": "NDCG@10", "state": "ALERT", "reason": "dropped 0.1 in 2 runs"}]),
    run("r2", 2, "INCONCLUSIVE", 0.6, [0.5, 0.7], 0.5, 0, usage={"cost": 0.25}),
    run("r1", 1, "OK", 0.625, [0.5, 0.75], 0.95, 120),
]


def test_the_table_lists_the_runs_oldest_first_with_interval_state_and_reason() -> None:
    header, rows = report.table(MONITOR, RUNS)
    assert header == ["time", "state", "NDCG@10", "Judged@10", "queries", "new pairs", "cost",
                      "why"]
    assert rows == [
        ["2026-11-01T03:00:00Z", "OK", "0.6250 [0.5000, 0.7500]", "0.9500", "12", "120", "–",
         ""],
        ["2026-11-02T03:00:00Z", "INCONCLUSIVE", "0.6000 [0.5000, 0.7000]", "0.5000", "12",
         "0", "0.2500", ""],
        ["2026-11-03T03:00:00Z", "ALERT", "0.5000 [0.4100, 0.5900]", "0.9000", "12", "4", "–",
         "NDCG@10: dropped 0.1 in 2 runs"]]


def test_markdown_has_the_facts_and_the_table() -> None:
    text = report.markdown(MONITOR, RUNS)
    assert text.splitlines()[:7] == [
        "# Monitor products <nightly>", "",
        "* id m-1, search configuration sc-1, k = 10",
        "* queries: query set qs-1",
        "* judge: token_overlap",
        "* schedule: 0 3 * * *",
        "* 3 runs: 1 ALERT, 1 INCONCLUSIVE, 1 OK"]
    assert ("| 2026-11-03T03:00:00Z | ALERT | 0.5000 [0.4100, 0.5900] | 0.9000 | 12 | 4 | – | "
            "NDCG@10: dropped 0.1 in 2 runs |") in text


def test_a_failed_run_and_a_judge_drift_say_why() -> None:
    failed = run("r4", 4, "OK", 0.5, [0.4, 0.6], 0.9, 0)
    failed.update(status="ERROR", error="search configuration sc-1 not found", metrics={})
    del failed["state"]
    drift = run("r5", 5, "JUDGE_DRIFT", 0.7, [0.6, 0.8], 0.9, 0,
                gold={"pairs": 20, "changed": 9, "drift": True})
    _, rows = report.table(MONITOR, [failed, drift])
    assert [r[1] for r in rows] == ["ERROR", "JUDGE_DRIFT"]
    assert rows[0][-1] == "ERROR: search configuration sc-1 not found"
    assert rows[1][-1] == "judge drift: 9 of 20 gold pairs rated differently"


def test_csv_has_one_row_per_run_and_metric() -> None:
    assert report.csv_rows(MONITOR, RUNS).splitlines() == [
        "runId,timestamp,status,state,metric,mean,ci95Low,ci95High,n",
        "r1,2026-11-01T03:00:00Z,COMPLETED,OK,NDCG@10,0.625,0.5,0.75,12",
        "r1,2026-11-01T03:00:00Z,COMPLETED,OK,Judged@10,0.95,0.95,0.95,12",
        "r2,2026-11-02T03:00:00Z,COMPLETED,INCONCLUSIVE,NDCG@10,0.6,0.5,0.7,12",
        "r2,2026-11-02T03:00:00Z,COMPLETED,INCONCLUSIVE,Judged@10,0.5,0.5,0.5,12",
        "r3,2026-11-03T03:00:00Z,COMPLETED,ALERT,NDCG@10,0.5,0.41,0.59,12",
        "r3,2026-11-03T03:00:00Z,COMPLETED,ALERT,Judged@10,0.9,0.9,0.9,12"]


def test_the_plot_draws_each_run_with_its_interval_and_state(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The figure's own artists: the error bars span each run's interval, and each state has
    its own marker series at the runs in that state."""
    drawn: list[Any] = []
    original = report.png

    def keep(fig: Any) -> str:
        axes = fig.axes[0]
        drawn.append({
            "bars": [seg.tolist() for seg in axes.collections[0].get_segments()],
            "states": {c.get_label(): c.get_offsets().tolist() for c in axes.collections[1:]},
        })
        return original(fig)

    monkeypatch.setattr(report, "png", keep)
    plots = report.plot(MONITOR, RUNS)
    assert [caption for caption, _ in plots] == [
        "NDCG@10 over the monitor's runs, with each run's 95 % interval and state"]
    assert base64.b64decode(plots[0][1])[:8] == b"\x89PNG\r\n\x1a\n"
    assert drawn == [{
        "bars": [[[0.0, 0.5], [0.0, 0.75]], [[1.0, 0.5], [1.0, 0.7]],
                 [[2.0, 0.41], [2.0, 0.59]]],
        "states": {"OK": [[0.0, 0.625]], "INCONCLUSIVE": [[1.0, 0.6]], "ALERT": [[2.0, 0.5]]}}]


def test_the_html_page_is_self_contained_and_escaped() -> None:
    page = report.html(MONITOR, RUNS)
    assert page.startswith("<!DOCTYPE html>")
    assert "<title>Monitor products &lt;nightly&gt;</title>" in page
    images = re.findall(r'src="data:image/png;base64,([A-Za-z0-9+/=]+)"', page)
    assert len(images) == 1
    assert base64.b64decode(images[0])[:8] == b"\x89PNG\r\n\x1a\n"
    assert '<td class="ALERT">ALERT</td>' in page
    assert "http" not in page.replace("http-equiv", "")  # nothing fetched from elsewhere


def test_no_runs_yet_is_a_page_without_a_plot() -> None:
    assert report.plot(MONITOR, []) == []
    assert "* 0 runs: none yet" in report.markdown(MONITOR, [])
    assert report.csv_rows(MONITOR, []) == ",".join(report.CSV_HEADER) + "\n"
