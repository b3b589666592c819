"""Models registered at run time: one document per model in ``.plugins-search-relevance-models``.

Read on use with a realtime GET, so a model added, changed or deleted through any API process is
seen at once by every other process and by workers that were already running. A document holds
the API key only as a Fernet token (``apiKeyEncrypted``), which no read here ever returns to a
client: ``public`` drops it.
"""

from __future__ import annotations

from typing import Any

from opensearchpy import OpenSearch
from opensearchpy.exceptions import ConflictError, NotFoundError

from workbench.errors import Conflict
from workbench.store.indices import MODELS_INDEX
from workbench.store.repository import Repository

SECRET_FIELD = "apiKeyEncrypted"
MAX_LISTED = 1000


def public(doc: dict[str, Any]) -> dict[str, Any]:
    """A stored model as clients see it: no token, ``apiKeySet`` instead."""
    out = {k: v for k, v in doc.items() if k != SECRET_FIELD}
    out["apiKeySet"] = bool(doc.get(SECRET_FIELD)) or bool(doc.get("apiKeyEnv"))
    out["source"] = "api"
    return out


class ModelStore:
    """The models index, through the client's current identity (the caller while answering a
    request, the service in a job)."""

    def __init__(self, client: OpenSearch) -> None:
        self.repo = Repository(client, MODELS_INDEX)

    def get(self, model_id: str) -> tuple[dict[str, Any], tuple[int, int]] | None:
        """The stored document and its (seq_no, primary_term), or None."""
        try:
            hit = self.repo.get_hit(model_id)
        except NotFoundError:
            return None
        if hit is None:
            return None
        return hit["_source"], (int(hit["_seq_no"]), int(hit["_primary_term"]))

    def all(self) -> list[dict[str, Any]]:
        """Every stored model (secrets included: callers must pass them through ``public``),
        by name."""
        answer = self.repo.search({"query": {"match_all": {}}, "size": MAX_LISTED,
                                   "sort": [{"name": {"order": "asc"}}, {"id": "asc"}]})
        return [hit["_source"] for hit in answer["hits"]["hits"]]

    def create(self, doc: dict[str, Any]) -> None:
        self.repo.create(doc)

    def replace(self, doc: dict[str, Any], version: tuple[int, int]) -> None:
        """Overwrite, only if nobody changed the model since it was read (else a 409)."""
        try:
            self.repo.put(doc, seq_no=version[0], primary_term=version[1])
        except ConflictError as exc:
            raise Conflict(f"model [{doc['id']}] was changed concurrently; read it and try "
                           "again", error_type="version_conflict_engine_exception") from exc

    def delete(self, model_id: str) -> tuple[int, dict[str, Any]]:
        return self.repo.delete(model_id)
