"""IMPORT_JUDGMENT: ratings made outside the workbench (docs/contract.md, "Imported judgments")."""

from __future__ import annotations

from typing import Any

from workbench.judgments.limits import FLOAT_MAX, size_error
from workbench.schemas.body import load
from workbench.schemas.judgment_ratings import ImportedRatingsSchema


def build(raw: Any) -> list[dict[str, Any]]:
    """``judgmentRatings`` checked (schemas/judgment_ratings.py, with this package's size limits)
    and as stored; a 400 with the first error. The create checks them with it, and the job reads
    the stored list with it again."""
    fields = load(ImportedRatingsSchema(FLOAT_MAX, size_error), {"judgmentRatings": raw})
    ratings: list[dict[str, Any]] = fields["judgmentRatings"]
    return ratings
