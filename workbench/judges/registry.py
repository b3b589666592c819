"""Judges by name: the built-in ones, and any installed package's, found through the Python
entry point group ``workbench.judges``.

A third-party judge is a package that declares, in its ``pyproject.toml``::

    [project.entry-points."workbench.judges"]
    exact_title = "my_judges:build"

where ``build(setup: workbench.judges.Setup)`` returns an object with ``name``,
``needs_reference`` and ``judge(query, hits) -> Judged`` (``workbench.judges.base.Judge``).
Installed next to the workbench, it is usable by that name in ``_evaluate`` and in
``REFERENCE_JUDGMENT`` jobs, like ``token_overlap``. Entry points are read once per process; a
built-in name cannot be taken over.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from functools import cache
from importlib.metadata import entry_points
from typing import Any

from workbench.judges import llm, semantic, token_overlap
from workbench.judges.base import Judge, JudgeFactory, OptionError, Setup

log = logging.getLogger(__name__)

GROUP = "workbench.judges"

BUILTIN: Mapping[str, JudgeFactory] = {
    llm.NAME: llm.build,
    token_overlap.NAME: token_overlap.build,
    semantic.NAME: semantic.build,
}


class UnknownJudge(ValueError):
    def __init__(self, name: Any, choices: list[str] | None = None) -> None:
        known = names() if choices is None else choices
        super().__init__(f"Unknown judge [{name}]; use one of: {', '.join(known)}")


class BrokenJudge(ValueError):
    """An installed judge's package could not be loaded or built."""


@cache
def _installed() -> dict[str, Any]:
    """The entry points of the group by name (loaded lazily by ``factory``)."""
    found: dict[str, Any] = {}
    for point in entry_points(group=GROUP):
        if point.name in BUILTIN:
            log.warning("judge entry point %r (%s) is ignored: the name is built in",
                        point.name, point.value)
            continue
        found.setdefault(point.name, point)
    return found


def names() -> list[str]:
    """Built-in judges first, then installed ones by name."""
    return [*BUILTIN, *sorted(_installed())]


def factory(name: Any) -> JudgeFactory:
    if not isinstance(name, str):
        raise UnknownJudge(name)
    if name in BUILTIN:
        return BUILTIN[name]
    point = _installed().get(name)
    if point is None:
        raise UnknownJudge(name)
    try:
        loaded = point.load()
    except Exception as exc:  # any import failure of a plug-in is reported
        raise BrokenJudge(f"judge [{name}] ({point.value}) could not be loaded: "
                          f"{type(exc).__name__}: {exc}") from exc
    if not callable(loaded):
        raise BrokenJudge(f"judge [{name}] ({point.value}) is not callable")
    return loaded


def create(name: Any, setup: Setup) -> Judge:
    """The judge ``name`` built with ``setup``. Raises ``UnknownJudge``, ``OptionError`` (an
    option it refuses) or ``BrokenJudge`` (a plug-in that fails to load or to build)."""
    make = factory(name)
    try:
        judge = make(setup)
    except (OptionError, UnknownJudge):
        raise
    except Exception as exc:  # a plug-in's own failure is reported, not a 500
        if name in BUILTIN:
            raise
        raise BrokenJudge(f"judge [{name}] could not be built: "
                          f"{type(exc).__name__}: {exc}") from exc
    for attribute in ("name", "needs_reference", "judge"):
        if not hasattr(judge, attribute):
            raise BrokenJudge(f"judge [{name}] has no {attribute!r}: it must provide name, "
                              "needs_reference and judge(query, hits)")
    return judge
