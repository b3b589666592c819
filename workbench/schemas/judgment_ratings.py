"""The ratings in request bodies: an ``IMPORT_JUDGMENT``'s ``judgmentRatings``, the ratings
edit (``PUT /judgments/{id}``) and the agreement of two lists (``POST /judgments/_compare``).

The judgment size limits (``size_error``, the largest storable rating) are the domain's
(judgments/limits.py): the schemas are given them. So are the lists ``_compare`` reads and its
default threshold (the experiments' relevance rule).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from marshmallow import ValidationError

from workbench.errors import SearchRelevanceError, TextError
from workbench.schemas.body import BodyField, BodySchema, Step, StepSchema
from workbench.schemas.javafmt import JAVA_BLANK, JAVA_DECIMAL, JAVA_HEX, java_string

SizeError = Callable[[list[dict[str, Any]]], str | None]
RELEVANT_IRRELEVANT = "RELEVANT_IRRELEVANT"


# -- IMPORT_JUDGMENT ------------------------------------------------------------------------------

def rating_text(value: Any, query: str, doc_id: str, float_max: float) -> str:
    """The stored string of one rating: a string as given, a number the Java way. It must fit
    the index's ``float`` field (at most ``float_max``), or the finished judgment could not be
    stored."""
    if value is None:
        raise ValidationError(f"rating for queryText {query} must not be null")
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise ValidationError(
            f"rating '{java_string(value)}' for queryText {query} must be a valid float")
    text = value if isinstance(value, str) else java_string(value)
    trimmed = text.strip(JAVA_BLANK)
    if not JAVA_DECIMAL.fullmatch(trimmed) or not math.isfinite(float(trimmed.rstrip("fFdD"))):
        raise ValidationError(f"rating '{text}' for queryText {query} must be a valid float")
    if abs(float(trimmed.rstrip("fFdD"))) > float_max:
        raise ValidationError(f"rating '{text}' for queryText {query} and docId {doc_id} is "
                              f"outside the float range (at most {float_max} in magnitude)")
    return text


def imported_ratings(raw: Any, float_max: float, size_error: SizeError) -> list[dict[str, Any]]:
    """``judgmentRatings`` as stored: entries in input order (repeated queries stay separate
    entries), duplicate docIds within an entry collapsed, last wins.

    A rating given exactly as it is stored (``{"docId": "...", "rating": "..."}``, both
    strings, in that order) is kept, not copied: the stored list then shares those objects with
    ``raw``, which nothing changes afterwards. A 500,000-rating import held 93 MB more while it
    was stored when every rating was copied."""
    if raw is None:
        raise ValidationError("judgmentRatings is required for IMPORT_JUDGMENT")
    if not isinstance(raw, list):
        raise ValidationError("judgmentRatings must be a list of {query, ratings} objects")
    entries = []
    for item in raw:
        if not isinstance(item, dict) or item.get("query") is None:
            raise ValidationError(
                "each judgmentRatings entry must have a query and a list of ratings")
        query = java_string(item["query"])
        ratings = item.get("ratings")
        if not isinstance(ratings, list):
            raise ValidationError(f"queryText {query} must have a list of rating data.")
        by_doc: dict[str, dict[str, Any]] = {}
        for rating in ratings:
            if not isinstance(rating, dict):
                raise ValidationError(f"queryText {query} must have a list of rating data.")
            doc_id = rating.get("docId")
            if doc_id is None or (isinstance(doc_id, str) and not doc_id.strip()):
                raise ValidationError(f"docId for queryText {query} must not be null or empty")
            doc = java_string(doc_id)
            value = rating.get("rating")
            text = rating_text(value, query, doc, float_max)
            as_stored = doc is doc_id and text is value and len(rating) == 2 \
                and next(iter(rating)) == "docId"
            by_doc[doc] = rating if as_stored else {"docId": doc, "rating": text}
        entries.append({"query": query, "ratings": list(by_doc.values())})
    error = size_error(entries)
    if error:
        raise ValidationError(error)
    return entries


class _Imported(BodyField):
    def check(self, value: Any) -> list[dict[str, Any]]:
        schema = self.parent
        assert isinstance(schema, ImportedRatingsSchema)
        return imported_ratings(value, schema.float_max, schema.size_error)


class ImportedRatingsSchema(BodySchema):
    """``{"judgmentRatings": [...]}``: an imported list alone (the job reads its stored list
    again with it)."""

    judgmentRatings = _Imported()

    def __init__(self, float_max: float, size_error: SizeError, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.float_max, self.size_error = float_max, size_error


# -- PUT /judgments/{id} --------------------------------------------------------------------------

_EDIT_SHAPE = "expected a list of {query, ratings:[{docId, rating}]} objects"
SCALES = ("SCORE0_1", RELEVANT_IRRELEVANT)
_SPECIAL = re.compile(r"[+-]?(?:NaN|Infinity)")  # Double.parseDouble reads these too


def _text(value: Any) -> str | None:
    """A body value as the plugin reads it: ``String.valueOf`` of the parsed JSON, or null."""
    return None if value is None else java_string(value)


def _blank(value: str | None) -> bool:
    return value is None or not value.strip(JAVA_BLANK)


class _Edits(BodyField):
    """(query, docId, rating) triples, at least one, each value the text the plugin reads
    (a number as Java prints it: ``1`` is ``"1"``, ``1.0`` is ``"1.0"``). The plugin checks
    the body in its REST handler and answers a failure as a bare ``text/plain`` 400 with its
    message, in its order: the list is read entry by entry (a value of the wrong kind stops it
    there), then emptiness, then blank or missing values."""

    def check(self, value: Any) -> list[tuple[str, str, str]]:
        if value is None:
            raise TextError(400, "judgmentRatings is required")
        if not isinstance(value, list):
            raise TextError(400, _EDIT_SHAPE)
        edits: list[tuple[str | None, str | None, str | None]] = []
        for entry in value:
            if not isinstance(entry, dict):
                raise TextError(400, _EDIT_SHAPE)
            ratings = entry.get("ratings")
            if ratings is None:
                raise TextError(400, "each entry must have a ratings list")
            if not isinstance(ratings, list):
                raise TextError(400, _EDIT_SHAPE)
            for rating in ratings:
                if not isinstance(rating, dict):
                    raise TextError(400, _EDIT_SHAPE)
                edits.append((_text(entry.get("query")), _text(rating.get("docId")),
                              _text(rating.get("rating"))))
        if not edits:
            raise TextError(400, "at least one rating is required")
        complete = []
        for query, doc_id, rating_value in edits:
            if query is None or doc_id is None or rating_value is None or any(
                    _blank(v) for v in (query, doc_id, rating_value)):
                raise TextError(400, "each rating must have a query, docId and rating")
            complete.append((query, doc_id, rating_value))
        return complete


class RatingEditsSchema(BodySchema):
    """``PUT /judgments/{id}``: the ratings to change in an LLM judgment."""

    judgmentRatings = _Edits()


def java_double(text: str) -> float | None:
    """Java's ``Double.parseDouble(text)``, or None where it throws."""
    trimmed = text.strip(JAVA_BLANK)
    if JAVA_DECIMAL.fullmatch(trimmed) or _SPECIAL.fullmatch(trimmed):
        return float(trimmed.rstrip("fFdD"))
    if JAVA_HEX.fullmatch(trimmed):
        return float.fromhex(trimmed.rstrip("fFdD"))
    return None


