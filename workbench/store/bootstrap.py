"""Create the workbench's indices from ``index_mappings/*.json``, idempotently, and bring
indices created by earlier versions up to date.

Safe when several processes start at once: index creation is atomic in the cluster, and an
``resource_already_exists_exception`` from a racing process counts as success. Upgrades:
fields a mapping file gained are added to the existing index (``add_fields``), dynamic settings
are raised in place (``raise_settings``); a field that became searchable needs a copy of the
index (``store.migrate``).
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from opensearchpy import OpenSearch
from opensearchpy.exceptions import RequestError, TransportError

from workbench.store import migrate

log = logging.getLogger(__name__)

# Dynamic limits a mapping file may raise: an index created by an earlier version, with a lower
# value, is brought up to the file's (``index.mapping.nested_objects.limit`` grew so that big
# judgment lists can be stored).
RAISED_SETTINGS = ("index.mapping.nested_objects.limit",)


@dataclass(frozen=True)
class IndexSpec:
    """One index: its name and the body that creates it (settings + mappings)."""

    name: str
    body: dict[str, Any]


def load_specs(folder: str | Path) -> list[IndexSpec]:
    """Every ``*.json`` directly in ``folder`` (system indices; ``ubi/`` is separate)."""
    specs = []
    for path in sorted(Path(folder).glob("*.json")):
        data = json.loads(path.read_text())
        specs.append(IndexSpec(data["index"], {k: data[k] for k in ("settings", "mappings")}))
    return specs


def load_spec(folder: str | Path, relative: str) -> IndexSpec:
    """One mapping file, e.g. ``ubi/ubi_queries.json``."""
    data = json.loads((Path(folder) / relative).read_text())
    return IndexSpec(data["index"], {k: data[k] for k in ("settings", "mappings")})


def ensure_index(client: OpenSearch, spec: IndexSpec, name: str | None = None) -> bool:
    """Create the index unless it exists. True when this call created it."""
    index = name or spec.name
    # Created without asking first: a caller who may not create the index then gets the
    # cluster's 403 with its reason (an existence check by HEAD has no body), and one request
    # does instead of two.
    # A 400 is read from the answer rather than raised, so that opensearch-py does not log a
    # WARNING for the usual case, an index that already exists.
    answer = client.indices.create(index=index, body=spec.body, ignore=400)
    error = answer.get("error") if isinstance(answer, dict) else None
    if error:
        kind = error.get("type") if isinstance(error, dict) else str(error)
        if kind in ("resource_already_exists_exception", "index_already_exists_exception",
                    "invalid_index_name_exception") and _exists(client, index):
            migrate.upgrade(client, spec.body, index)
            add_fields(client, spec, index)
            raise_settings(client, spec, index)
            return False
        raise RequestError(400, str(kind), answer)
    log.info("created index %s", index)
    return True


def _exists(client: OpenSearch, index: str) -> bool:
    """The name is taken by an index or by an alias (a migrated index)."""
    return bool(client.indices.exists(index=index))


def ensure_indices(client: OpenSearch, folder: str | Path) -> list[str]:
    """Create every missing system index; returns the names created by this call."""
    return [spec.name for spec in load_specs(folder) if ensure_index(client, spec)]


def missing_fields(current: dict[str, Any], wanted: dict[str, Any]) -> dict[str, Any]:
    """The part of ``wanted``'s ``properties`` that ``current`` lacks, as a put-mapping body's
    ``properties``: a missing field whole, and the missing fields inside an object or nested
    field that is there (with its ``type``, which a put-mapping of a nested field needs)."""
    missing: dict[str, Any] = {}
    have = current.get("properties") or {}
    for name, field in (wanted.get("properties") or {}).items():
        if name not in have:
            missing[name] = field
        elif isinstance(field, dict) and isinstance(have[name], dict) and "properties" in field:
            inner = missing_fields(have[name], field)
            if inner:
                missing[name] = {**({"type": field["type"]} if "type" in field else {}),
                                 "properties": inner}
    return missing


def add_fields(client: OpenSearch, spec: IndexSpec, index: str) -> None:
    """Map the fields the spec declares that an existing index lacks (a field added to a
    mapping file, e.g. those the plugin's generated query sets will write), before anything
    writes them: a dynamic mapping would make a string ``text``, which no later mapping can
    change. A field already there is left as it is. Each field is its own put-mapping, so one
    the index cannot take (logged, not raised) keeps none of the others out."""
    try:
        mappings = client.indices.get_mapping(index=index)
    except TransportError as exc:
        log.warning("could not read the mapping of %s: %s", index, exc)
        return
    for name, found in mappings.items():
        missing = missing_fields(found.get("mappings") or {}, spec.body.get("mappings") or {})
        for field, mapping in missing.items():
            try:
                client.indices.put_mapping(index=name, body={"properties": {field: mapping}})
                log.info("index %s: mapped the new field %s", name, field)
            except TransportError as exc:
                log.warning("index %s: could not map the new field %s: %s", name, field, exc)


def _flat(settings: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    flat: dict[str, Any] = {}
    for key, value in settings.items():
        if isinstance(value, dict):
            flat.update(_flat(value, f"{prefix}{key}."))
        else:
            flat[prefix + key] = value
    return flat


def raise_settings(client: OpenSearch, spec: IndexSpec, index: str) -> None:
    """Apply the spec's ``RAISED_SETTINGS`` to an existing index whose values are lower. One
    settings read when nothing is to do; a failure is logged, not raised (the index still
    works, only below the new limit)."""
    wanted = {key: int(value) for key, value in _flat(spec.body.get("settings") or {}).items()
              if key in RAISED_SETTINGS}
    if not wanted:
        return
    try:
        answer = client.indices.get_settings(index=index, name=",".join(wanted),
                                             include_defaults=True, flat_settings=True)
        for name, found in answer.items():
            current = {**found.get("defaults", {}), **found.get("settings", {})}
            lower = {key: value for key, value in wanted.items()
                     if int(current.get(key, 0)) < value}
            if lower:
                client.indices.put_settings(index=name, body=lower)
                log.info("raised settings of index %s: %s", name, lower)
    except TransportError as exc:
        log.warning("could not check the settings of index %s: %s", index, exc)
