"""The results of an A/B test: impressions from UBI queries, clicks from UBI events, the verdict
(docs/ab-tests.md, "Reading the verdict").

An impression is one interleaved search (``ubi_queries``, written by ``abtests.impressions``):
the ids it showed and each one's team. A click is an ordinary UBI event, ``action_name:
click`` with the impression's ``query_id`` and the clicked ``event_attributes.object.object_id``
(what UBI clients already log). Each impression's clicked documents are counted per team
(a document clicked twice counts once) and ``abtests.verdict`` does the rest.

``total_clicks`` is the plugin UI's computation (total clicks per team, a z-test) on the same
clicks. The plugin UI's click documents (``event_attributes.ab_test_id``,
``event_attributes.object.search_configuration_uuid``, no ``query_id``) cannot be credited per
impression; their totals per configuration, within the version's time, go through the plugin
UI's own test (``total_clicks``), so a team can compare both readings.

Reads are made as the caller, who must be allowed to read the UBI indices. Impressions are read a
page at a time (``PAGE``), their clicks counted by the cluster for that page (per impression and
document, in a composite aggregation), and each impression is then counted and dropped
(``verdict.Tally``, hourly timeline buckets): memory grows with the distinct queries and hours,
not with the impressions.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from opensearchpy import OpenSearch
from opensearchpy.exceptions import NotFoundError, RequestError

from workbench.abtests.definitions import ABTest, Version, versions
from workbench.abtests.interleaving import A, B
from workbench.abtests.verdict import Tally, total_clicks_test, verdict_of
from workbench.errors import BadRequest

PAGE = 10_000
#: how many impressions' ids one clicks request names (under ``index.max_terms_count``)
IDS_PER_REQUEST = 10_000
OBJECT_ID = "event_attributes.object.object_id"


@dataclass(frozen=True)
class Shown:
    """One impression as recorded: when, the query, and the team of each shown id."""

    query_id: str
    timestamp: str
    query: str
    teams: dict[str, str]


def pick_version(test: ABTest, all_versions: list[Version], wanted: str | None) -> Version:
    """The version asked for (``version`` parameter), else the current one."""
    if wanted is None:
        return all_versions[-1]
    if not re.fullmatch(r"[0-9]{1,9}", wanted) or int(wanted) > test.version:
        raise BadRequest(f"version must be an integer from 0 to {test.version} (the test's "
                         f"current version), got: {wanted}")
    return next(v for v in all_versions if v.version == int(wanted))


@dataclass(frozen=True)
class Indices:
    """Where impressions are recorded and clicks are logged."""

    queries: str
    events: str


def results(client: OpenSearch, indices: Indices, test: ABTest, wanted_version: str | None,
            since: str | None, until: str | None, interval: str | None) -> dict[str, Any]:
    """The ``_results`` answer for one version of the test, within ``[since, until)``."""
    if interval not in (None, "hour", "day"):
        raise BadRequest(f"interval must be hour or day, got: {interval}")
    all_versions = versions(client, test)
    version = pick_version(test, all_versions, wanted_version)
    tally, hours = Tally(), Hours()
    fields = _ClickFields.of(client, indices.events)
    for page in _impression_pages(client, indices.queries, test.test_id, version, since, until):
        clicked = _clicked(client, indices.events, fields, [s.query_id for s in page])
        for s in page:
            teams = [s.teams[d] for d in clicked.get(s.query_id, ()) if d in s.teams]
            hours.add(s.timestamp, tally.add(s.query, teams.count(A), teams.count(B)))
    return {
        "test_id": test.test_id,
        "version": version.as_json(),
        "window": {"from": since, "to": until},
        **verdict_of(tally),
        "timeline": hours.timeline(interval),
        "total_clicks": total_clicks_test(tally.clicks_a, tally.clicks_b),
        "plugin_ui_clicks": _plugin_ui_clicks(client, indices.events, test.test_id, version,
                                              since, until),
    }


def _window(since: str | None, until: str | None) -> list[dict[str, Any]]:
    bounds = {k: v for k, v in (("gte", since), ("lt", until)) if v}
    return [{"range": {"timestamp": bounds}}] if bounds else []


def _impression_pages(client: OpenSearch, index: str, test_id: str, version: Version,
                      since: str | None, until: str | None) -> Iterator[list[Shown]]:
    """Every recorded impression of the version, ``PAGE`` at a time (sorted by ``query_id``);
    the configuration id keeps out those of a deleted test that had the same id."""
    query = {"bool": {"filter": [
        _keyword_term("query_attributes.ab_test_id", test_id),
        _keyword_term("query_attributes.ab_test_version", str(version.version)),
        _keyword_term("query_attributes.ab_test_config_a_uuid", version.uuid_a),
        *_window(since, until)]}}
    fields = ["query_id", "timestamp", "user_query", "query_response_hit_ids",
              "query_attributes"]
    for hits in _pages(client, index, query, fields, "query_id"):
        yield [_shown(hit["_source"]) for hit in hits]


def _shown(source: dict[str, Any]) -> Shown:
    attributes = source.get("query_attributes") or {}
    ids = source.get("query_response_hit_ids") or []
    teams = attributes.get("ab_test_teams") or []
    return Shown(str(source["query_id"]), str(source.get("timestamp", "")),
                 str(source.get("user_query", "")),
                 {str(d): str(t) for d, t in zip(ids, teams, strict=False)})


def _keyword_term(field: str, value: str) -> dict[str, Any]:
    """The value in ``field`` as the index maps it: keyword, flat object, or text with a
    ``.keyword`` sub-field (an index mapped dynamically)."""
    return {"bool": {"should": [{"term": {field: value}},
                                {"term": {f"{field}.keyword": value}}],
                     "minimum_should_match": 1}}


def _pages(client: OpenSearch, index: str, query: dict[str, Any], fields: list[str],
           sort_field: str) -> Iterator[list[dict[str, Any]]]:
    """The hits, ``PAGE`` at a time (``search_after`` on ``sort_field``); none without the
    index."""
    after: list[Any] | None = None
    while True:
        body: dict[str, Any] = {"query": query, "size": PAGE, "_source": fields,
                                "sort": [{sort_field: "asc"}], "track_total_hits": False}
        if after is not None:
            body["search_after"] = after
        try:
            hits = client.search(index=index, body=body)["hits"]["hits"]
        except NotFoundError:
            return
        if hits:
            yield hits
        if len(hits) < PAGE:
            return
        after = hits[-1]["sort"]


def _aggregatable(client: OpenSearch, index: str, field: str) -> str:
    """``field``, or its ``.keyword`` sub-field when the index maps it as text (an events
    index created by dynamic mapping rather than with the UBI mapping)."""
    try:
        answer = client.indices.get_field_mapping(index=index, fields=field)
    except NotFoundError:
        return field
    for mapping in answer.values():
        found = (mapping.get("mappings") or {}).get(field) or {}
        kinds = [m.get("type") for m in (found.get("mapping") or {}).values()]
        if "text" in kinds:
            return f"{field}.keyword"
    return field


@dataclass(frozen=True)
class _ClickFields:
    """The events index's fields a click count aggregates on, as that index maps them."""

    query_id: str
    object_id: str
    action: str

    @classmethod
    def of(cls, client: OpenSearch, index: str) -> _ClickFields:
        return cls(_aggregatable(client, index, "query_id"),
                   _aggregatable(client, index, OBJECT_ID),
                   _aggregatable(client, index, "action_name"))


