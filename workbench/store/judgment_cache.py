"""The LLM judgment cache (``.plugins-search-relevance-judgment-cache``, docs/contract.md, "Judgment
cache").

A rating is keyed by everything that shapes the LLM's answer: the query (with its custom
fields), the document, the context fields (or the vector fields left out of it), the model, and
the prompt template with the rating type. Later jobs read it instead of paying for the same call
twice.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from opensearchpy import OpenSearch
from opensearchpy.helpers import bulk

from workbench.store.indices import CACHE_INDEX
from workbench.store.repository import now_iso


def prompt_code(template: str, rating_type: str) -> str:
    """SHA-256 of ``<promptTemplate>::<ratingType>`` (the intermediate plugin's hash)."""
    return hashlib.sha256(f"{template}::{rating_type}".encode()).hexdigest()


@dataclass(frozen=True)
class CacheKey:
    query: str
    document: str  # <index>::<docId>
    context_fields: tuple[str, ...]
    model_id: str
    prompt: str
    #: vector fields left out of the document (store/vector_fields.py); part of the key only
    #: when there are some, so the keys of every other rating are those written before
    left_out: tuple[str, ...] = ()

    @property
    def doc_id(self) -> str:
        parts: list[Any] = [self.query, self.document, sorted(self.context_fields),
                            self.model_id, self.prompt]
        if self.left_out:
            parts.append(sorted(self.left_out))
        raw = json.dumps(parts, ensure_ascii=False)
        return hashlib.sha256(raw.encode()).hexdigest()


class JudgmentCache:
    def __init__(self, client: OpenSearch) -> None:
        self.client = client

    def lookup(self, keys: list[CacheKey]) -> dict[CacheKey, str]:
        """The cached rating of every key that has one."""
        return {key: str(doc["rating"]) for key, doc in self.entries(keys).items()}

    def entries(self, keys: list[CacheKey]) -> dict[CacheKey, dict[str, Any]]:
        """The cached entry (rating and any ``rationale``/``confidence``) of every key that has
        one, with one multi-get per 1000 keys."""
        found: dict[CacheKey, dict[str, Any]] = {}
        for start in range(0, len(keys), 1000):
            chunk = keys[start:start + 1000]
            answer = self.client.mget(index=CACHE_INDEX,
                                      body={"ids": [k.doc_id for k in chunk]})
            for key, doc in zip(chunk, answer["docs"], strict=True):
                if doc.get("found"):
                    found[key] = doc["_source"]
        return found

    def store(self, ratings: Mapping[CacheKey, str | dict[str, Any]]) -> None:
        """Write ratings: a rating string, or a dict with ``rating`` and optional
        ``rationale``/``confidence``."""
        if not ratings:
            return
        actions = (
            {"_index": CACHE_INDEX, "_id": key.doc_id, "_source": self._doc(key, value)}
            for key, value in ratings.items()
        )
        # No refresh: lookups are multi-gets, which read in real time.
        bulk(self.client, actions, chunk_size=2000, max_chunk_bytes=100 * 1024 * 1024)

    @staticmethod
    def _doc(key: CacheKey, value: str | dict[str, Any]) -> dict[str, Any]:
        details = value if isinstance(value, dict) else {"rating": value}
        return {
            "id": key.doc_id,
            "timestamp": now_iso(),
            "queryText": key.query,
            "documentId": key.document,
            "contextFieldsStr": ",".join(sorted(key.context_fields)),
            "modelId": key.model_id,
            "promptTemplateCode": key.prompt,
            **{k: v for k, v in details.items() if v is not None},
        }
