"""The ``plugins.search_relevance.*`` cluster settings, owned by the workbench.

The cluster does not know these keys (no plugin), so the workbench keeps them in one document of
its own index: persistent across restarts, shared by every API process and worker, read in real
time (a GET by id) so that a change made through one process is seen by all at once.
"""

from __future__ import annotations

import base64
import os
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from opensearchpy import OpenSearch
from opensearchpy.exceptions import ConflictError, NotFoundError

from workbench.errors import BadRequest
from workbench.store.identity import as_service
from workbench.store.indices import SETTINGS_INDEX

PREFIX = "plugins.search_relevance."
DOC_ID = "cluster"

JAVA_INT_MAX = 2**31 - 1
JAVA_LONG_MAX = 2**63 - 1
_TIME = re.compile(r"^(-?\d+)(nanos|micros|ms|s|m|h|d)$")
_TIME_MS = {"nanos": 1e-6, "micros": 1e-3, "ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000,
            "d": 86_400_000}


def _bool(key: str, raw: Any) -> str:
    text = str(raw).lower() if isinstance(raw, bool) else str(raw)
    if text not in ("true", "false"):
        raise BadRequest(f"Failed to parse value [{raw}] as only [true] or [false] are allowed.")
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
        raise BadRequest(f"Failed to parse value [{raw}] for setting [{key}]") from None
    if value < 0:
        raise BadRequest(f"Failed to parse value [{raw}] for setting [{key}] must be >= 0")
    return str(value)


def _time(key: str, raw: Any) -> str:
    """A time value, as OpenSearch parses one: a Java long and a unit, not negative."""
    text = str(raw).strip()
    match = _TIME.match(text)
    if not match:
        raise BadRequest(
            f"failed to parse setting [{key}] with value [{raw}] as a time value: "
            "unit is missing or unrecognized"
        )
    digits = match.group(1).lstrip("-")
    if len(digits) > 19 or int(digits) > JAVA_LONG_MAX:
        raise BadRequest(f"failed to parse [{text}], fractional time values are not supported")
    if int(match.group(1)) < 0:
        raise BadRequest(f"failed to parse setting [{key}] with value [{raw}] as a time value: "
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
    default: str
    normalise: Callable[[str, Any], str]
    typed: Callable[[str], Any]


DEFINITIONS: dict[str, Definition] = {
    "workbench_enabled": Definition("true", _bool, lambda v: v == "true"),
    "stats_enabled": Definition("true", _bool, lambda v: v == "true"),
    "query_set.maximum": Definition("1000", _int, int),
    "scheduled_experiments_enabled": Definition("true", _bool, lambda v: v == "true"),
    "scheduled_experiments_timeout": Definition("60m", _time, time_ms),
    "scheduled_experiments_minimum_interval": Definition("1s", _time, time_ms),
}


@dataclass
class Stored:
    """The settings document: explicitly set values (as strings) and the workbench's node id."""

    persistent: dict[str, str] = field(default_factory=dict)
    transient: dict[str, str] = field(default_factory=dict)
    node_id: str = ""
    seq_no: int | None = None
    primary_term: int | None = None

    def raw(self, short_key: str) -> str:
        """Transient wins over persistent, which wins over the default."""
        full = PREFIX + short_key
        if full in self.transient:
            return self.transient[full]
        return self.persistent.get(full, DEFINITIONS[short_key].default)

    def value(self, short_key: str) -> Any:
        return DEFINITIONS[short_key].typed(self.raw(short_key))


def ours(key: str) -> bool:
    """Does a flat settings key (or reset wildcard) address the workbench's settings?"""
    return key.startswith(PREFIX) or key == PREFIX.rstrip(".")


def new_node_id() -> str:
    """22 URL-safe characters, the shape of an OpenSearch node id."""
    return base64.urlsafe_b64encode(os.urandom(16)).decode()[:22]


class PluginSettings:
    """Read and change the settings document."""

    def __init__(self, client: OpenSearch) -> None:
        self.client = client

    def load(self) -> Stored:
        """The settings now (an internal read, made as the service identity)."""
        with as_service(self.client):
            try:
                found = self.client.get(index=SETTINGS_INDEX, id=DOC_ID)
            except NotFoundError:
                return self._create()
        src = found["_source"]
        return Stored(src.get("persistent", {}), src.get("transient", {}), src["node_id"],
                      found["_seq_no"], found["_primary_term"])

    def _create(self) -> Stored:
        stored = Stored(node_id=new_node_id())
        try:
            with as_service(self.client):
                self.client.index(index=SETTINGS_INDEX, id=DOC_ID, op_type="create",
                                  refresh="true", body={"persistent": {}, "transient": {},
                                                        "node_id": stored.node_id})
        except ConflictError:
            return self.load()  # another process created it first
        return self.load()

    @staticmethod
    def validate(section: dict[str, Any], scope: str) -> dict[str, str | None]:
        """Check keys and values of one section; None means reset to default."""
        out: dict[str, str | None] = {}
        for key, raw in section.items():
            if key.endswith("*"):
                if raw is not None:
                    raise BadRequest(f"{scope} setting [{key}], not recognized")
                out[key] = None
                continue
            short = key[len(PREFIX):]
            definition = DEFINITIONS.get(short)
            if definition is None:
                raise BadRequest(f"{scope} setting [{key}], not recognized")
            out[key] = None if raw is None else definition.normalise(key, raw)
        return out

    def apply(self, persistent: dict[str, str | None],
              transient: dict[str, str | None]) -> tuple[Stored, Stored]:
        """Write validated changes; returns (before, after). Retries on concurrent writers."""
        for _ in range(10):
            before = self.load()
            after = Stored(dict(before.persistent), dict(before.transient), before.node_id)
            for target, changes in ((after.persistent, persistent),
                                    (after.transient, transient)):
                for key, value in changes.items():
                    if key.endswith("*"):
                        prefix = key[:-1]
                        for existing in [k for k in target if k.startswith(prefix)]:
                            del target[existing]
                    elif value is None:
                        target.pop(key, None)
                    else:
                        target[key] = value
            try:
                self.client.index(
                    index=SETTINGS_INDEX, id=DOC_ID, refresh="true",
                    if_seq_no=before.seq_no, if_primary_term=before.primary_term,
                    body={"persistent": after.persistent, "transient": after.transient,
                          "node_id": after.node_id},
                )
            except ConflictError:
                continue
            return before, after
        raise BadRequest("settings changed concurrently; try again")
