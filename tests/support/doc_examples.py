"""Reading the fenced examples of README.md and docs/*.md, so that tests can run them.

A ``console`` fence is a terminal session: each line starting with ``$ `` is a command (a line
ending in a backslash continues it), the lines after it up to the next command are what it
printed (standard output and error, as a terminal shows both). Lines of a progress bar (they
hold ``━``) are not compared. Identifiers and durations differ from run to run: ``normalise``
replaces UUIDs and ``0:00:00``-style durations before a comparison.

An HTML comment right before a fence can say more:

* ``<!-- example: file NAME -->`` before a fence: its text is written to ``NAME`` in the
  session's folder before the page's sessions run (a file the commands use).
* ``<!-- example: setup -->`` before a ``bash`` fence: set-up of the machine itself
  (``./scripts/up.sh``, ``./scripts/test.sh``), which CI runs as its own steps, not in a test.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
_DURATION = re.compile(r"\b\d+:\d\d:\d\d\b")
_MARKER = re.compile(r"<!--\s*example:\s*(\w+)\s*(.*?)\s*-->")


@dataclass
class Step:
    """One command of a console session and what it printed."""

    command: str
    output: list[str] = field(default_factory=list)


@dataclass
class Fence:
    """One fenced block: where it is, its language, its text and its marker, if any."""

    path: Path
    line: int
    language: str
    text: str
    marker: str | None = None
    argument: str = ""

    @property
    def where(self) -> str:
        return f"{self.path.relative_to(REPO)}:{self.line}"

    def steps(self) -> list[Step]:
        """The commands of a ``console`` fence with their printed lines."""
        steps: list[Step] = []
        lines = self.text.splitlines()
        i = 0
        while i < len(lines):
            line = lines[i]
            if line.startswith("$ "):
                command = line[2:]
                while command.endswith("\\") and i + 1 < len(lines):
                    i += 1
                    command = command + "\n" + lines[i]
                steps.append(Step(command))
            elif steps:
                steps[-1].output.append(line)
            i += 1
        return steps


def fences(path: Path) -> list[Fence]:
    """Every fenced block of a Markdown file, in order (indented ones too)."""
    out: list[Fence] = []
    lines = path.read_text().splitlines()
    i = 0
    while i < len(lines):
        stripped = lines[i].strip()
        if stripped.startswith("```"):
            indent = len(lines[i]) - len(lines[i].lstrip())
            language = stripped[3:].strip().split()[0] if stripped[3:].strip() else ""
            start = i
            body: list[str] = []
            i += 1
            while i < len(lines) and not lines[i].strip().startswith("```"):
                body.append(lines[i][indent:] if lines[i][:indent].strip() == "" else lines[i])
                i += 1
            marker = argument = None
            j = start - 1
            while j >= 0 and not lines[j].strip():
                j -= 1
            found = _MARKER.search(lines[j]) if j >= 0 else None
            if found:
                marker, argument = found.group(1), found.group(2)
            out.append(Fence(path, start + 1, language, "\n".join(body), marker,
                             argument or ""))
        i += 1
    return out


def documents() -> list[Path]:
    """README.md and every page of docs/."""
    return [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]


def normalise(lines: list[str]) -> list[str]:
    """Printed lines as compared: ids and durations replaced, progress bars and trailing
    blanks dropped."""
    out = []
    for line in lines:
        if "━" in line:
            continue
        line = _DURATION.sub("<duration>", _UUID.sub("<id>", line)).rstrip()
        out.append(line)
    while out and not out[-1]:
        out.pop()
    return out
