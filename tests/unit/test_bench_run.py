"""``workbench bench`` (workbench/bench/run.py) with ``--workbench-url``: a benchmark that needs
processes of its own is skipped with its reason in the report, and the others run. ``metrics``
and a skipped ``llm`` need no service, so this runs with none (the URL is a closed port)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from workbench.bench import run


def test_a_deployed_workbench_skips_the_benchmarks_with_processes_of_their_own(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert run.main(["--only", "llm,metrics", "--quick", "--workbench-url", "http://127.0.0.1:9/",
                     "--out", str(tmp_path)]) == 0
    printed = capsys.readouterr().out.splitlines()
    assert printed[0] == ("== llm: skipped with --workbench-url (its worker calls the stand-in "
                          "LLM server of fixed latency, given in WORKBENCH_MODELS)")
    assert printed[1] == "== metrics"
    report = json.loads((tmp_path / "report.json").read_text())
    assert {r["benchmark"] for r in report["results"]} == {"metrics"}
    assert report["meta"]["skipped"] == {"llm": run.OWN_PROCESSES["llm"]}
    assert report["meta"]["command"] == (
        "workbench bench --only llm,metrics --quick --workbench-url http://127.0.0.1:9/")
    markdown = (tmp_path / "report.md").read_text().splitlines()
    assert markdown[-3:] == [
        "Skipped (a deployed workbench measured, --workbench-url):", "",
        "- **llm**: its worker calls the stand-in LLM server of fixed latency, given in "
        "WORKBENCH_MODELS"]


def test_every_benchmark_that_starts_a_workbench_runs_on_a_deployed_one_or_says_why() -> None:
    """A benchmark module that calls ``bench.server`` either handles ``--workbench-url`` (the
    three below; passthrough starts its servers in passthrough_ways.serve, which does too) or is
    in OWN_PROCESSES; one that starts none runs as it is."""
    starts = {name for name in run.BENCHMARKS
              if "bench.server(" in (Path(run.__file__).parent / f"{name}.py").read_text()}
    assert starts - set(run.OWN_PROCESSES) == {"ab_search", "pointwise", "ubi"}
    assert set(run.OWN_PROCESSES) <= set(run.BENCHMARKS)
