"""Turn a search configuration and one query into the search the cluster runs (docs/contract.md,
"Rendering").

``render`` is the one place this happens; judgments and experiments call it for every query.
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass
from typing import Any

import pystache
from opensearchpy import OpenSearch, RequestError
from pystache.parser import parse as pystache_parse

from workbench.errors import BadRequest
from workbench.schemas import request_json

PLACEHOLDERS = ("%SearchText%", "%queryText%")


def json_escaped(text: str) -> str:
    """``text`` as it goes inside a JSON string (quotes and backslashes escaped)."""
    return json.dumps(text, ensure_ascii=False)[1:-1]


# OpenSearch renders Mustache search templates with JSON escaping of the parameters.
_renderer = pystache.Renderer(escape=json_escaped, missing_tags="ignore")


@dataclass(frozen=True)
class RenderedSearch:
    """What to send: ``POST /<index>/_search[?search_pipeline=<pipeline>]`` with ``body``."""

    index: str
    body: dict[str, Any]
    pipeline: str | None

    def params(self) -> dict[str, str]:
        return {"search_pipeline": self.pipeline} if self.pipeline else {}


def uses_mustache(query: str) -> bool:
    return "{{" in query


#: longest Mustache tag (``{{`` to ``}}``) accepted: pystache's parser takes seconds on an
#: unclosed ``{{`` followed by a few hundred spaces
MAX_TAG_CHARS = 256


#: the plugin's refusal of a partial (``{{>name}}``), which OpenSearch's Mustache engine does
#: not load (plugin pull request #342)
PARTIALS_REFUSED = "Partial templates are not supported"
#: the names the query text is bound to: ``query_string`` in the plugin's newest code and
#: documentation, ``queryText`` in its first Mustache code (plugin #342)
QUERY_TEXT_NAMES = ("queryText", "query_string")


def mustache_error(query: str) -> str | None:
    """Why the query's Mustache tags cannot be rendered safely, or None (a linear scan, then a
    parse for partials, in every section and after any change of delimiters)."""
    position = 0
    while (start := query.find("{{", position)) != -1:
        end = query.find("}}", start + 2)
        if end == -1 or end - start > MAX_TAG_CHARS:
            return (f"query has a Mustache tag at character {start} that is not closed by "
                    f"}}}} within {MAX_TAG_CHARS} characters")
        position = end + 2
    if _has_partial(query):
        return f"query uses a Mustache partial: {PARTIALS_REFUSED}"
    return None


@functools.lru_cache(maxsize=256)
def _has_partial(query: str) -> bool:
    # pystache has no public walk of its parse tree: its node classes are read by name.
    def walk(nodes: Any) -> bool:
        for node in getattr(nodes, "_parse_tree", ()):
            kind = type(node).__name__
            if kind == "_PartialNode":
                return True
            if kind == "_SectionNode" and walk(node.parsed):
                return True
            if kind == "_InvertedNode" and walk(node.parsed_section):
                return True
        return False

    try:
        return walk(pystache_parse(query))
    except Exception:  # noqa: BLE001 - what cannot be parsed has no partial to load
        return False


def substitute(query: str, query_text: str, custom_fields: dict[str, str] | None = None,
               escape: bool = False) -> str:
    """Fill the placeholders: Mustache (parameters JSON-escaped, a missing one empty) when the
    query has ``{{``, otherwise plain replacement of ``%SearchText%`` / ``%queryText%``: not
    escaped, as the plugin does (query-set texts cannot hold quotes or backslashes), unless
    ``escape`` (a user's text, as the A/B search gets it)."""
    if uses_mustache(query):
        error = mustache_error(query)
        if error:
            raise BadRequest(error)
        params = {**(custom_fields or {}), **dict.fromkeys(QUERY_TEXT_NAMES, query_text)}
        return str(_renderer.render(query, params))
    text = json_escaped(query_text) if escape else query_text
    for placeholder in PLACEHOLDERS:
        query = query.replace(placeholder, text)
    return query


def render(config: dict[str, Any], query_text: str, size: int,
           custom_fields: dict[str, str] | None = None, escape: bool = False) -> RenderedSearch:
    """The search for one query: placeholders filled (``substitute``), parsed, ``size`` forced
    to ``size``."""
    text = substitute(str(config.get("query", "")), query_text, custom_fields, escape)
    try:
        body = json.loads(text)
    except ValueError:
        raise BadRequest("Failed to build search request") from None
    if not isinstance(body, dict):
        raise BadRequest("Failed to build search request")
    body["size"] = size
    return RenderedSearch(str(config["index"]), body, config.get("searchPipeline") or None)


def query_error(query: Any, field: str = "query") -> str | None:
    """Why a configuration's ``query`` cannot be used, or None.

    It must be a string holding a JSON object once its placeholders are filled: a query that
    can never be sent is refused rather than stored. It need not use the query text (a
    ``match_all`` baseline is a fair configuration, and the plugin stores it). JSON beyond the
    limits of ``request_json`` is a ``BadRequest`` naming ``field``.
    """
    if query is None:
        return "query is required"
    if not isinstance(query, str):
        return "query must be a string holding the search body as JSON"
    if not query.strip():
        return "query cannot be empty"
    error = mustache_error(query)
    if error:
        return error
    sample = substitute(query, "sample query")
    try:
        parsed = request_json.loads(sample, field)
    except ValueError as exc:
        return f"query is not valid JSON: {exc}"
    if not isinstance(parsed, dict):
        return "query must be a JSON object (the search request body)"
    return None


# The cluster's answers that say a search body cannot be parsed at all, whatever the query text
# and the data (a bare query clause where the whole body belongs, an unknown query type, a
# field a clause does not take). Not among them: query_shard_exception, which may depend on the
# text (a number field searched with words) and so on what a query set holds.
PARSE_FAILURES = ("parsing_exception", "x_content_parse_exception")
SAMPLE_TEXT = "sample query"


def cluster_parse_error(client: OpenSearch, index: str, query: str) -> str | None:
    """Why the cluster cannot parse ``query`` as a search on ``index``, or None.

    The plugin stores any JSON object and the first experiment to use it ends ``ERROR``; the
    workbench sends it once, as the caller, with a sample query text and no hits asked, so a
    configuration that can never run is refused when it is created.
    """
    for body in _parts(render({"index": index, "query": query}, SAMPLE_TEXT, 0).body):
        try:
            client.search(index=index, body=body,
                          params={"terminate_after": "1", "track_total_hits": "false"})
        except RequestError as exc:
            if exc.error not in PARSE_FAILURES:
                continue
            error = exc.info.get("error", {}) if isinstance(exc.info, dict) else {}
            reason = error.get("reason", exc.error) if isinstance(error, dict) else exc.error
            return (f"query cannot be parsed as a search request on [{index}]: {reason} (query "
                    'is the whole search body, as {"query": {"match": {"title": '
                    '"%SearchText%"}}})')
    return None


def _parts(body: dict[str, Any]) -> list[dict[str, Any]]:
    """The searches that check a body: itself, or for a ``hybrid`` query each of its clauses
    with the rest of the body (a cluster without the neural-search plugin parses no
    ``hybrid``, and the workbench runs the clauses itself: experiments/hybrid.py). A
    ``hybrid`` without a list of clauses is left to the run, which names the problem."""
    query = body.get("query")
    if not (isinstance(query, dict) and list(query) == ["hybrid"]):
        return [body]
    hybrid = query["hybrid"]
    clauses = hybrid.get("queries") if isinstance(hybrid, dict) else None
    if not isinstance(clauses, list) or not all(isinstance(c, dict) for c in clauses):
        return []
    rest = {key: value for key, value in body.items() if key != "query"}
    return [{**rest, "query": clause} for clause in clauses]