def _clicked(client: OpenSearch, index: str, fields: _ClickFields,
             query_ids: list[str]) -> dict[str, set[str]]:
    """query id -> the distinct documents clicked in that impression."""
    clicked: dict[str, set[str]] = defaultdict(set)
    for start in range(0, len(query_ids), IDS_PER_REQUEST):
        chunk = query_ids[start:start + IDS_PER_REQUEST]
        query = {"bool": {"filter": [{"terms": {fields.query_id: chunk}},
                                     {"term": {fields.action: "click"}}]}}
        after: dict[str, Any] | None = None
        while True:
            composite: dict[str, Any] = {"size": PAGE, "sources": [
                {"q": {"terms": {"field": fields.query_id}}},
                {"d": {"terms": {"field": fields.object_id}}}]}
            if after:
                composite["after"] = after
            try:
                answer = client.search(index=index, body={
                    "size": 0, "query": query, "aggs": {"pairs": {"composite": composite}}})
            except NotFoundError:
                return clicked
            pairs = answer["aggregations"]["pairs"]
            for bucket in pairs["buckets"]:
                clicked[str(bucket["key"]["q"])].add(str(bucket["key"]["d"]))
            after = pairs.get("after_key")
            if not after or len(pairs["buckets"]) < PAGE:
                break
    return clicked


