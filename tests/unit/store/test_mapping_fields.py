"""The fields a mapping file gained, added to an index created before it (store/bootstrap.py,
``missing_fields``); the integration test ``test_indices_and_cli.py`` puts them on the real
cluster."""

from __future__ import annotations

import json

from tests.support.processes import REPO
from workbench.store.bootstrap import missing_fields


def test_only_what_the_index_lacks() -> None:
    wanted = {"properties": {
        "id": {"type": "keyword"}, "status": {"type": "keyword"},
        "entries": {"type": "nested", "properties": {"a": {"type": "text"},
                                                    "b": {"type": "integer"}}},
        "meta": {"properties": {"x": {"type": "keyword"}}}}}
    current = {"properties": {
        "id": {"type": "keyword"}, "status": {"type": "text"},  # there: left as it is
        "entries": {"type": "nested", "properties": {"a": {"type": "text"}}}}}
    assert missing_fields(current, wanted) == {
        "entries": {"type": "nested", "properties": {"b": {"type": "integer"}}},
        "meta": {"properties": {"x": {"type": "keyword"}}}}
    assert missing_fields(wanted, wanted) == {}
    assert missing_fields({}, wanted) == wanted["properties"]


def test_the_query_set_index_maps_the_fields_of_generated_query_sets() -> None:
    """Declared before anything writes them, as the plugin's branch for generated query sets
    maps them, so a later plugin mapping never meets a dynamically made ``text`` field."""
    spec = json.loads((REPO / "index_mappings" / "queryset.json").read_text())
    properties = spec["mappings"]["properties"]
    assert {name: properties[name]["type"] for name in (
        "type", "status", "numberOfQueryTerms", "modelId", "sourceIndex", "contextFields",
        "categories")} == {
        "type": "keyword", "status": "keyword", "numberOfQueryTerms": "integer",
        "modelId": "keyword", "sourceIndex": "keyword", "contextFields": "keyword",
        "categories": "keyword"}
