"""The graded checklist rubric ``_evaluate`` asks an LLM to apply: 0-3 with a confidence and a
one-sentence justification per result. Ratings of 2 and 3 count as relevant."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any

from workbench.judgments.llm_parse import rating_elements

RUBRIC_TYPE = "RUBRIC0_3"
RELEVANT_FROM = 2
GRADES = {3: "highly relevant", 2: "moderately relevant", 1: "partially relevant",
          0: "not relevant"}

SYSTEM_PROMPT = """You are an expert search relevance assessor. For the search query and each \
numbered result, work through this checklist:
1. Intent: does the result serve what the searcher is looking for (the main product, topic \
or answer)?
2. Constraints: does it satisfy the explicit attributes of the query (type, brand, colour, \
size, audience, quantity...)? A result that violates one is at best partially relevant.
3. Reference: when a reference answer is given, does the result agree with it?
4. Usefulness: would the searcher be satisfied to see this result for this query?

Then grade each result:
3 = highly relevant: matches the intent and every constraint.
2 = moderately relevant: matches the intent, misses or is unclear on a minor constraint.
1 = partially relevant: related (same category, accessory, substitute) but not what was asked.
0 = not relevant.

Give your confidence in the grade between 0 and 1, and a one-sentence justification that names \
the deciding checklist item. Rate EVERY result. Answer ONLY with a JSON object of the form \
{"ratings": [{"id": "<result id>", "grade": <0-3>, "confidence": <0-1>, \
"justification": "<one sentence>"}]} and nothing else."""


def response_format() -> dict[str, Any]:
    item = {
        "type": "object",
        "properties": {
            "id": {"type": "string"},
            "grade": {"type": "integer", "enum": [0, 1, 2, 3]},
            "confidence": {"type": "number"},
            "justification": {"type": "string"},
        },
        "required": ["id", "grade", "confidence", "justification"],
        "additionalProperties": False,
    }
    return {"type": "json_schema", "json_schema": {
        "name": "rubric_response", "strict": True,
        "schema": {"type": "object", "properties": {"ratings": {"type": "array", "items": item}},
                   "required": ["ratings"], "additionalProperties": False}}}


def user_prompt(query: str, reference: str | None, results: list[tuple[str, str]]) -> str:
    """The query, the optional reference answer and the results as a JSON array."""
    lines = [f"Query: {query}"]
    if reference:
        lines.append(f"Reference answer: {reference}")
    lines.append("Results: " + json.dumps([{"id": i, "content": c} for i, c in results],
                                          ensure_ascii=False))
    return "\n".join(lines)


@dataclass(frozen=True)
class Grade:
    grade: int
    confidence: float | None
    justification: str

    @property
    def relevant(self) -> bool:
        return self.grade >= RELEVANT_FROM


def parse(text: str, allowed_ids: set[str]) -> dict[str, Grade]:
    """The grade of each result the model rated; ids it was not asked about are dropped, grades
    outside 0-3 are refused. Raises ``ParseFailure`` when no JSON ratings can be found."""
    out: dict[str, Grade] = {}
    for element in rating_elements(text):
        if not isinstance(element, dict):
            continue
        doc_id = str(element.get("id", ""))
        if doc_id not in allowed_ids:
            continue
        raw = element.get("grade", element.get("rating", element.get("rating_score")))
        if isinstance(raw, bool) or not isinstance(raw, (int, float)) or not math.isfinite(raw):
            continue
        if raw not in (0, 1, 2, 3):
            continue
        confidence = element.get("confidence")
        if isinstance(confidence, bool) or not isinstance(confidence, (int, float)) \
                or not 0 <= confidence <= 1:
            confidence = None
        justification = element.get("justification") or ""
        out[doc_id] = Grade(int(raw), None if confidence is None else float(confidence),
                            str(justification).strip())
    return out