_HOUR = 13  # "2026-11-27T05" of an ISO timestamp
_DAY = 10  # "2026-11-27"
_OUTCOME_COLUMN = {"A": "wins_a", "B": "wins_b", "tie": "ties"}


class Hours:
    """Impressions and their outcomes per hour, counted one impression at a time, and the
    span of their timestamps: the timeline of the results."""

    def __init__(self) -> None:
        self.buckets: dict[str, dict[str, int]] = {}
        self.first: str | None = None
        self.last: str | None = None

    def add(self, timestamp: str, won: str | None) -> None:
        if timestamp:
            self.first = min(self.first or timestamp, timestamp)
            self.last = max(self.last or timestamp, timestamp)
        bucket = self.buckets.setdefault(timestamp[:_HOUR], {
            "impressions": 0, "wins_a": 0, "wins_b": 0, "ties": 0})
        bucket["impressions"] += 1
        if won is not None:
            bucket[_OUTCOME_COLUMN[won]] += 1

    def timeline(self, interval: str | None) -> dict[str, Any]:
        """Wins, ties and impressions per hour or per day (``interval``; by default per day
        when the impressions span more than three days, else per hour), oldest first."""
        if interval is None:
            span = ((_parse(self.last) - _parse(self.first)).total_seconds()
                    if self.first and self.last else 0)
            interval = "day" if span > 3 * 86_400 else "hour"
        width = _DAY if interval == "day" else _HOUR
        merged: dict[str, dict[str, int]] = {}
        for hour, counts in self.buckets.items():
            into = merged.setdefault(hour[:width], dict.fromkeys(counts, 0))
            for name, count in counts.items():
                into[name] += count
        rows = [{"start": key + ("T00:00:00Z" if interval == "day" else ":00:00Z"), **counts}
                for key, counts in sorted(merged.items())]
        return {"interval": interval, "buckets": rows}


def _parse(stamp: str) -> datetime:
    return datetime.fromisoformat(stamp.replace("Z", "+00:00"))


def _plugin_ui_clicks(client: OpenSearch, index: str, test_id: str, version: Version,
                      since: str | None, until: str | None) -> dict[str, Any]:
    """Clicks the plugin UI logged for the version's two ids, while the version was served,
    read as the UI reads them (total clicks per configuration) and tested as it tests them."""
    field = "event_attributes.object.search_configuration_uuid"
    span = {k: v for k, v in (("gte", version.started), ("lt", version.ended)) if v}
    query = {"bool": {"filter": [_keyword_term("event_attributes.ab_test_id", test_id),
                                 {"terms": {field: [version.uuid_a, version.uuid_b]}},
                                 {"range": {"timestamp": span}}, *_window(since, until)]}}
    counts = {version.uuid_a: 0, version.uuid_b: 0}
    for name in (field, f"{field}.keyword"):
        try:
            answer = client.search(index=index, body={
                "size": 0, "query": _with_field(query, name),
                "aggs": {"per_config": {"terms": {"field": name, "size": 2}}}})
        except NotFoundError:
            break
        except RequestError:  # a text field, which cannot be aggregated: its keyword next
            continue
        buckets = answer["aggregations"]["per_config"]["buckets"]
        if buckets or name.endswith(".keyword"):
            for bucket in buckets:
                counts[str(bucket["key"])] = int(bucket["doc_count"])
            break
    if not version.enabled:
        counts = dict.fromkeys(counts, 0)  # a disabled version's clicks are not test traffic
    return total_clicks_test(counts[version.uuid_a], counts[version.uuid_b])


def _with_field(query: dict[str, Any], name: str) -> dict[str, Any]:
    """The query with its ``terms`` on the configuration ids aimed at ``name``."""
    filters = []
    for clause in query["bool"]["filter"]:
        if "terms" in clause:
            values = next(iter(clause["terms"].values()))
            clause = {"terms": {name: values}}
        filters.append(clause)
    return {"bool": {"filter": filters}}
