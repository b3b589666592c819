"""Input fingerprints of an experiment (docs/contract.md, "Input signature"): SHA-256 of the JSON
the plugin hashes for its query set, judgments and search configurations, written the way the
plugin's Jackson writes it, so that a signature stored by either validates in the other; and the
``/validate`` answer, in the plugin's order and words.

The reference vectors (tests/unit/experiments/signature_vectors.json, written by
scripts/signature_vectors.sh with Jackson 3) hold the canonical strings this module must produce
byte for byte."""

from __future__ import annotations

import hashlib
import json
import math
import operator
import re
from collections.abc import Callable
from json.encoder import c_make_encoder, encode_basestring  # type: ignore[attr-defined]
from typing import Any

from opensearchpy import OpenSearch

from workbench.querysets.entries import read_entries
from workbench.schemas.javafmt import double_to_string, java_string
from workbench.store.indices import (
    JUDGMENT_INDEX,
    QUERY_SET_INDEX,
    REMOTE_CONFIG_INDEX,
    SEARCH_CONFIG_INDEX,
)
from workbench.store.repository import Repository

INPUTS = ("query_set", "judgment_list", "search_configurations")

# -- Jackson's canonical JSON ---------------------------------------------------------------------

_SHORT_ESCAPES = {'"': '\\"', "\\": "\\\\", "\b": "\\b", "\t": "\\t", "\n": "\\n", "\f": "\\f",
                  "\r": "\\r"}
_ESCAPES = {chr(c): _SHORT_ESCAPES.get(chr(c), f"\\u{c:04X}") for c in range(0x20)}
_ESCAPES.update(_SHORT_ESCAPES)
_TO_ESCAPE = str.maketrans(_ESCAPES)  # Jackson: upper-case hex; nothing above U+001F escaped

_JAVA_WHITESPACE = "".join(chr(c) for c in range(0x21))  # String.trim strips every char <= ' '
MAX_NUMBER_LENGTH = 1000  # Jackson 3's StreamReadConstraints: a longer number does not parse,
MAX_DEPTH = 500  # nor a body nested deeper


# Python's JSON escapes the same characters the same way, but writes \u00XX in lower case
_LOWER_HEX_ESCAPE = re.compile("[\x0b\x0e\x0f\x1a-\x1f]")
# A map whose keys are ASCII and values strings, integers, booleans or null: Python's JSON
# writes it as Jackson does (ASCII keys sort the same in code points and in UTF-16 units)
# unless a string holds a control character written \u00XX (then the text holds "\u00").
_PLAIN_TYPES = frozenset({str, int, bool, type(None)})
_PLAIN_ENCODER = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), sort_keys=True,
                                  check_circular=False)
# CPython's C encoder, called without JSONEncoder's set-up for each of many small maps
_C_ENCODER = None if c_make_encoder is None else c_make_encoder(
    None, None, encode_basestring, None, ":", ",", True, False, False)


def _plain_map(value: dict[str, Any]) -> str:
    if _C_ENCODER is None:  # pragma: no cover
        return _PLAIN_ENCODER.encode(value)
    return "".join(_C_ENCODER(value, 0))

utf16_key = operator.methodcaller("encode", "utf-16-be", "surrogatepass")
"""Java's ``String.compareTo`` order (UTF-16 code units), not Python's code points: U+FF5E
sorts after U+1F600, whose first unit is 0xD83D."""


def _string(text: str) -> str:
    if _LOWER_HEX_ESCAPE.search(text):
        return '"' + text.translate(_TO_ESCAPE) + '"'
    return encode_basestring(text)


def _number(value: int | float) -> str:
    if isinstance(value, int):
        return str(value)
    if math.isfinite(value):
        return double_to_string(value)  # Java 19+ Double.toString, as Jackson 3 writes a double
    return _string(double_to_string(value))  # Jackson writes NaN and Infinity as strings


