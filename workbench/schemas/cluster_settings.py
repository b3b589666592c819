"""The body of ``PUT /_cluster/settings`` as far as the workbench answers it, and the rules of the
``plugins.search_relevance.*`` settings it keeps (workbench/store/plugin_settings.py stores them
and reads them typed through ``DEFINITIONS``).

The cluster does not know these keys, so the workbench recognises them and parses their values
itself, with the words OpenSearch uses for a setting of its own of the same kind (a Java boolean,
a non-negative Java int, a time value). A body is checked as the workbench always checked it:
both sections must be objects (persistent, then transient), then the workbench's keys of the
persistent section, then of the transient one, each in the order the client sent them. Every
other key is the cluster's to judge: the view forwards it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from marshmallow import ValidationError

from workbench.errors import BadRequest
from workbench.schemas.body import Step, StepSchema

PREFIX = "plugins.search_relevance."
SCOPES = ("persistent", "transient")

JAVA_INT_MAX = 2**31 - 1
JAVA_LONG_MAX = 2**63 - 1
_TIME = re.compile(r"^(-?\d+)(nanos|micros|ms|s|m|h|d)$")
_TIME_MS = {"nanos": 1e-6, "micros": 1e-3, "ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000,
            "d": 86_400_000}


# -- the values, as OpenSearch parses its own settings of each kind ------------------------------

def _bool(key: str, raw: Any) -> str:
    text = str(raw).lower() if isinstance(raw, bool) else str(raw)
    if text not in ("true", "false"):
        raise ValidationError(
            f"Failed to parse value [{raw}] as only [true] or [false] are allowed.")
    return text


def _int(key: str, raw: Any) -> str:
    """A Java int setting, as OpenSearch parses one (beyond 2^31 - 1 is a parse failure)."""
    try:
        if isinstance(raw, (bool, float)):
            raise ValueError
        value = int(str(raw))
        if value > JAVA_INT_MAX:
            raise ValueError
    except ValueError:
        raise ValidationError(f"Failed to parse value [{raw}] for setting [{key}]") from None
    if value < 0:
        raise ValidationError(f"Failed to parse value [{raw}] for setting [{key}] must be >= 0")
    return str(value)


def _time(key: str, raw: Any) -> str:
    """A time value, as OpenSearch parses one: a Java long and a unit, not negative."""
    text = str(raw).strip()
    match = _TIME.match(text)
    if not match:
        raise ValidationError(
            f"failed to parse setting [{key}] with value [{raw}] as a time value: "
            "unit is missing or unrecognized"
        )
    digits = match.group(1).lstrip("-")
    if len(digits) > 19 or int(digits) > JAVA_LONG_MAX:
        raise ValidationError(
            f"failed to parse [{text}], fractional time values are not supported")
    if int(match.group(1)) < 0:
        raise ValidationError(
            f"failed to parse setting [{key}] with value [{raw}] as a time value: "
            "negative durations are not supported")
    return text


def time_ms(text: str) -> float:
    """``60m`` -> 3600000.0"""
    match = _TIME.match(text)
    if not match:
        raise ValueError(text)
    return int(match.group(1)) * _TIME_MS[match.group(2)]


@dataclass(frozen=True)
class Definition:
    """One setting: its default (as stored, a string), how a value given is checked and stored
    (``normalise(full_key, raw)``), and how a stored value is read (``typed``)."""

    default: str
    normalise: Callable[[str, Any], str]
    typed: Callable[[str], Any]


def _true(value: str) -> bool:
    return value == "true"


DEFINITIONS: dict[str, Definition] = {
    "workbench_enabled": Definition("true", _bool, _true),
    "stats_enabled": Definition("true", _bool, _true),
    "query_set.maximum": Definition("1000", _int, int),
    "scheduled_experiments_enabled": Definition("true", _bool, _true),
    "scheduled_experiments_timeout": Definition("60m", _time, time_ms),
    "scheduled_experiments_minimum_interval": Definition("1s", _time, time_ms),
}


# -- the keys ------------------------------------------------------------------------------------

def ours(key: str) -> bool:
    """Does a flat settings key (or reset wildcard) address the workbench's settings?"""
    return key.startswith(PREFIX) or key == PREFIX.rstrip(".")


def reaches_ours(key: str) -> bool:
    """A reset wildcard broader than our prefix (``plugins.*``, ``*``) also resets ours."""
    return key.endswith("*") and PREFIX.startswith(key[:-1])


def flatten(tree: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """Nested sections as flat keys (``{"a": {"b": 1}}`` -> ``{"a.b": 1}``); an empty object
    stays a value."""
    out: dict[str, Any] = {}
    for key, value in tree.items():
        if isinstance(value, dict) and value:
            out.update(flatten(value, f"{prefix}{key}."))
        else:
            out[f"{prefix}{key}"] = value
    return out


def section_changes(section: dict[str, Any], scope: str) -> dict[str, str | None]:
    """The workbench's keys of one flat section, checked and normalised in the order given;
    ``None`` resets a key, and a wildcard reaching the prefix resets every key under it."""
    mine = {(PREFIX + "*" if reaches_ours(key) else key): raw for key, raw in section.items()
            if ours(key) or reaches_ours(key)}
    out: dict[str, str | None] = {}
    for key, raw in mine.items():
        if key.endswith("*"):
            if raw is not None:
                raise ValidationError(f"{scope} setting [{key}], not recognized")
            out[key] = None
            continue
        definition = DEFINITIONS.get(key[len(PREFIX):])
        if definition is None:
            raise ValidationError(f"{scope} setting [{key}], not recognized")
        out[key] = None if raw is None else definition.normalise(key, raw)
    return out


# -- the body ------------------------------------------------------------------------------------

class _Section(Step):
    """``persistent`` or ``transient``: an object (or absent, or null), loaded flat."""

    def check(self, value: Any) -> dict[str, Any]:
        if value is not None and not isinstance(value, dict):
            # the cluster itself answers 500 (a ClassCastException) for these
            raise BadRequest(f"Failed to load settings from [{json.dumps(value)}]",
                             error_type="settings_exception")
        return flatten(value or {})


class _Changes(Step):
    """The workbench's keys of both sections, by scope; not a field of the body."""

    def check(self, value: Any) -> dict[str, dict[str, str | None]]:
        return {scope: section_changes(self.loaded[scope], scope) for scope in SCOPES}


class ClusterSettingsSchema(StepSchema):
    """``PUT /_cluster/settings``: ``persistent`` and ``transient`` loaded flat (every key, the
    cluster's too), and ``changes``: the workbench's own keys per scope, checked (empty for
    both when the body names none of them)."""

    persistent = _Section()
    transient = _Section()
    changes = _Changes(data_key="_changes")
