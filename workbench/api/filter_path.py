"""OpenSearch's ``filter_path`` response filtering, for answers the workbench builds itself.

Patterns are comma-separated dotted paths; ``*`` matches within one key, ``**`` any number of
levels, and a leading ``-`` excludes. Lists are filtered element by element.
"""

from __future__ import annotations

import fnmatch
from typing import Any

_DROP = object()


def apply(body: Any, filter_path: str | None) -> Any:
    """The filtered body; ``{}`` when nothing matches (as OpenSearch answers)."""
    if not filter_path:
        return body
    patterns = [p.strip() for p in filter_path.split(",") if p.strip()]
    includes = [p.split(".") for p in patterns if not p.startswith("-")]
    excludes = [p[1:].split(".") for p in patterns if p.startswith("-")]
    result = _include(body, includes) if includes else body
    if result is _DROP:
        return {}
    for pattern in excludes:
        result = _exclude(result, pattern)
    return result


def _match(key: str, part: str) -> bool:
    return part == "**" or fnmatch.fnmatchcase(key, part)


def _include(node: Any, patterns: list[list[str]]) -> Any:
    if any(not p for p in patterns):
        return node  # a pattern ended here: keep the whole subtree
    if isinstance(node, list):
        kept = [v for v in (_include(item, patterns) for item in node) if v is not _DROP]
        return kept if kept else _DROP
    if not isinstance(node, dict):
        return _DROP
    out: dict[str, Any] = {}
    for key, value in node.items():
        rest: list[list[str]] = []
        for pattern in patterns:
            head = pattern[0]
            if head == "**":
                rest.append(pattern)  # ** may match more levels
                if len(pattern) > 1 and _match(key, pattern[1]):
                    rest.append(pattern[2:])
                elif len(pattern) == 1:
                    rest.append([])
            elif _match(key, head):
                rest.append(pattern[1:])
        if rest:
            kept = _include(value, rest)
            if kept is not _DROP:
                out[key] = kept
    return out if out else _DROP


def _exclude(node: Any, pattern: list[str]) -> Any:
    if isinstance(node, list):
        return [_exclude(item, pattern) for item in node]
    if not isinstance(node, dict) or not pattern:
        return node
    head, rest = pattern[0], pattern[1:]
    out = {}
    for key, value in node.items():
        if _match(key, head):
            if not rest:
                continue
            value = _exclude(value, rest)
        out[key] = value
    return out
