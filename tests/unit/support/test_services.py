"""``services.llama_url`` waits for CI's background install of llama.cpp's server (``.ci/run``
holds LLAMA_INSTALL_LOCK while it runs) and for nothing else."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

from tests.support.services import _install_finished


def test_the_server_is_asked_for_once_the_install_holding_the_lock_has_ended(
        tmp_path: Path) -> None:
    lock = tmp_path / "llama.lock"
    lock.touch()
    # flock(1) takes the lock before it runs its command: the lock is held once "held" is printed
    install = subprocess.Popen(["flock", str(lock), "sh", "-c", "echo held; sleep 1.5"],
                               stdout=subprocess.PIPE, text=True)
    assert install.stdout is not None and install.stdout.readline() == "held\n"
    started = time.monotonic()
    with _install_finished(str(lock)):
        waited = time.monotonic() - started
        assert install.poll() is not None  # the install had ended
    install.wait(5)
    assert 1.0 <= waited < 5, waited


def test_without_a_lock_nothing_is_waited_for(tmp_path: Path) -> None:
    started = time.monotonic()
    with _install_finished(None):
        assert time.monotonic() - started < 0.1
    with _install_finished(""):
        assert time.monotonic() - started < 0.1
