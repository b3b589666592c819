"""Upgrading a system index whose mapping cannot change in place.

OpenSearch cannot make a field searchable once it was mapped with ``"index": false`` (the
judgment index's ``judgmentRatings.query`` before this version). Such an index is copied into a
new concrete index with the current mapping, and its name becomes an alias of the copy, so every
reader and writer (the workbench, Dashboards, scripts) keeps using the same name:

1. writes to the old index are blocked (``index.blocks.write``), so nothing changes under the copy;
2. the new index ``<name>-<hash of the mapping>`` is created (every process picks the same name);
3. ``_reindex`` copies every document, keeping ids (running it again overwrites the same ids);
4. when the copy holds as many documents as the old index, one atomic ``_aliases`` request adds
   the alias and deletes the old index: readers never see a missing or half-filled index.

Several processes may run this at once: each step is idempotent, and only one swap can succeed
(the others find the old index gone). A process interrupted halfway leaves the old index whole
(read-only) and the next start finishes the job; nothing is deleted before the copy is complete.
"""

from __future__ import annotations

import hashlib
import json
import logging
from typing import Any

from opensearchpy import OpenSearch
from opensearchpy.exceptions import RequestError, TransportError

log = logging.getLogger(__name__)

#: documents per ``_reindex`` batch: a judgment list can be tens of megabytes
REINDEX_BATCH = 20
REINDEX_TIMEOUT = 3600


class MigrationIncomplete(Exception):
    """The copy does not (yet) hold every document; the old index stays as it is."""


def unsearchable_fields(current: dict[str, Any], wanted: dict[str, Any],
                        prefix: str = "") -> list[str]:
    """Fields ``wanted`` indexes that ``current`` maps with ``"index": false``."""
    found = []
    for name, field in (wanted.get("properties") or {}).items():
        have = (current.get("properties") or {}).get(name)
        if not isinstance(have, dict):
            continue
        if have.get("index") is False and field.get("index", True) is not False:
            found.append(prefix + name)
        found.extend(unsearchable_fields(have, field, f"{prefix}{name}."))
    return found


def target_name(name: str, body: dict[str, Any]) -> str:
    """The concrete index for ``body``'s mapping: the same in every process."""
    digest = hashlib.sha1(json.dumps(body.get("mappings"), sort_keys=True).encode()).hexdigest()
    return f"{name}-{digest[:8]}"


def upgrade(client: OpenSearch, body: dict[str, Any], name: str) -> bool:
    """Copy the index (or alias) ``name`` into one with ``body``'s mapping if a field it should
    search is not indexed. True when this call finished a migration. A failure is logged, not
    raised: the index still serves reads, and the next start tries again."""
    try:
        mappings = client.indices.get_mapping(index=name)
    except TransportError as exc:
        log.warning("could not read the mapping of %s: %s", name, exc)
        return False
    if len(mappings) != 1:
        return False
    ((concrete, found),) = mappings.items()
    target = target_name(name, body)
    stale = unsearchable_fields(found.get("mappings") or {}, body.get("mappings") or {})
    if not stale:
        if concrete == target:
            _unblock(client, target)
        return False
    log.warning("index %s maps %s as not searchable; copying it into %s (writes to it are "
                "refused until the copy is done)", concrete, ", ".join(stale), target)
    try:
        _copy_and_swap(client, body, name, concrete, target)
    except (MigrationIncomplete, TransportError) as exc:
        if _alias_target(client, name) == target:  # another process finished it meanwhile
            _unblock(client, target)
            return False
        log.error("migration of index %s into %s not finished (%s); the old index stays "
                  "read-only and whole, and the next start continues", concrete, target, exc)
        return False
    _unblock(client, target)
    log.info("index %s migrated: %s is now an alias of %s", concrete, name, target)
    return True


def _unblock(client: OpenSearch, index: str) -> None:
    """Lift a write block from the live copy. A process that raced another's swap may have
    set it through the alias (the old name resolved to the copy by then)."""
    try:
        found = client.indices.get_settings(index=index, name="index.blocks.write",
                                            flat_settings=True)
        if any(str(v.get("settings", {}).get("index.blocks.write")).lower() == "true"
               for v in found.values()):
            client.indices.put_settings(index=index, body={"index.blocks.write": None})
    except TransportError as exc:
        log.warning("could not check the write block of %s: %s", index, exc)


def _copy_and_swap(client: OpenSearch, body: dict[str, Any], name: str, concrete: str,
                   target: str) -> None:
    client.indices.put_settings(index=concrete, body={"index.blocks.write": True})
    try:
        client.indices.create(index=target, body=body)
    except RequestError as exc:
        if exc.error not in ("resource_already_exists_exception",
                             "index_already_exists_exception"):
            raise
    client.indices.refresh(index=concrete)
    answer = client.reindex(
        body={"source": {"index": concrete, "size": REINDEX_BATCH},
              "dest": {"index": target}, "conflicts": "proceed"},
        params={"wait_for_completion": "true", "refresh": "true"},
        request_timeout=REINDEX_TIMEOUT)
    if answer.get("failures"):
        raise MigrationIncomplete(f"_reindex failures: {answer['failures'][:1]}")
    have = client.count(index=concrete)["count"]
    copied = client.count(index=target)["count"]
    if copied != have:
        raise MigrationIncomplete(f"{target} holds {copied} documents, {concrete} {have}")
    try:
        client.indices.update_aliases(body={"actions": [
            {"add": {"index": target, "alias": name}},
            {"remove_index": {"index": concrete}},
        ]})
    except TransportError:
        if _alias_target(client, name) == target:  # another process swapped first
            return
        raise


def _alias_target(client: OpenSearch, name: str) -> str | None:
    try:
        found = client.indices.get_alias(name=name)
    except TransportError:
        return None
    return next(iter(found), None) if len(found) == 1 else None