def jackson(value: Any, sort_maps: bool = True) -> str:
    """``value`` written as the plugin's ``ObjectMapper`` writes it: no spaces, non-ASCII as is,
    control characters ``\\uXXXX`` (upper-case) or short escapes, doubles by ``Double.toString``.
    A Java ``Map`` has its entries sorted by key (``sort_maps``); a parsed ``ObjectNode`` keeps
    the order it was read in (``sort_maps=False``)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return _number(value)
    if isinstance(value, str):
        return _string(value)
    parts = []  # loops, not generators: one frame a level for a body nested MAX_DEPTH deep
    if isinstance(value, dict):
        items = sorted(value.items(), key=lambda kv: utf16_key(kv[0])) if sort_maps \
            else list(value.items())
        for key, item in items:
            parts.append(_string(key) + ":" + jackson(item, sort_maps))
        return "{" + ",".join(parts) + "}"
    if isinstance(value, list | tuple):
        for item in value:
            parts.append(jackson(item, sort_maps))
        return "[" + ",".join(parts) + "]"
    raise TypeError(f"not a JSON value: {type(value).__name__}")


def sha256(text: str) -> str:
    # Java's getBytes(UTF_8) replaces a lone surrogate with '?', as "replace" does
    return hashlib.sha256(text.encode("utf-8", "replace")).hexdigest()


def _refuse(token: str) -> Any:
    raise ValueError(f"not JSON for Jackson: {token}")


def _bounded(parse: Callable[[str], Any]) -> Callable[[str], Any]:
    def number(token: str) -> Any:
        if len(token) > MAX_NUMBER_LENGTH:
            raise ValueError("number too long")
        return parse(token)
    return number


def _depth(value: Any) -> int:
    deepest, level = 0, [(value, 1)]
    while level:
        node, depth = level.pop()
        children = node.values() if isinstance(node, dict) else node \
            if isinstance(node, list) else None
        if children is not None:
            deepest = max(deepest, depth)
            level.extend((child, depth + 1) for child in children)
    return deepest


def _read_tree(text: str) -> Any:
    """Jackson's ``readTree``: strict JSON (no NaN or Infinity, nothing after the value)."""
    tree = json.loads(text, parse_constant=_refuse, parse_int=_bounded(int),
                      parse_float=_bounded(float))
    if _depth(tree) > MAX_DEPTH:
        raise ValueError("nested too deep")
    return tree


def search_body(query: Any) -> str:
    """A configuration's query as the plugin hashes it: a JSON object written again without
    ``from``, ``size`` and ``profile`` (its keys in their order), anything else (a Mustache
    template that is not JSON) as its trimmed text."""
    if not isinstance(query, str):
        return ""
    trimmed = query.strip(_JAVA_WHITESPACE)
    if not trimmed:
        return ""
    try:
        body = _read_tree(trimmed)
    except (ValueError, RecursionError):
        return trimmed
    if not isinstance(body, dict):
        return trimmed
    for key in ("from", "profile", "size"):
        body.pop(key, None)
    return jackson(body, sort_maps=False)


# -- the three payloads, written as canonical JSON ---------------------------------------------
# Built as text: a judgment list holds up to 500,000 ratings, each written once (its text is
# also its sort key), most by Python's JSON encoder (_plain_map).

def _rating(rating: dict[str, Any]) -> str:
    if _PLAIN_TYPES.issuperset(map(type, rating.values())) and "".join(rating).isascii():
        text = _plain_map(rating)
        if "\\u00" not in text:
            return text
    return jackson(rating)


def _join(texts: list[str]) -> str:
    return "[" + ",".join(texts) + "]"


def query_set_json(doc: dict[str, Any]) -> str:
    """``{"queries": [...]}``: every entry's stored ``queryText``, sorted."""
    entries = doc.get("querySetQueries")
    texts = [entry.get("queryText") for entry in entries if isinstance(entry, dict)] \
        if isinstance(entries, list) else []
    return '{"queries":' + _join([_string(t) for t in sorted(
        (t for t in texts if isinstance(t, str)), key=utf16_key)]) + "}"