def rating_type_of(metadata: dict[str, Any]) -> str:
    """The scale an LLM judgment records (``llmJudgmentRatingType``): none, or a value that is
    not a string, is the default ``SCORE0_1`` (judgments made before the field); a string must
    name a scale, else 400 with the plugin's message and its cause."""
    value = metadata.get("llmJudgmentRatingType")
    if not isinstance(value, str):
        return "SCORE0_1"
    if value not in SCALES:
        raise SearchRelevanceError(
            f"Judgment records an unrecognized rating type [{value}]; cannot edit ratings", 400,
            cause={"type": "illegal_argument_exception", "reason": "No enum constant "
                   f"org.opensearch.searchrelevance.model.LLMJudgmentRatingType.{value}"})
    return value


def check_scale(edits: list[tuple[str, str, str]], rating_type: str) -> None:
    """Every edited rating on the judgment's scale, checked before any query or document is
    looked up: a 400 naming the first that is not a number, or not on the scale."""
    for _query, doc_id, text in edits:
        number = java_double(text)
        if number is None:
            requirement = "must be a number"
        elif rating_type == RELEVANT_IRRELEVANT:
            requirement = "" if number in (0.0, 1.0) else "must be 0 or 1"
        else:
            requirement = "" if math.isfinite(number) and 0.0 <= number <= 1.0 \
                else "must be a number between 0 and 1"
        if requirement:
            raise SearchRelevanceError(f"rating '{text}' for docId {doc_id} {requirement} for a "
                                       f"{rating_type} judgment", 400)


