"""The ``plugins.search_relevance.*`` cluster settings, owned by the workbench.

The cluster does not know these keys (no plugin), so the workbench keeps them in one document of
its own index: persistent across restarts, shared by every API process and worker, read in real
time (a GET by id) so that a change made through one process is seen by all at once. What each
setting is (its default, its parse, its typed read) is a rule of the request body:
workbench/schemas/cluster_settings.py.
"""

from __future__ import annotations

import base64
import os
import time
from dataclasses import dataclass, field
from typing import Any

from opensearchpy import OpenSearch
from opensearchpy.exceptions import ConflictError, NotFoundError

from workbench.errors import BadRequest
from workbench.schemas.cluster_settings import DEFINITIONS, PREFIX
from workbench.store.identity import as_service
from workbench.store.indices import SETTINGS_INDEX

DOC_ID = "cluster"


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


def new_node_id() -> str:
    """22 URL-safe characters, the shape of an OpenSearch node id."""
    return base64.urlsafe_b64encode(os.urandom(16)).decode()[:22]


#: the longest a process keeps the settings without reading them (a change Redis could not
#: announce, or one written to the index by hand, is seen this late)
MAX_AGE_SECONDS = 5.0


class PluginSettings:
    """Read and change the settings document."""

    def __init__(self, client: OpenSearch) -> None:
        self.client = client
        self._kept: tuple[bytes, float, Stored] | None = None

    def current(self, generation: bytes | None) -> Stored:
        """The settings as of ``generation`` (``store/generation.py``): kept from an earlier
        read under the same number for at most ``MAX_AGE_SECONDS``, else read now."""
        found = self.kept(generation)
        if found is not None:
            return found
        now = time.monotonic()
        stored = self.load()
        if generation is not None:
            self._kept = (generation, now, stored)
        return stored

    def kept(self, generation: bytes | None) -> Stored | None:
        """The settings kept under ``generation`` and still young enough, else None (no read)."""
        kept = self._kept
        if generation is not None and kept is not None and kept[0] == generation \
                and time.monotonic() - kept[1] < MAX_AGE_SECONDS:
            return kept[2]
        return None

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

    def apply(self, persistent: dict[str, str | None],
              transient: dict[str, str | None]) -> tuple[Stored, Stored]:
        """Write checked changes (schemas/cluster_settings.section_changes); returns (before,
        after). Retries on concurrent writers."""
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
