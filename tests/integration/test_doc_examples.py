"""The examples of the README and the documentation, run as a reader would run them, against
the real services (tests/support/doc_examples.py says how fences are read).

Pages in ``COVERED`` have every fenced example run: ``console`` sessions command by command,
their printed lines compared with what the page shows; ``bash`` fences as scripts that must
succeed; set-up fences (``./scripts/up.sh``, ``./scripts/test.sh``) are the steps CI itself
runs. The other pages are not run yet: ``test_count_of_examples`` prints how many fences each
holds, so the number left is on record in every test run.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from tests.support.doc_examples import REPO, Fence, documents, fences, normalise
from tests.support.processes import Server, Worker

COVERED = ("README.md", "docs/getting-started.md")
RECORDED_URL = "http://127.0.0.1:9400"
RECORDED_COLUMNS = "160"  # the width the pages' tables were recorded at


def _session_dir(tmp_path: Path) -> Path:
    """A folder that looks like the checkout to the commands (``.venv``, ``workbench/``,
    ``scripts/``) without letting them write into it."""
    for name in (".venv", "workbench", "scripts", "index_mappings"):
        (tmp_path / name).symlink_to(REPO / name)
    return tmp_path


def _run(script: str, cwd: Path, env: dict[str, str], timeout: float = 900
         ) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["bash", "-c", script], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=timeout)


def _console(fence: Fence, cwd: Path, env: dict[str, str], url: str) -> None:
    """Run a session's commands in one shell (variables carry over) and compare each
    command's printed lines with the page's."""
    steps = fence.steps()
    marker = "@@example-step@@"
    script = "\n".join(f"{step.command.replace(RECORDED_URL, url)} 2>&1\necho \"{marker} $?\""
                       for step in steps)
    result = _run(script, cwd, env)
    chunks = result.stdout.split(marker)
    assert len(chunks) == len(steps) + 1, (fence.where, result.stdout[-2000:],
                                           result.stderr[-2000:])
    for i, step in enumerate(steps):
        printed = chunks[i].split("\n")
        if i:  # drop the exit status that follows the previous marker
            status, printed = printed[0].strip(), printed[1:]
            assert status == "0", (fence.where, steps[i - 1].command, chunks[i - 1][-2000:])
        assert normalise(printed) == normalise(step.output), (fence.where, step.command)
    assert chunks[-1].split("\n")[0].strip() == "0", (fence.where, steps[-1].command,
                                                      chunks[-2][-2000:])


@pytest.mark.parametrize("page", COVERED)
def test_every_example_of_the_page_runs(page: str, server: Server, worker: Worker,
                                        env: dict[str, str], tmp_path: Path) -> None:
    cwd = _session_dir(tmp_path)
    session_env = dict(env, WORKBENCH_URL=server.url, COLUMNS=RECORDED_COLUMNS,
                       PATH=f"{REPO / '.venv' / 'bin'}{os.pathsep}{env.get('PATH', '')}")
    ran = 0
    for fence in fences(REPO / page):
        if fence.marker == "setup":
            continue
        if fence.marker == "file":
            (cwd / fence.argument).write_text(fence.text + "\n")
            continue
        if fence.language == "console":
            _console(fence, cwd, session_env, server.url)
        elif fence.language in ("bash", "sh"):
            result = _run(fence.text.replace(RECORDED_URL, server.url), cwd, session_env)
            assert result.returncode == 0, (fence.where, result.stdout[-2000:],
                                            result.stderr[-2000:])
        else:
            pytest.fail(f"{fence.where}: a ```{fence.language} fence on a covered page must "
                        "run or carry a marker (tests/support/doc_examples.py)")
        ran += 1
    assert ran, f"{page} has no example to run"


def test_count_of_examples() -> None:
    """How many fenced examples each page holds, and how many of them run (printed with -s or
    in the log of a failure)."""
    total = running = 0
    for path in documents():
        page = str(path.relative_to(REPO))
        found = [f for f in fences(path) if f.language and f.marker != "file"]
        total += len(found)
        if page in COVERED:
            running += sum(1 for f in found if f.marker != "setup")
        print(f"{page}: {len(found)} fenced examples" + (" (run)" if page in COVERED else ""))
    print(f"{running} examples run of {total} fenced examples")
    assert running >= len(COVERED)
