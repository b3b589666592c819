"""The vector fields of the indices a judgment searches, which an LLM prompt leaves out of a
document when the judgment names no ``contextFields`` (docs/algorithms.md, "Prompt"; the plugin
does the same since its 3.9, pull request #565).

A 768-dimension embedding written as JSON is thousands of tokens: sent as a document's text it
costs about a whole default ``tokenLimit`` and tells the model nothing.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator
from typing import Any

from opensearchpy import OpenSearch
from opensearchpy.exceptions import OpenSearchException

log = logging.getLogger(__name__)

#: the mapping types whose values are vectors, not text (k-NN's and neural-search's types and
#: core's ``rank_features``)
VECTOR_TYPES = frozenset({"knn_vector", "rank_features", "sparse_vector"})


def vector_fields(client: OpenSearch, indices: Iterable[str]) -> frozenset[str]:
    """The names (last path segment) of every field of a vector type in the mappings of
    ``indices``, at any depth of ``properties``. Aliases and patterns are resolved by the cluster
    (the plugin reads one concrete index). A mapping that cannot be read gives no names, so the
    whole ``_source`` is sent, as the plugin does."""
    names: set[str] = set()
    for index in sorted(set(indices)):
        try:
            mappings = client.indices.get_mapping(index=index)
        except OpenSearchException as exc:
            log.warning("could not read the mapping of [%s] to leave vector fields out of LLM "
                        "prompts; documents are sent whole: %s", index, exc)
            continue
        for mapping in mappings.values():
            names.update(_vector_names(mapping.get("mappings", {}).get("properties") or {}))
    return frozenset(names)


def _vector_names(properties: dict[str, Any]) -> Iterator[str]:
    for name, spec in properties.items():
        if not isinstance(spec, dict):
            continue
        if spec.get("type") in VECTOR_TYPES:
            yield name
        yield from _vector_names(spec.get("properties") or {})


def without_fields(value: Any, names: frozenset[str]) -> Any:
    """``value`` with every object key in ``names`` dropped, at any depth (inside lists of
    objects too); the order of what is kept is unchanged."""
    if not names:
        return value
    if isinstance(value, dict):
        return {key: without_fields(item, names) for key, item in value.items()
                if key not in names}
    if isinstance(value, list):
        return [without_fields(item, names) for item in value]
    return value
