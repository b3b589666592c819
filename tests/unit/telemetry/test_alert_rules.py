"""The monitors' alert rules of docs/metrics.md fire as they say, under Prometheus's own rule
evaluation (``promtool test rules``; scripts/install.sh --dev installs promtool): an ALERT
state held past ``for`` raises WorkbenchSearchQualityAlert for that monitor alone, a
JUDGE_DRIFT state WorkbenchJudgeDrift, and OK or INCONCLUSIVE neither."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

PAGE = Path(__file__).resolve().parents[3] / "docs" / "metrics.md"


def rules() -> dict[str, Any]:
    fence = PAGE.read_text().split("<!-- example: config prometheus-rules -->", 1)[1]
    loaded: dict[str, Any] = yaml.safe_load(fence.split("```yaml\n", 1)[1].split("```", 1)[0])
    return loaded


def expected(alert: str, monitor: str) -> dict[str, Any]:
    rule = next(r for g in rules()["groups"] for r in g["rules"] if r["alert"] == alert)
    return {"exp_labels": {**rule["labels"], "monitor": monitor},
            "exp_annotations": {k: v.replace("{{ $labels.monitor }}", monitor)
                                for k, v in rule["annotations"].items()}}


def test_the_monitor_rules_fire_for_the_monitor_in_that_state(tmp_path: Path) -> None:
    promtool = shutil.which("promtool")
    if promtool is None:
        pytest.skip("promtool is not installed (scripts/install.sh --dev installs it)")
    (tmp_path / "rules.yml").write_text(yaml.safe_dump(rules()))
    series = {"ok": "0 0 0 0 0 0", "inconclusive": "1 1 1 1 1 1", "alert": "0 0 2 2 2 2",
              "drift": "3 3 3 3 3 3", "blip": "0 2 0 0 0 0"}
    cases = [
        {"eval_time": "5m", "alertname": "WorkbenchSearchQualityAlert",
         "exp_alerts": [expected("WorkbenchSearchQualityAlert", "alert")]},
        {"eval_time": "5m", "alertname": "WorkbenchJudgeDrift",
         "exp_alerts": [expected("WorkbenchJudgeDrift", "drift")]},
        # ALERT since 2m: pending until it has held for a minute
        {"eval_time": "2m", "alertname": "WorkbenchSearchQualityAlert", "exp_alerts": []},
    ]
    (tmp_path / "test.yml").write_text(yaml.safe_dump({
        "rule_files": ["rules.yml"], "evaluation_interval": "1m",
        "tests": [{"interval": "1m",
                   "input_series": [{"series": f'workbench_monitor_state{{monitor="{m}"}}',
                                     "values": v} for m, v in series.items()],
                   "alert_rule_test": cases}]}))
    result = subprocess.run([promtool, "test", "rules", "test.yml"], cwd=tmp_path,
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS" in result.stdout, result.stdout
