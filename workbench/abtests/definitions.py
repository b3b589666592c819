"""A/B test documents: create, update (with snapshots and versions), delete, and the cached
definition the interleaved search reads (docs/ab-tests.md, "How a test is stored").

The index, its documents and the messages are the plugin's. Two things differ, on purpose:

* a change of either configuration gives the test **new per-configuration ids**
  (``config_a_uuid``/``config_b_uuid``; the plugin keeps them for ever), so clicks logged
  against the plugin UI's ids never mix two versions' configurations;
* the interleaved search does not read the test and both configurations on every request: a
  process keeps them while the request's generation number (``store/generation.py``), bumped
  by every change of a test or a search configuration, stays the same (Redis down: read every
  time).
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from dataclasses import dataclass
from typing import Any

import redis
from opensearchpy import OpenSearch
from opensearchpy.exceptions import ConflictError, NotFoundError

from workbench.errors import BadRequest, NotFound, WorkbenchError
from workbench.schemas.configuration_list import local_only_reason
from workbench.store import generation
from workbench.store.identity import as_service
from workbench.store.indices import AB_TEST_INDEX, REMOTE_CONFIG_INDEX, SEARCH_CONFIG_INDEX
from workbench.store.repository import Repository, now_iso

log = logging.getLogger(__name__)

TEST, SNAPSHOT = "ab_test", "snapshot"
#: the state a version is: what a snapshot's ``record`` keeps
STATE_FIELDS = ("search_configuration_a", "search_configuration_b", "config_a_uuid",
                "config_b_uuid", "enabled")
#: what the plugin's search refuses a stored test without
REQUIRED_FIELDS = ("enabled", "search_configuration_a", "config_a_uuid", "test_id")
#: the longest a process keeps a definition however Redis answers: a change made while Redis was
#: down (so not announced) is served at most this late
MAX_AGE_SECONDS = 30.0
#: the plugin retries a conditional write this many times when the test changed meanwhile
UPDATE_ATTEMPTS = 3


def configurations_not_found() -> BadRequest:
    return BadRequest("One or more search configurations not found",
                      error_type="search_relevance_exception")


def ab_test_not_found() -> NotFound:
    return NotFound("AB test not found", error_type="search_relevance_exception")


@dataclass(frozen=True)
class ABTest:
    """The live document of a test."""

    test_id: str
    config_a: str
    config_b: str
    uuid_a: str
    uuid_b: str
    enabled: bool
    version: int
    created_at: str
    updated_at: str

    @classmethod
    def from_source(cls, source: dict[str, Any]) -> ABTest:
        """The test of a stored document; one written elsewhere (by the plugin) without the
        fields a search needs is the plugin's 500."""
        if any(source.get(name) is None for name in REQUIRED_FIELDS):
            raise WorkbenchError("AB test document is missing required fields",
                                 error_type="search_relevance_exception")
        return cls(str(source["test_id"]), str(source["search_configuration_a"]),
                   str(source.get("search_configuration_b") or ""), str(source["config_a_uuid"]),
                   str(source.get("config_b_uuid") or ""), bool(source["enabled"]),
                   int(source.get("version") or 0), str(source.get("created_at") or ""),
                   str(source.get("updated_at") or ""))

    def state(self) -> dict[str, Any]:
        return {"search_configuration_a": self.config_a, "search_configuration_b": self.config_b,
                "config_a_uuid": self.uuid_a, "config_b_uuid": self.uuid_b,
                "enabled": self.enabled}

    def document(self) -> dict[str, Any]:
        return {"doc_type": TEST, "test_id": self.test_id, **self.state(),
                "version": self.version, "created_at": self.created_at,
                "updated_at": self.updated_at}


def _repo(client: OpenSearch) -> Repository:
    return Repository(client, AB_TEST_INDEX)


