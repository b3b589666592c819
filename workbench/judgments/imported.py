"""IMPORT_JUDGMENT: ratings made outside the workbench (docs/contract.md, "Imported judgments")."""

from __future__ import annotations

import math
import re
from typing import Any

from workbench.errors import BadRequest
from workbench.judgments.limits import FLOAT_MAX, size_error
from workbench.schemas.javafmt import java_string

# What Java's Float.parseFloat reads (after trimming), minus NaN and Infinity. Possessive: a long
# digit run that fails at its end is not retried split in two (that was quadratic).
_FLOAT = re.compile(r"^[+-]?(?:\d++(?:\.\d*+)?|\.\d++)(?:[eE][+-]?\d++)?[fFdD]?$")


def rating_text(value: Any, query: str, doc_id: str) -> str:
    """The stored string of one rating: a string as given, a number the Java way. It must fit
    the index's ``float`` field, or the finished judgment could not be stored."""
    if value is None:
        raise BadRequest(f"rating for queryText {query} must not be null")
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise BadRequest(
            f"rating '{java_string(value)}' for queryText {query} must be a valid float")
    text = value if isinstance(value, str) else java_string(value)
    if not _FLOAT.match(text.strip()) or not math.isfinite(float(text.strip().rstrip("fFdD"))):
        raise BadRequest(f"rating '{text}' for queryText {query} must be a valid float")
    if abs(float(text.strip().rstrip("fFdD"))) > FLOAT_MAX:
        raise BadRequest(f"rating '{text}' for queryText {query} and docId {doc_id} is outside "
                         f"the float range (at most {FLOAT_MAX} in magnitude)")
    return text


def build(raw: Any) -> list[dict[str, Any]]:
    """Validate ``judgmentRatings`` and return them as stored: entries in input order (repeated
    queries stay separate entries), duplicate docIds within an entry collapsed, last wins."""
    if raw is None:
        raise BadRequest("judgmentRatings is required for IMPORT_JUDGMENT")
    if not isinstance(raw, list):
        raise BadRequest("judgmentRatings must be a list of {query, ratings} objects")
    entries = []
    for item in raw:
        if not isinstance(item, dict) or item.get("query") is None:
            raise BadRequest("each judgmentRatings entry must have a query and a list of ratings")
        query = java_string(item["query"])
        ratings = item.get("ratings")
        if not isinstance(ratings, list):
            raise BadRequest(f"queryText {query} must have a list of rating data.")
        by_doc: dict[str, str] = {}
        for rating in ratings:
            if not isinstance(rating, dict):
                raise BadRequest(f"queryText {query} must have a list of rating data.")
            doc_id = rating.get("docId")
            if doc_id is None or (isinstance(doc_id, str) and not doc_id.strip()):
                raise BadRequest(f"docId for queryText {query} must not be null or empty")
            doc = java_string(doc_id)
            by_doc[doc] = rating_text(rating.get("rating"), query, doc)
        entries.append({"query": query,
                        "ratings": [{"docId": d, "rating": r} for d, r in by_doc.items()]})
    error = size_error(entries)
    if error:
        raise BadRequest(error)
    return entries
