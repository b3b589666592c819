"""Where each command keeps its samples (``telemetry.exporter``): a folder of its own, inherited
by its children, removed once its command is dead."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from workbench.config import Config
from workbench.telemetry import exporter


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PROMETHEUS_MULTIPROC_DIR", raising=False)


def dead_pid() -> int:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def test_off_unless_a_port_or_a_folder_is_set(clean_env: None) -> None:
    assert exporter.enable(Config(), "serve") is None
    assert "PROMETHEUS_MULTIPROC_DIR" not in os.environ


def test_a_command_gets_its_own_folder_and_dead_ones_go(clean_env: None, tmp_path: Path) -> None:
    dead = tmp_path / f"worker-{dead_pid()}"
    dead.mkdir()
    (dead / "counter_1.db").write_bytes(b"")
    alive = tmp_path / f"scheduler-{os.getppid()}"
    alive.mkdir()
    other = tmp_path / "notes"
    other.mkdir()
    own = exporter.enable(Config(metrics_dir=str(tmp_path)), "serve")
    assert own == tmp_path / f"serve-{os.getpid()}" and own.is_dir()
    assert os.environ["PROMETHEUS_MULTIPROC_DIR"] == str(own)
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        [own.name, alive.name, "notes"])


def test_a_child_keeps_its_parents_folder(clean_env: None, tmp_path: Path,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    parent = tmp_path / f"worker-{os.getppid()}"
    parent.mkdir()
    monkeypatch.setenv("PROMETHEUS_MULTIPROC_DIR", str(parent))
    assert exporter.enable(Config(metrics_port=9999, metrics_dir=str(tmp_path)),
                           "worker") == parent
    assert [p.name for p in tmp_path.iterdir()] == [parent.name]


def test_the_default_folder_is_per_user(clean_env: None) -> None:
    assert exporter.base_dir(Config(metrics_port=9999)).name == f"workbench-metrics-{os.getuid()}"
