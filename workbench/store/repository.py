"""One repository per entity index: create, get, list, search, delete, with the SRW shapes.

Reads answer OpenSearch's own search-response envelopes (docs/contract.md, "HTTP conventions"); a
missing index reads as empty. Every write refreshes, so it is visible as soon as the call returns
(but a job's progress, ``update_partial``, and a ``create(refresh=False)``, whose caller refreshes
before it answers: ``api/creates.py`` does so once the entity's job is queued).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

from opensearchpy import OpenSearch
from opensearchpy.exceptions import ConflictError, NotFoundError

from workbench.errors import AlreadyExists, NotFound

# OpenSearch refuses to index a document with a longer _id.
MAX_ID_BYTES = 512


def new_id() -> str:
    return str(uuid.uuid4())


def now_iso() -> str:
    """``yyyy-MM-dd'T'HH:mm:ss.SSS'Z'`` in UTC."""
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def empty_search_response() -> dict[str, Any]:
    return {
        "took": 0,
        "timed_out": False,
        "_shards": {"total": 0, "successful": 0, "skipped": 0, "failed": 0},
        "hits": {"total": {"value": 0, "relation": "eq"}, "max_score": None, "hits": []},
    }


def _index_missing(exc: NotFoundError) -> bool:
    return exc.error == "index_not_found_exception"


def _contains(stored: Any, sent: dict[str, Any], merged: bool) -> bool:
    for key, value in sent.items():
        if not isinstance(stored, dict) or key not in stored:
            return False
        if merged and isinstance(value, dict):
            if not _contains(stored[key], value, merged):
                return False
        elif stored[key] != value:
            return False
    return True


class Repository:
    """Documents of one index, addressed by their ``id`` (which is also ``_id``)."""

    def __init__(self, client: OpenSearch, index: str) -> None:
        self.client = client
        self.index = index

    # -- writes --------------------------------------------------------------------------
    def create(self, doc: dict[str, Any], *, refresh: bool = True) -> dict[str, Any]:
        """Index a new document (``op_type=create``); answers OpenSearch's index response.
        ``refresh=False`` leaves the refresh to the caller (``refresh``), who must make it
        before answering its own caller."""
        try:
            return self.client.index(
                index=self.index, id=doc["id"], body=doc, op_type="create",
                refresh="true" if refresh else "false"
            )
        except ConflictError as exc:
            raise AlreadyExists(f"Document already exists: {doc['id']}") from exc

    def refresh(self) -> None:
        """Make what was written without a refresh searchable."""
        self.client.indices.refresh(index=self.index)

    def put(self, doc: dict[str, Any], *, seq_no: int | None = None,
            primary_term: int | None = None) -> dict[str, Any]:
        """Overwrite a document, optionally only if it is still at ``seq_no``/``primary_term``."""
        kwargs: dict[str, Any] = {}
        if seq_no is not None:
            kwargs.update(if_seq_no=seq_no, if_primary_term=primary_term)
        return self.client.index(
            index=self.index, id=doc["id"], body=doc, refresh="true", **kwargs
        )

    def holds(self, doc_id: str, fields: dict[str, Any]) -> bool:
        """Whether the document now holds exactly ``fields`` (compared as stored, in JSON).

        A conditional write (``put`` with ``seq_no``) that fails with a conflict may have been
        applied all the same: when its node died with the write on its way, the write is sent
        again (by opensearch-py to another node, or by the cluster to the replica promoted in
        the dead primary's place, or to a relocated primary) and that second attempt finds the
        document already at the next version. The caller then asks this before calling it a
        conflict."""
        return self.holding(doc_id, fields) is not None

    def holding(self, doc_id: str, fields: dict[str, Any],
                merged: bool = False) -> dict[str, Any] | None:
        """The document's hit (with its version) when it now holds ``fields``, else None; with
        ``merged`` (what ``update_partial`` wrote), objects are compared key by key, as such an
        update merges them into what was there."""
        try:
            hit = self.get_hit(doc_id)
        except NotFoundError:
            return None
        if hit is None:
            return None
        # as the client sent them and a read gives them back (tuples as lists, and so on)
        sent = json.loads(self.client.transport.serializer.dumps(fields))
        return hit if _contains(hit["_source"], sent, merged) else None

    def update_fields(self, doc_id: str, fields: dict[str, Any]) -> None:
        """Replace the given top-level fields (whole values, not merged objects)."""
        self.update_script(doc_id, "ctx._source.putAll(params.fields)", {"fields": fields})

    def update_script(self, doc_id: str, source: str, params: dict[str, Any]) -> None:
        """Run a painless ``source`` with ``params`` on the document (refreshed; retried on
        a concurrent change)."""
        self.client.update(
            index=self.index, id=doc_id, refresh="true", retry_on_conflict=3,
            body={"script": {"source": source, "params": params}},
        )

    def update_partial(self, doc_id: str, doc: dict[str, Any], *, seq_no: int,
                       primary_term: int) -> dict[str, Any]:
        """Merge ``doc`` into the document, only if it is still at ``seq_no``/``primary_term``
        (a job's progress). ``ConflictError``/``NotFoundError`` reach the caller: the document
        changed or went away.

        Not refreshed: progress is informative, so it shows in searches within the index's
        refresh interval (1 s) rather than making the job wait for a refresh of its own, which
        on a busy cluster cost a short job more than its searches (issue 22). Reads by id, and
        the job's final conditional write, see it at once."""
        answer: dict[str, Any] = self.client.update(
            index=self.index, id=doc_id, body={"doc": doc},
            if_seq_no=seq_no, if_primary_term=primary_term)
        return answer

    def update_by_query(self, body: dict[str, Any]) -> dict[str, Any]:
        """``_update_by_query`` with ``body`` (query and script), refreshed, skipping documents
        that change meanwhile; answers OpenSearch's response (``updated`` ...)."""
        answer: dict[str, Any] = self.client.update_by_query(
            index=self.index, refresh=True, conflicts="proceed", body=body)
        return answer

    def delete(self, doc_id: str) -> tuple[int, dict[str, Any]]:
        """OpenSearch's delete response and status (404 with ``result: not_found``)."""
        try:
            return 200, self.client.delete(index=self.index, id=doc_id, refresh="true")
        except NotFoundError as exc:
            if isinstance(exc.info, dict) and exc.info.get("result") == "not_found":
                return 404, exc.info
            raise NotFound(f"Document not found: {doc_id}") from exc

    def delete_by_query(self, query: dict[str, Any]) -> int:
        try:
            answer = self.client.delete_by_query(
                index=self.index, body={"query": query}, refresh=True, conflicts="proceed",
                params={"scroll_size": 1000},
            )
        except NotFoundError as exc:
            if _index_missing(exc):
                return 0
            raise
        return int(answer.get("deleted", 0))

    # -- reads ---------------------------------------------------------------------------
    def get_source(self, doc_id: str, fields: list[str] | None = None) -> dict[str, Any] | None:
        """The stored document (only ``fields`` when given), or None."""
        hit = self.get_hit(doc_id, fields)
        return hit["_source"] if hit else None

    def get_hit(self, doc_id: str, fields: list[str] | None = None) -> dict[str, Any] | None:
        """Realtime get with ``_seq_no``/``_primary_term``, or None (without asking, for an id
        longer than any document can have)."""
        if len(doc_id.encode("utf-8", "surrogatepass")) > MAX_ID_BYTES:
            return None
        params = {"_source_includes": ",".join(fields)} if fields else {}
        try:
            found = self.client.get(index=self.index, id=doc_id, params=params)
        except NotFoundError:
            return None
        return found if found.get("found") else None

    def mget_sources(self, doc_ids: list[str], fields: list[str] | None = None
                     ) -> dict[str, dict[str, Any]]:
        """id -> ``_source`` (only ``fields`` when given) of those of ``doc_ids`` that exist
        (one ``_mget``; none for no ids)."""
        if not doc_ids:
            return {}
        params = {"_source_includes": ",".join(fields)} if fields else {}
        found = self.client.mget(index=self.index, body={"ids": doc_ids}, params=params)["docs"]
        return {d["_id"]: d.get("_source") or {} for d in found if d.get("found")}

    def exists(self) -> bool:
        """Whether the index (or alias) exists."""
        return bool(self.client.indices.exists(index=self.index))

    def get_response(self, doc_id: str, source: Any = None) -> dict[str, Any]:
        """GET one entity: a search response with exactly one hit, else 404."""
        body: dict[str, Any] = {"query": {"term": {"_id": doc_id}}, "size": 1}
        if source is not None:
            body["_source"] = source
        response = self.search(body)
        if not response["hits"]["hits"]:
            raise NotFound(f"Document not found: {doc_id}")
        return response

    def list_response(self, size: int = 1000, sort_field: str = "timestamp",
                      order: str = "desc", query: dict[str, Any] | None = None,
                      source: Any = None) -> dict[str, Any]:
        body: dict[str, Any] = {
            "query": query or {"match_all": {}},
            "size": size,
            "sort": [{sort_field: {"order": order}}],
        }
        if source is not None:
            body["_source"] = source
        return self.search(body)

    def search(self, body: dict[str, Any],
               params: dict[str, str] | None = None) -> dict[str, Any]:
        """A raw search on the index (with query-string ``params`` when given); a missing index
        answers an empty response."""
        kwargs: dict[str, Any] = {"params": params} if params else {}
        try:
            response: dict[str, Any] = self.client.search(index=self.index, body=body, **kwargs)
        except NotFoundError as exc:
            if _index_missing(exc):
                return empty_search_response()
            raise
        # An index migrated by the bootstrap is an alias of a new concrete index; hits keep
        # the name clients know.
        single = not any(c in self.index for c in ",*")
        for hit in (response.get("hits") or {}).get("hits") or [] if single else []:
            if "_index" in hit:
                hit["_index"] = self.index
        return response

    def sorted_sources(self, query: dict[str, Any], fields: list[str],
                       page: int = 5_000) -> Iterator[dict[str, Any]]:
        """The ``fields`` of every document ``query`` matches, in ``id`` order, read ``page`` at
        a time with ``search_after`` (no scroll context to leak, no 10,000-hit window)."""
        after: list[Any] | None = None
        while True:
            body: dict[str, Any] = {"query": query, "size": page, "_source": fields,
                                    "sort": [{"id": "asc"}], "track_total_hits": False}
            if after is not None:
                body["search_after"] = after
            hits = self.search(body)["hits"]["hits"]
            for hit in hits:
                yield hit["_source"]
            if len(hits) < page:
                return
            after = hits[-1]["sort"]

    def ids_where(self, field: str, value: str, limit: int = 3) -> list[str]:
        """Ids of up to ``limit`` documents whose ``field`` holds ``value`` (term query)."""
        hits = self.search({"query": {"term": {field: value}}, "size": limit, "_source": False})
        return [hit["_id"] for hit in hits["hits"]["hits"]]