def _rows(judgment_ratings: Any) -> str:
    """Rows ``{"query", "ratings"}`` sorted by query; each row's ratings (their keys sorted) in
    the order of their canonical JSON. Both sorts are stable, as Java's."""
    if not isinstance(judgment_ratings, list):
        return "[]"
    rows: list[tuple[str, str]] = []
    for block in judgment_ratings:
        if not isinstance(block, dict):
            continue
        ratings = block.get("ratings")
        texts = [_rating(r) for r in ratings if isinstance(r, dict)] \
            if isinstance(ratings, list) else []
        texts.sort(key=utf16_key)
        query = block.get("query")
        rows.append(("" if query is None else java_string(query), _join(texts)))
    rows.sort(key=lambda row: utf16_key(row[0]))
    return _join(['{"query":' + _string(query) + ',"ratings":' + ratings + "}"
                  for query, ratings in rows])


def judgments_json(docs: list[dict[str, Any]]) -> str:
    """One ``{"rows": [...]}`` per judgment, in the experiment's order."""
    return _join(['{"rows":' + _rows(doc.get("judgmentRatings")) + "}" for doc in docs])


#: what a remote search configuration's signature covers: what decides the hits it answers
#: (never the password, nor the rate, concurrency and cache settings)
REMOTE_DEFINITION = ("connectionUrl", "username", "queryTemplate", "responseTemplate")


def is_remote_doc(doc: dict[str, Any]) -> bool:
    """A stored remote search configuration (issue 47) rather than a local one."""
    return "connectionUrl" in doc and "index" not in doc


def remote_configuration_json(doc: dict[str, Any]) -> str:
    """A remote search configuration in the signature: ``{"connectionUrl", "queryTemplate",
    "responseTemplate", "type": "remote", "username"}`` (keys sorted, absent ones null). The
    plugin has no remote configurations, so this form is the workbench's own; an experiment of
    local configurations only hashes exactly as the plugin does."""
    return jackson({**{key: doc.get(key) for key in REMOTE_DEFINITION}, "type": "remote"})


def configurations_json(docs: list[dict[str, Any]]) -> str:
    """One ``{"index", "pipeline", "query"}`` per configuration, in the experiment's order;
    ``query`` is a string (``search_body``); a remote one as ``remote_configuration_json``."""
    out = []
    for doc in docs:
        if is_remote_doc(doc):
            out.append(remote_configuration_json(doc))
            continue
        pipeline = doc.get("searchPipeline")
        out.append('{"index":' + jackson(doc.get("index"))
                   + ',"pipeline":' + jackson("" if pipeline is None else pipeline)
                   + ',"query":' + _string(search_body(doc.get("query"))) + "}")
    return _join(out)


def canonical_inputs(query_set: dict[str, Any], judgments: list[dict[str, Any]],
                     configs: list[dict[str, Any]]) -> dict[str, str]:
    """The canonical JSON of each input, the strings whose hashes are the signature."""
    return {"query_set": query_set_json(query_set),
            "judgment_list": judgments_json(judgments),
            "search_configurations": configurations_json(configs)}


def signature(query_set: dict[str, Any], judgments: list[dict[str, Any]],
              configs: list[dict[str, Any]]) -> dict[str, str]:
    """The ``inputSignature`` of the stored documents of an experiment's inputs (configurations
    and judgments in the experiment's order), as the plugin computes it."""
    return {name: sha256(text)
            for name, text in canonical_inputs(query_set, judgments, configs).items()}


# -- the form the workbench stored before it matched the plugin ----------------------------------

def _legacy_hash(value: Any) -> str:
    text = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode()).hexdigest()


def _legacy_query(text: str) -> Any:
    try:
        parsed = json.loads(text)
    except ValueError:
        return text
    if isinstance(parsed, dict):
        for key in ("from", "size", "profile"):
            parsed.pop(key, None)
    return parsed


def legacy_signature(query_set: dict[str, Any], judgments: list[dict[str, Any]],
                     configs: list[dict[str, Any]]) -> dict[str, str]:
    """The signature the workbench stored before it computed the plugin's (Python's JSON of a
    bare sorted list of texts, bare rows, and each query as an object). Frozen: experiments that
    ran then still validate (docs/contract.md, "Input signature")."""
    rows = [sorted(({"query": r.get("query"),
                     "ratings": sorted(r.get("ratings") or [],
                                       key=lambda x: (str(x.get("docId")), str(x.get("rating"))))}
                    for r in j.get("judgmentRatings") or []),
                   key=lambda row: str(row["query"]))
            for j in judgments]
    return {
        "query_set": _legacy_hash(sorted(e.query_text for e in read_entries(query_set))),
        "judgment_list": _legacy_hash(rows),
        "search_configurations": _legacy_hash([
            {"index": c.get("index"), "pipeline": c.get("searchPipeline") or "",
             "query": _legacy_query(str(c.get("query", "")))} for c in configs]),
    }


