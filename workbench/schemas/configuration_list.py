"""A ``searchConfigurationList`` that may name remote search configurations (issue 47,
docs/contract.md "Remote search configurations in experiments and judgments"): each entry is an
id (a local search configuration first, else a remote one) or an object ``{"type": "local" |
"remote", "id": ...}``. The list is stored as the plain ids (Dashboards reads strings), and the
ids that are remote are stored beside it as ``remoteSearchConfigurationIds``.

Whether an id exists is asked of the layers above through the two callables the schemas get
in their rules; this module only reads the entries and words the refusals."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from marshmallow import ValidationError

LOCAL, REMOTE = "local", "remote"
ENTRY_KEYS = ("type", "id")
#: the label of a remote configuration in messages, as ``SearchConfiguration`` is a local one's
REMOTE_LABEL = "RemoteSearchConfiguration"

Exists = Callable[[str], bool]


class ConfigurationIds(list[str]):
    """The ids of a ``searchConfigurationList`` in order (what is stored), with ``remote``: the
    ids among them that name remote search configurations, in the same order."""

    def __init__(self, ids: Iterable[str] = (), remote: Iterable[str] = ()) -> None:
        super().__init__(ids)
        self.remote: list[str] = list(dict.fromkeys(remote))


def entry_id(entry: Any) -> Any:
    """The id an entry names (an object's ``id``; anything else is the entry itself)."""
    return entry.get("id") if isinstance(entry, dict) else entry


def _id(value: Any) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ValidationError("SearchConfiguration ID cannot be null or empty")
    return value


def _typed(entry: dict[str, Any]) -> tuple[str | None, str]:
    unknown = sorted(str(k) for k in entry if k not in ENTRY_KEYS)
    if unknown:
        raise ValidationError("searchConfigurationList: an entry object takes only type and id, "
                              f"unknown: [{', '.join(unknown)}]")
    kind = entry.get("type")
    if kind not in (LOCAL, REMOTE):
        raise ValidationError("searchConfigurationList: an entry's type must be local or "
                              f"remote, got [{kind}]")
    return kind, _id(entry.get("id"))


def resolve(entries: list[Any], local: Exists, remote: Exists) -> ConfigurationIds:
    """The ids of ``entries`` and which are remote; a ``ValidationError`` for the first entry
    that is malformed or names nothing: ``SearchConfiguration [id] does not exist`` (an id, or
    a local one), ``RemoteSearchConfiguration [id] does not exist`` (a remote one)."""
    ids: list[str] = []
    remote_ids: list[str] = []
    for entry in entries:
        kind, config_id = _typed(entry) if isinstance(entry, dict) else (None, _id(entry))
        if kind != REMOTE and local(config_id):
            ids.append(config_id)
            continue
        if kind != LOCAL and remote(config_id):
            ids.append(config_id)
            remote_ids.append(config_id)
            continue
        label = REMOTE_LABEL if kind == REMOTE else "SearchConfiguration"
        raise ValidationError(f"{label} [{config_id}] does not exist")
    return ConfigurationIds(ids, remote_ids)


def local_only_reason(kind: str, config_id: str) -> str:
    """The refusal of a remote configuration by what searches local ones only (``kind``:
    ``HYBRID_OPTIMIZER experiments``, ``A/B tests``)."""
    return (f"{kind} search local search configurations only: [{config_id}] is a remote "
            "search configuration")


def local_only(kind: str, ids: ConfigurationIds) -> None:
    """A 400 naming the first remote configuration, for what searches local ones only."""
    if ids.remote:
        raise ValidationError(local_only_reason(kind, ids.remote[0]))
