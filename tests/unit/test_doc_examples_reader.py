"""How the example runner (tests/integration/test_doc_examples.py) reads a page's fences."""

from __future__ import annotations

from pathlib import Path

from tests.support import doc_examples
from tests.support.doc_examples import fences, normalise


def test_console_sessions_markers_and_indented_fences(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(doc_examples, "REPO", tmp_path)
    page = tmp_path / "page.md"
    page.write_text(
        "Intro\n\n<!-- example: setup -->\n```bash\n./scripts/up.sh\n```\n\n"
        "```console\n$ QS=$(workbench query-set create q.txt \\\n    --name x)\n"
        "query set 'x': 2 queries\n  importing ━━━━ 1/1 0:00:03\n$ echo done\ndone\n```\n\n"
        "1. Step:\n\n   ```bash\n   echo indented\n   ```\n")
    setup, console, indented = fences(page)
    assert (setup.marker, setup.language, setup.text) == ("setup", "bash", "./scripts/up.sh")
    assert console.where == "page.md:8" and console.marker is None
    first, second = console.steps()
    assert first.command == "QS=$(workbench query-set create q.txt \\\n    --name x)"
    assert normalise(first.output) == ["query set 'x': 2 queries"]
    assert (second.command, second.output) == ("echo done", ["done"])
    assert indented.text == "echo indented"


def test_normalise_replaces_ids_and_durations() -> None:
    assert normalise(["experiment 005d39bd-bc58-449b-aee3-487f708b140b  ", "took 0:01:02", ""]
                     ) == ["experiment <id>", "took <duration>"]
