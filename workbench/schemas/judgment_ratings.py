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

from workbench.errors import BadRequest
from workbench.schemas.body import BodyField, BodySchema, Step, StepSchema
from workbench.schemas.javafmt import double_to_string, java_string

SizeError = Callable[[list[dict[str, Any]]], str | None]
RELEVANT_IRRELEVANT = "RELEVANT_IRRELEVANT"
# What Java's Float.parseFloat reads (after trimming), minus NaN and Infinity. Possessive: a long
# digit run that fails at its end is not retried split in two (that was quadratic).
_FLOAT = re.compile(r"^[+-]?(?:\d++(?:\.\d*+)?|\.\d++)(?:[eE][+-]?\d++)?[fFdD]?$")


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
    if not _FLOAT.match(text.strip()) or not math.isfinite(float(text.strip().rstrip("fFdD"))):
        raise ValidationError(f"rating '{text}' for queryText {query} must be a valid float")
    if abs(float(text.strip().rstrip("fFdD"))) > float_max:
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


class _Edits(BodyField):
    """(query, docId, rating) triples, at least one."""

    def check(self, value: Any) -> list[tuple[str, str, Any]]:
        if value is None:
            raise ValidationError("judgmentRatings is required")
        if not isinstance(value, list):
            raise ValidationError(_EDIT_SHAPE)
        edits = []
        for entry in value:
            if not isinstance(entry, dict):
                raise ValidationError(_EDIT_SHAPE)
            if not isinstance(entry.get("ratings"), list):
                raise ValidationError("each entry must have a ratings list")
            for rating in entry["ratings"]:
                if (not isinstance(rating, dict) or not entry.get("query")
                        or not rating.get("docId") or rating.get("rating") is None):
                    raise ValidationError("each rating must have a query, docId and rating")
                edits.append((str(entry["query"]), str(rating["docId"]), rating["rating"]))
        if not edits:
            raise ValidationError("at least one rating is required")
        return edits


class RatingEditsSchema(BodySchema):
    """``PUT /judgments/{id}``: the ratings to change in an LLM judgment."""

    judgmentRatings = _Edits()


def edited_rating(value: Any, doc_id: str, rating_type: str) -> str:
    """One edited rating as stored, on the judgment's scale (``rating_type``): a 400 when it is
    not a number on that scale. Checked edit by edit, as each is applied."""
    try:
        if isinstance(value, bool):
            raise ValueError
        number = float(value)
    except (TypeError, ValueError):
        raise BadRequest(f"rating '{value}' for docId {doc_id} must be a number") from None
    if rating_type == RELEVANT_IRRELEVANT:
        if number not in (0.0, 1.0):
            raise BadRequest(f"rating '{value}' for docId {doc_id} must be 0 or 1 for a "
                             "RELEVANT_IRRELEVANT judgment")
    elif not 0.0 <= number <= 1.0:
        raise BadRequest(f"rating '{value}' for docId {doc_id} must be a number between 0 "
                         "and 1 for a SCORE0_1 judgment")
    return double_to_string(number)


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