def check_configurations(client: OpenSearch, *config_ids: str | None) -> None:
    """400 unless every given search configuration exists (one ``_mget``); one that is a remote
    search configuration (issue 47) is refused by name: an A/B test serves live searches from
    the local cluster only."""
    wanted = [c for c in config_ids if c]
    found = Repository(client, SEARCH_CONFIG_INDEX).mget_sources(wanted, ["id"])
    absent = [c for c in wanted if c not in found]
    if absent:
        remote = Repository(client, REMOTE_CONFIG_INDEX).mget_sources(absent, ["id"])
        for config_id in absent:
            if config_id in remote:
                raise BadRequest(local_only_reason("A/B tests", config_id),
                                 error_type="search_relevance_exception")
        raise configurations_not_found()


def create(client: OpenSearch, test_id: str, config_a: str, config_b: str,
           enabled: bool) -> None:
    """Store a new test at version 0; an existing id is the cluster's own 409."""
    check_configurations(client, config_a, config_b)
    now = now_iso()
    test = ABTest(test_id, config_a, config_b, str(uuid.uuid4()), str(uuid.uuid4()), enabled,
                  0, now, now)
    client.index(index=AB_TEST_INDEX, id=test_id, body=test.document(), op_type="create",
                 refresh="true")


def read(client: OpenSearch, test_id: str) -> tuple[ABTest, int, int] | None:
    """The live test with its ``_seq_no`` and ``_primary_term``, or None."""
    hit = _repo(client).get_hit(test_id)
    if hit is None or hit["_source"].get("doc_type", TEST) != TEST:
        return None
    return ABTest.from_source(hit["_source"]), hit["_seq_no"], hit["_primary_term"]


def update(client: OpenSearch, test_id: str, config_a: str | None, config_b: str | None,
           enabled: bool | None) -> bool:
    """Apply the given fields; True when the test changed (a new version). The old state is
    kept as a snapshot first, then the test is rewritten only if nobody changed it meanwhile
    (retried ``UPDATE_ATTEMPTS`` times)."""
    check_configurations(client, config_a, config_b)
    for attempt in range(UPDATE_ATTEMPTS):
        found = read(client, test_id)
        if found is None:
            raise ab_test_not_found()
        old, seq_no, primary_term = found
        a, b = config_a or old.config_a, config_b or old.config_b
        if a == b:
            raise BadRequest("search_configuration_a and search_configuration_b must be "
                             "different", error_type="search_relevance_exception")
        on = old.enabled if enabled is None else enabled
        if (a, b, on) == (old.config_a, old.config_b, old.enabled):
            return False
        configs_changed = (a, b) != (old.config_a, old.config_b)
        new = ABTest(
            test_id, a, b,
            str(uuid.uuid4()) if configs_changed else old.uuid_a,
            str(uuid.uuid4()) if configs_changed else old.uuid_b,
            on, old.version + 1, old.created_at, now_iso())
        _write_snapshot(client, old, new.updated_at)
        try:
            client.index(index=AB_TEST_INDEX, id=test_id, body=new.document(), refresh="true",
                         if_seq_no=seq_no, if_primary_term=primary_term)
        except ConflictError:
            if attempt + 1 == UPDATE_ATTEMPTS:
                raise WorkbenchError("Failed to update ABTest") from None
            continue
        return True
    raise AssertionError("unreachable")


def _write_snapshot(client: OpenSearch, old: ABTest, ended: str) -> None:
    doc_id = f"{old.test_id}_{old.version}"
    client.index(index=AB_TEST_INDEX, id=doc_id, refresh="true", body={
        "doc_type": SNAPSHOT, "doc_id": doc_id, "test_id": old.test_id,
        "version": old.version, "record": old.state(), "created": ended})


def delete(client: OpenSearch, test_id: str) -> None:
    """Delete the snapshots, then the test; 404 when there is no such test."""
    hit = _repo(client).get_hit(test_id, ["doc_type"])
    if hit is None or hit["_source"].get("doc_type", TEST) != TEST:
        raise NotFound(f"AB test '{test_id}' not found", error_type="search_relevance_exception")
    _repo(client).delete_by_query({"bool": {"filter": [
        {"term": {"test_id": test_id}}, {"term": {"doc_type": SNAPSHOT}}]}})
    try:
        client.delete(index=AB_TEST_INDEX, id=test_id, refresh="true")
    except NotFoundError:
        raise NotFound(f"AB test '{test_id}' not found",
                       error_type="search_relevance_exception") from None


