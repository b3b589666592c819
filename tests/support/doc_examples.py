"""Reading the fenced examples of README.md and docs/*.md, so that tests can run them.

A ``console`` fence is a terminal session: each line starting with ``$ `` is a command (a line
ending in a backslash, or inside a quotation still open, continues it), the lines after it up
to the next command are what it printed (standard output and error, as a terminal shows
both). Lines of a progress bar (they hold ``━``) are not compared. Identifiers and durations
differ from run to run: ``normalise`` replaces UUIDs and ``0:00:00``-style durations before a
comparison.

When what a command printed is shown as JSON (the shown lines start with ``{`` or ``[``), it is
compared as JSON, through ``json_mismatches``: the page may leave things out, as a reader
would expect of an abbreviated answer:

* a bare ``...`` in an object stands for any further members; in a list, for any further
  items (a list without it must have exactly the items shown); as a member's value, for any
  value;
* the string ``"..."`` stands for any value, and a string ending in ``...`` (``"5f0c..."``,
  ``"LLM [judge] failed: ..."``) for any string that starts with what precedes the dots;
* a number matches the value rounded to as many decimals as the page shows (``0.9197`` for
  ``0.9197207891481877``); an integer must be equal.

An HTML comment right before a fence can say more:

* ``<!-- example: file NAME -->`` before a fence: its text is written to ``NAME`` in the
  session's folder before the page's sessions run (a file the commands use).
* ``<!-- example: setup -->`` before a ``bash`` fence: set-up of the machine itself
  (``./scripts/up.sh``, ``./scripts/test.sh``), which CI runs as its own steps, not in a test.

The other markers (``config``, ``shown-by``, settings after ``setup``) are read by
``tests/integration/test_doc_examples.py``, which says what each means.
"""

from __future__ import annotations

import json
import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
_DURATION = re.compile(r"\b\d+:\d\d:\d\d\b")
_TIME = re.compile(r"\b\d{4}-\d\d-\d\d[T ]\d\d:\d\d(?::\d\d(?:\.\d+)?)?(?:Z|[+-]\d\d:?\d\d)?")
_MARKER = re.compile(r"<!--\s*example:\s*([\w-]+)\s*(.*?)\s*-->")


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
                while (command.endswith("\\") or _open_quote(command)) and i + 1 < len(lines):
                    i += 1
                    command = command + "\n" + lines[i]
                steps.append(Step(command))
            elif steps:
                steps[-1].output.append(line)
            i += 1
        return steps


def _open_quote(command: str) -> bool:
    """Whether a command has a quotation still open (a request body over several lines)."""
    try:
        shlex.split(command, comments=True)
    except ValueError:
        return True
    return False


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
    """Printed lines as compared: ids, times of day (a run's timestamp) and durations replaced,
    progress bars and trailing blanks dropped."""
    out = []
    for line in lines:
        if "━" in line:
            continue
        line = _DURATION.sub("<duration>", _TIME.sub("<time>", _UUID.sub("<id>", line))).rstrip()
        out.append(line)
    while out and not out[-1]:
        out.pop()
    return out


ANY = "\u2026"  # what a bare ``...`` becomes in a parsed pattern


class _Shown(float):
    """A number as the page shows it, remembering how it was written."""

    text: str

    @classmethod
    def parse(cls, text: str) -> _Shown:
        number = cls(text)
        number.text = text
        return number

    def shows(self, actual: float) -> bool:
        """Whether ``actual``, rounded as the page rounded, is this number."""
        mantissa, _, exponent = self.text.lower().partition("e")
        decimals = len(mantissa.split(".")[1]) if "." in mantissa else 0
        if exponent:
            return f"{actual:.{decimals}e}" == f"{float(self):.{decimals}e}"
        return round(actual, decimals) == float(self)


def parse_pattern(text: str) -> Any:
    """A JSON pattern as shown on a page (see the module docstring) as a Python value."""
    out: list[str] = []
    stack: list[str] = []
    i, in_string = 0, False
    while i < len(text):
        char = text[i]
        if in_string:
            out.append(char)
            if char == "\\":
                out.append(text[i + 1])
                i += 1
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
            out.append(char)
        elif text.startswith("...", i):
            previous = "".join(out).rstrip()[-1:]
            member = stack and stack[-1] == "{" and previous != ":"
            out.append(f'"{ANY}": null' if member else f'"{ANY}"')
            i += 2
        else:
            if char in "{[":
                stack.append(char)
            elif char in "}]":
                stack.pop()
            out.append(char)
        i += 1
    return json.loads("".join(out), parse_float=_Shown.parse)


def json_mismatches(pattern: Any, actual: Any, where: str = "$") -> list[str]:
    """Where ``actual`` differs from a page's ``pattern``; empty when it matches."""
    if isinstance(pattern, str) and (pattern in ("...", ANY) or (
            pattern.endswith("...") and isinstance(actual, str)
            and actual.startswith(pattern[:-3]))):
        return []
    if isinstance(pattern, dict):
        if not isinstance(actual, dict):
            return [f"{where}: expected an object, got {actual!r}"]
        problems = [f"{where}.{key}: missing" for key in pattern
                    if key != ANY and key not in actual]
        if ANY not in pattern:
            problems += [f"{where}.{key}: not shown on the page" for key in actual
                         if key not in pattern]
        for key, value in pattern.items():
            if key != ANY and key in actual:
                problems += json_mismatches(value, actual[key], f"{where}.{key}")
        return problems
    if isinstance(pattern, list):
        if not isinstance(actual, list):
            return [f"{where}: expected a list, got {actual!r}"]
        open_ended = bool(pattern) and pattern[-1] == ANY
        items = pattern[:-1] if open_ended else pattern
        if len(actual) < len(items) or (not open_ended and len(actual) != len(items)):
            return [f"{where}: {len(actual)} items, the page shows {len(items)}"
                    + (" or more" if open_ended else "")]
        return [problem for i, item in enumerate(items)
                for problem in json_mismatches(item, actual[i], f"{where}[{i}]")]
    if isinstance(pattern, _Shown):
        if isinstance(actual, (int, float)) and not isinstance(actual, bool) \
                and pattern.shows(actual):
            return []
        return [f"{where}: {actual!r}, the page shows {pattern.text}"]
    if pattern != actual or type(pattern) is not type(actual):
        return [f"{where}: {actual!r}, the page shows {pattern!r}"]
    return []


def shown_as_json(lines: list[str]) -> bool:
    """Whether a command's shown output is JSON (compared with ``json_mismatches``): it starts
    like JSON and reads as a pattern (``[workbench] ...`` is text)."""
    text = "\n".join(lines).strip()
    if text[:1] not in ("{", "["):
        return False
    try:
        parse_pattern(text)
    except ValueError:
        return False
    return True
