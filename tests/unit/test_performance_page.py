"""docs/performance.md carries the recorded benchmark report's table verbatim."""

from __future__ import annotations

from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_the_page_holds_the_recorded_report() -> None:
    report = (REPO / "scripts" / "bench" / "results" / "report.md").read_text()
    table = "\n".join(line for line in report.splitlines() if line.startswith("|"))
    assert table and table in (REPO / "docs" / "performance.md").read_text()