@dataclass(frozen=True)
class Version:
    """One version of a test: its state and when it was served (``ended`` None: current)."""

    version: int
    config_a: str
    config_b: str
    uuid_a: str
    uuid_b: str
    enabled: bool
    started: str
    ended: str | None

    def as_json(self) -> dict[str, Any]:
        return {"version": self.version, "search_configuration_a": self.config_a,
                "search_configuration_b": self.config_b, "config_a_uuid": self.uuid_a,
                "config_b_uuid": self.uuid_b, "enabled": self.enabled,
                "started": self.started, "ended": self.ended}


def versions(client: OpenSearch, test: ABTest) -> list[Version]:
    """Every version of the test, oldest first, from its snapshots and its live document. A
    version started when the one before it ended (a snapshot's ``created``)."""
    answer = _repo(client).search({
        "query": {"bool": {"filter": [{"term": {"test_id": test.test_id}},
                                      {"term": {"doc_type": SNAPSHOT}}]}},
        "size": 10_000, "sort": [{"version": "asc"}]})
    result: list[Version] = []
    started = test.created_at
    for hit in answer["hits"]["hits"]:
        source = hit["_source"]
        record = source.get("record") or {}
        result.append(Version(
            int(source.get("version", len(result))), str(record.get("search_configuration_a")),
            str(record.get("search_configuration_b")), str(record.get("config_a_uuid")),
            str(record.get("config_b_uuid")), bool(record.get("enabled")), started,
            str(source.get("created"))))
        started = str(source.get("created"))
    result.append(Version(test.version, test.config_a, test.config_b, test.uuid_a,
                          test.uuid_b, test.enabled, started if result else test.created_at,
                          None))
    return result


# -- the cached definition of the interleaved search ------------------------------------------


@dataclass(frozen=True)
class Definition:
    """What an interleaved search needs: the test and its configurations' documents (B is None
    while the test is disabled: it is not read, as the plugin does not read it)."""

    test: ABTest
    config_a: dict[str, Any] | None
    config_b: dict[str, Any] | None


class DefinitionCache:
    """Tests and their configurations by test id, per process, valid while the generation
    number is unchanged (and for at most ``MAX_AGE_SECONDS``). The reads are made as the service:
    the test index is the workbench's own, and the searches themselves run as the caller."""

    def __init__(self, client: OpenSearch) -> None:
        self.client = client
        self._lock = threading.Lock()
        self._generation: bytes | None = None
        self._entries: dict[str, tuple[float, Definition | None]] = {}

    def get(self, test_id: str, current: bytes | None) -> Definition | None:
        """The test's definition as of generation ``current`` (None: read it now), or None
        when there is no such test."""
        now = time.monotonic()
        if current is not None:
            with self._lock:
                if current != self._generation:
                    self._entries, self._generation = {}, current
                else:
                    entry = self._entries.get(test_id)
                    if entry is not None and now - entry[0] < MAX_AGE_SECONDS:
                        return entry[1]
        definition = self._load(test_id)
        if current is not None:
            with self._lock:
                if current == self._generation:
                    self._entries[test_id] = (now, definition)
        return definition

    def kept(self, test_id: str, current: bytes | None) -> tuple[bool, Definition | None]:
        """``(True, definition)`` when ``get`` would answer without reading the cluster (the
        definition may be None: no such test), else ``(False, None)``."""
        if current is None:
            return False, None
        with self._lock:
            entry = self._entries.get(test_id) if current == self._generation else None
        if entry is None or time.monotonic() - entry[0] >= MAX_AGE_SECONDS:
            return False, None
        return True, entry[1]

    def _load(self, test_id: str) -> Definition | None:
        with as_service(self.client):
            found = read(self.client, test_id)
            if found is None:
                return None
            test = found[0]
            wanted = [test.config_a] + ([test.config_b] if test.enabled else [])
            configs = Repository(self.client, SEARCH_CONFIG_INDEX).mget_sources(wanted)
        return Definition(test, configs.get(test.config_a),
                          configs.get(test.config_b) if test.enabled else None)


def changed(redis_client: redis.Redis) -> None:
    """Tell every process's cache that a test or a search configuration changed."""
    generation.bump(redis_client)