def apply_edits(entries: list[dict[str, Any]], edits: list[tuple[str, str, str]]) -> None:
    """Set each edited rating in ``entries`` (the first entry of its query, the first rating
    of its document): a rated document gets the new value, a failed one is rated and leaves
    ``failures`` (the key goes when none is left). A query the judgment lacks is a 404, a
    document neither rated nor failed under it a 400; nothing is written then."""
    for query, doc_id, rating in edits:
        entry = next((e for e in entries if isinstance(e, dict) and e.get("query") is not None
                      and java_string(e["query"]) == query), None)
        if entry is None:
            raise SearchRelevanceError(f"Query not found in judgment: {query}", 404)
        ratings = entry.setdefault("ratings", [])
        failures = entry.get("failures") or []
        existing = next((r for r in ratings if r.get("docId") is not None
                         and java_string(r["docId"]) == doc_id), None)
        if existing is not None:
            existing["rating"] = rating
        elif any(f.get("docId") is not None and java_string(f["docId"]) == doc_id
                 for f in failures):
            ratings.append({"docId": doc_id, "rating": rating})
            entry["failures"] = [f for f in failures if f.get("docId") is None
                                 or java_string(f["docId"]) != doc_id]
            if not entry["failures"]:
                del entry["failures"]
        else:
            raise SearchRelevanceError(
                f"Document {doc_id} is not part of query [{query}] in this judgment", 400)


# -- POST /judgments/_compare ---------------------------------------------------------------------

@dataclass(frozen=True)
class CompareRules:
    """``judgment(id)``: the COMPLETED list (a 404 or 409 raised as it is);
    ``default_threshold(ratings)``: the relevance threshold of a list given none (a
    ``ValueError`` is the 400's reason)."""

    judgment: Callable[[str], dict[str, Any]]
    default_threshold: Callable[[list[dict[str, Any]]], float]


class _JudgmentId(Step):
    """``referenceJudgmentId`` (or ``reference``), ``candidateJudgmentId`` (or ``candidate``)."""

    def __init__(self, role: str, **kwargs: Any) -> None:
        super().__init__(data_key=f"{role}JudgmentId", **kwargs)
        self.role = role

    def check(self, value: Any) -> str:
        value = self.body.get(f"{self.role}JudgmentId", self.body.get(self.role))
        if not isinstance(value, str) or not value.strip():
            raise ValidationError(f"{self.role}JudgmentId is required")
        return value


class _Lists(Step):
    """The two stored lists, by role; not a field of the body."""

    def check(self, value: Any) -> dict[str, dict[str, Any]]:
        ids = {role: self.loaded[role] for role in ("reference", "candidate")}
        if ids["reference"] == ids["candidate"]:
            raise ValidationError("A judgment list cannot be compared with itself; give two "
                                  "different judgment ids")
        return {role: self.rules.judgment(judgment_id) for role, judgment_id in ids.items()}


class _Threshold(Step):
    """A number, else the relevance rule over the list's ratings."""

    def __init__(self, role: str, **kwargs: Any) -> None:
        super().__init__(data_key=f"{role}Threshold", **kwargs)
        self.role = role

    def check(self, value: Any) -> float:
        if value is not None:
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise ValidationError(f"{self.role}Threshold must be a number, got: {value}")
            return float(value)
        ratings = self.loaded["lists"][self.role].get("judgmentRatings") or []
        try:
            return float(self.rules.default_threshold(ratings))
        except ValueError as exc:
            raise ValidationError(str(exc)) from exc


class CompareSchema(StepSchema):
    """``POST /judgments/_compare``: two different COMPLETED lists and their thresholds."""

    reference = _JudgmentId("reference")
    candidate = _JudgmentId("candidate")
    lists = _Lists(data_key="_lists")
    referenceThreshold = _Threshold("reference")
    candidateThreshold = _Threshold("candidate")

    def __init__(self, rules: CompareRules, **kwargs: Any) -> None:
        super().__init__(rules, **kwargs)