# -- validate -------------------------------------------------------------------------------

UNAVAILABLE = ("Experiment input signature is not available for this experiment (legacy or "
               "in-flight run).")
VALID = "Experiment inputs match the stored execution fingerprint."
GONE = {
    "query_set": "QuerySet has changed or is no longer available.",
    "search_configurations": "One or more search configurations have changed or are no longer "
                             "available.",
    "judgment_list": "One or more judgments have changed or are no longer available.",
}
CHANGED = {
    "query_set": "QuerySet has changed since execution.",
    "judgment_list": "Judgment data has changed since execution.",
    "search_configurations": "Search configuration data has changed since execution.",
}
SEVERAL_CHANGED = "One or more experiment inputs have changed since execution."


def stored_signature(experiment: dict[str, Any]) -> dict[str, str] | None:
    """The experiment's ``inputSignature`` if it holds the three hashes as strings (else the
    plugin reads none)."""
    stored = experiment.get("inputSignature")
    if not isinstance(stored, dict) or not all(isinstance(stored.get(n), str) for n in INPUTS):
        return None
    return {name: stored[name] for name in INPUTS}


def _ids(value: Any) -> list[str]:
    return [str(v) for v in value if v is not None] if isinstance(value, list) else []


def _source(client: OpenSearch, index: str, entity_id: str) -> dict[str, Any] | None:
    return Repository(client, index).get_source(entity_id) if entity_id else None


def _drifted(names: list[str], message: str) -> dict[str, Any]:
    return {"status": "DRIFTED", "drifted_inputs": names, "message": message}


def validate(client: OpenSearch, experiment: dict[str, Any]) -> dict[str, Any]:
    """The ``/validate`` answer, as the plugin's: ``UNAVAILABLE`` without a stored signature;
    ``DRIFTED`` naming only the first input that is gone (the query set, then the
    configurations in order, then the judgments); else the three hashes compared (a hash of the
    workbench's former form counts as equal when it matches that form)."""
    stored = stored_signature(experiment)
    if stored is None:
        return {"status": "UNAVAILABLE", "drifted_inputs": [], "message": UNAVAILABLE}
    query_set_id = experiment.get("querySetId")
    query_set = _source(client, QUERY_SET_INDEX, "" if query_set_id is None else str(query_set_id))
    if query_set is None:
        return _drifted(["query_set"], GONE["query_set"])
    configs = []
    remote = set(_ids(experiment.get("remoteSearchConfigurationIds")))
    for config_id in _ids(experiment.get("searchConfigurationList")):
        config = _source(client, REMOTE_CONFIG_INDEX if config_id in remote
                         else SEARCH_CONFIG_INDEX, config_id)
        if config is None:
            return _drifted(["search_configurations"], GONE["search_configurations"])
        configs.append(config)
    judgments = []
    for judgment_id in _ids(experiment.get("judgmentList")):
        judgment = _source(client, JUDGMENT_INDEX, judgment_id)
        if judgment is None:
            return _drifted(["judgment_list"], GONE["judgment_list"])
        judgments.append(judgment)
    now = signature(query_set, judgments, configs)
    drifted = [name for name in INPUTS if stored[name] != now[name]]
    if drifted:
        try:
            legacy = legacy_signature(query_set, judgments, configs)
        except (AttributeError, TypeError, ValueError):  # inputs the former form could not hash
            legacy = {}
        drifted = [name for name in drifted if stored[name] != legacy.get(name)]
    if not drifted:
        return {"status": "VALID", "drifted_inputs": [], "message": VALID}
    return _drifted(drifted, CHANGED[drifted[0]] if len(drifted) == 1 else SEVERAL_CHANGED)
