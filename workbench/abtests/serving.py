"""The interleaved search: ``POST /ab_tests/{id}/_search`` (docs/ab-tests.md, "Searching").

Both configurations' searches go to the cluster in one ``_msearch``, as the caller (a caller who
may not read the index gets the cluster's own 403). Their hits are merged by team-draft
interleaving seeded by (test, version, query, client id), so the same user sees the same list
again and the stored impression can be replayed; the list is as long as the longer of the two
result lists, as the plugin's, and a search that shows nothing records no impression
(``query_id`` null). The user's text is substituted JSON-escaped
(``render(..., escape=True)``), so a query holding ``"`` or ``\\`` is searched as typed. The
checks come in the plugin's order, with its messages. A disabled test searches configuration A
only, tags its hits with A's id as the plugin does, and records nothing: its traffic is not test
traffic.
"""

from __future__ import annotations

import logging
import uuid
from dataclasses import dataclass
from typing import Any

from opensearchpy import OpenSearch

from workbench.abtests.definitions import Definition, ab_test_not_found
from workbench.abtests.interleaving import A, B, interleaved, seed_for
from workbench.errors import BadRequest, NotFound, WorkbenchError
from workbench.store.search import msearch_body
from workbench.store.search_render import RenderedSearch, render

log = logging.getLogger(__name__)

DEFAULT_SIZE = 10
SEARCH_TEXT = "SearchText"


class SearchRefused(WorkbenchError):
    """The cluster refused the caller's search (403): its own answer goes back as it is."""

    def __init__(self, answer: dict[str, Any], status: int) -> None:
        super().__init__("search refused", status=status)
        self.answer = answer

    def body(self) -> dict[str, Any]:
        return self.answer


@dataclass(frozen=True)
class Served:
    """One answered search: the response and, for an enabled test, the impression to record
    (the ids and teams of the hits shown, in order)."""

    response: dict[str, Any]
    index: str
    query_text: str
    client_id: str
    shown: list[tuple[str, str]]


@dataclass(frozen=True)
class Planned:
    """A search that passed the plugin's checks: what to send (one ``_msearch``) and what the
    answers are merged with."""

    definition: Definition
    text: str
    client_id: str | None
    start: int
    depth: int
    searches: list[RenderedSearch]


def search(client: OpenSearch, definition: Definition | None, params: dict[str, str],
           client_id: str | None, start: int, size: int | None) -> Served:
    """Run the test's search for ``params["SearchText"]``: hits ``start`` to ``start + size``
    of the interleaved list."""
    planned = plan(definition, params, client_id, start, size)
    return merge(planned, _msearch(client, planned.searches))


def plan(definition: Definition | None, params: dict[str, str], client_id: str | None,
         start: int, size: int | None) -> Planned:
    """The checks before any search, in the plugin's order, and the searches to send. The
    live search server (``workbench.livesearch``) sends them itself and calls ``merge``."""
    if definition is None:
        raise ab_test_not_found()
    test = definition.test
    if definition.config_a is None:
        raise NotFound("Search configuration A not found", error_type="search_relevance_exception")
    text = params.get(SEARCH_TEXT)
    if text is None:
        raise BadRequest("SearchText is required in query_params",
                         error_type="search_relevance_exception")
    page = DEFAULT_SIZE if size is None else size
    depth = start + page
    searches = [render(definition.config_a, text, depth, escape=True)]
    if test.enabled:
        if definition.config_b is None:
            raise NotFound("Search configuration B not found",
                           error_type="search_relevance_exception")
        index_a, index_b = definition.config_a.get("index"), definition.config_b.get("index")
        if index_a != index_b:
            raise BadRequest("Both search configurations must target the same index. "
                             f"Config A targets [{index_a}], Config B targets [{index_b}]",
                             error_type="search_relevance_exception")
        searches.append(render(definition.config_b, text, depth, escape=True))
    return Planned(definition, text, client_id, start, depth, searches)


def merge(planned: Planned, answers: list[list[dict[str, Any]]]) -> Served:
    """The answer to a planned search, from each search's hits (A's, then B's when enabled)."""
    test, text, start, depth = planned.definition.test, planned.text, planned.start, planned.depth
    chosen_client = planned.client_id or str(uuid.uuid4())
    index = planned.searches[0].index
    if not test.enabled:
        hits = [_tagged(hit, test.uuid_a) for hit in answers[0][start:depth]]
        return Served(_response(test.test_id, test.version, None, hits), index, text,
                      chosen_client, [])
    by_team = {A: {h["_id"]: h for h in answers[0]}, B: {h["_id"]: h for h in answers[1]}}
    shown = interleaved([h["_id"] for h in answers[0]], [h["_id"] for h in answers[1]],
                        depth, seed_for(test.test_id, test.version, text, chosen_client))
    shown = shown[start:]
    uuids = {A: test.uuid_a, B: test.uuid_b}
    hits = [_tagged(by_team[team.upper()][doc_id], uuids[team.upper()])
            for doc_id, team in shown]
    # A search that shows nothing (``size`` 0, no hits, a page past the end) is no impression.
    query_id = str(uuid.uuid4()) if shown else None
    return Served(_response(test.test_id, test.version, query_id, hits), index, text,
                  chosen_client, shown)


def _response(test_id: str, version: int, query_id: str | None,
              hits: list[dict[str, Any]]) -> dict[str, Any]:
    return {"test_id": test_id, "version": version, "query_id": query_id, "hits": hits}


def _tagged(hit: dict[str, Any], config_uuid: str) -> dict[str, Any]:
    return {"_index": hit.get("_index"), "_id": hit["_id"], "_score": hit.get("_score"),
            "_source": hit.get("_source"), "_search_configuration_id": config_uuid}


def _msearch(client: OpenSearch, searches: list[RenderedSearch]) -> list[list[dict[str, Any]]]:
    """Each search's hits, from one ``_msearch`` as the caller. A refusal by the cluster's
    security is its own answer; any other failure is the plugin's ``Search A failed`` (or B),
    with the cluster's reason as its cause."""
    return hits(client.msearch(body=msearch_body(searches)))


def hits(answer: dict[str, Any]) -> list[list[dict[str, Any]]]:
    """Each search's hits from an ``_msearch`` answer, or the error ``_msearch`` describes."""
    result = []
    for side, response in zip((A, B), answer["responses"], strict=False):
        error = response.get("error")
        if error is None:
            result.append(list(response["hits"]["hits"]))
            continue
        status = int(response.get("status") or 500)
        if status in (401, 403):
            raise SearchRefused({"error": error, "status": status}, status)
        cause = (error.get("root_cause") or [error])[0] if isinstance(error, dict) else {}
        log.warning("A/B search of configuration %s failed: %s: %s", side,
                    cause.get("type"), cause.get("reason"))
        raise WorkbenchError(f"Search {side} failed", status=500,
                             error_type="search_relevance_exception",
                             caused_by={"type": str(cause.get("type", "exception")),
                                        "reason": str(cause.get("reason", ""))})
    return result
