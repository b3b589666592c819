"""Graded rubrics an LLM judge applies: the scale, the instructions, the structured answer it
must give and how that answer is read.

``CHECKLIST_0_3`` is the workbench's own: a 0-3 checklist with a confidence between 0 and 1 and
a one-sentence justification per result; 2 and 3 count as relevant. ``CHECKLIST_1_4`` is the
scale of the retrieval-evaluation API ``_evaluate`` also speaks: yes/no questions per grade, a
grade from 1 to 4 (3 and 4 relevant) and a confidence from 1 to 5. Either is chosen by the llm
judge's ``scale`` option. The prompt text keys the judgment cache, so changing a word of it makes
every grade asked anew.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from workbench.judges.base import Scale
from workbench.judges.ratings import rating_elements

CHECKLIST_TEXT = """You are an expert search relevance assessor. For the search query and each \
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

YES_NO_TEXT = """You are an expert search relevance assessor. For the search query and each \
result, answer the following yes/no questions in order and stop at the first "yes":
Q1. Highly relevant? Does the result give exactly what the searcher wants: it answers the query \
fully or is the very item sought, with every stated requirement met? If yes, the grade is 4.
Q2. Moderately relevant? Does it serve the main intent of the query, with only a small gap \
(an incomplete answer, a minor requirement missed or unclear)? If yes, the grade is 3.
Q3. Partially relevant? Is it on the query's subject (related item, accessory, substitute, \
background) without giving what was asked? If yes, the grade is 2.
Q4. Not relevant? Otherwise: the result does not help with this query. The grade is 1.
When a reference answer is given, a result that contradicts it cannot be graded above 2.

For EVERY result give one final grade from 1 to 4, your confidence in that grade from 1 \
(a guess) to 5 (certain), and a one-sentence justification naming the question that decided \
it. Answer ONLY with a JSON object of the form {"ratings": [{"id": "<result id>", \
"grade": <1-4>, "confidence": <1-5>, "justification": "<one sentence>"}]} and nothing else."""


@dataclass(frozen=True)
class Grade:
    grade: int
    confidence: float | None
    justification: str


@dataclass(frozen=True)
class Rubric:
    """One rubric: ``code`` names it in the judgment cache key (with the prompt), ``scale`` its
    grades, ``confidence`` the range a confidence must fall in to be kept."""

    code: str
    scale: Scale
    system_prompt: str
    confidence: tuple[float, float] = (0.0, 1.0)

    def relevant(self, grade: int) -> bool:
        return grade >= self.scale.relevant_from

    def response_format(self) -> dict[str, Any]:
        """The json_schema structured answer: ``{"ratings": [{id, grade, confidence,
        justification}]}``."""
        item = {
            "type": "object",
            "properties": {
                "id": {"type": "string"},
                "grade": {"type": "integer", "enum": self.scale.grades()},
                "confidence": {"type": "number"},
                "justification": {"type": "string"},
            },
            "required": ["id", "grade", "confidence", "justification"],
            "additionalProperties": False,
        }
        return {"type": "json_schema", "json_schema": {
            "name": "rubric_response", "strict": True,
            "schema": {"type": "object",
                       "properties": {"ratings": {"type": "array", "items": item}},
                       "required": ["ratings"], "additionalProperties": False}}}

    def sample_answer(self, ids: Sequence[str]) -> str:
        """A usable answer grading ``ids``, with a sentence-long justification each: what the
        output bound of a call is sized from (``llm.structured.answer_bound``)."""
        sentence = "Matches the intent but misses the stated brand, so it is moderately relevant."
        return json.dumps({"ratings": [
            {"id": i, "grade": self.scale.relevant_from, "confidence": self.confidence[1],
             "justification": sentence} for i in ids]}, ensure_ascii=False)

    def user_prompt(self, query: str, references: Sequence[str],
                    results: list[tuple[str, str]]) -> str:
        """The query, its reference answers if any and the results as a JSON array."""
        lines = [f"Query: {query}"]
        if len(references) == 1:
            lines.append(f"Reference answer: {references[0]}")
        elif references:
            lines.append("Reference answers (a result agreeing with any of them is right): "
                         + json.dumps(list(references), ensure_ascii=False))
        lines.append("Results: " + json.dumps([{"id": i, "content": c} for i, c in results],
                                              ensure_ascii=False))
        return "\n".join(lines)

    def parse(self, text: str, allowed_ids: set[str]) -> dict[str, Grade]:
        """The usable grades of ``read``."""
        return self.read(text, allowed_ids)[0]

    def read(self, text: str, allowed_ids: set[str]) -> tuple[dict[str, Grade], dict[str, str]]:
        """The grade of each result the model rated, and why the grade of each other result it
        named was refused (off the scale, not a number); ids it was not asked about are
        dropped, a confidence out of range is dropped. Raises ``ParseFailure`` when no JSON
        ratings can be found."""
        grades = set(self.scale.grades())
        low, high = self.confidence
        out: dict[str, Grade] = {}
        refused: dict[str, str] = {}
        for element in rating_elements(text):
            if not isinstance(element, dict):
                continue
            doc_id = str(element.get("id", ""))
            if doc_id not in allowed_ids:
                continue
            raw = element.get("grade", element.get("rating", element.get("rating_score")))
            if isinstance(raw, bool) or not isinstance(raw, (int, float)) \
                    or not math.isfinite(raw) or raw not in grades:
                if doc_id not in out:
                    refused[doc_id] = (f"the model's grade {json.dumps(raw, default=str)[:40]} "
                                       f"is not on the scale {self.scale.name}")
                continue
            confidence = element.get("confidence")
            if isinstance(confidence, bool) or not isinstance(confidence, (int, float)) \
                    or not low <= confidence <= high:
                confidence = None
            justification = element.get("justification") or ""
            out[doc_id] = Grade(int(raw), None if confidence is None else float(confidence),
                                str(justification).strip())
            refused.pop(doc_id, None)
        return out, refused


CHECKLIST_0_3 = Rubric(
    code="RUBRIC0_3",
    scale=Scale("0-3", 0, 3, 2, {3: "highly relevant", 2: "moderately relevant",
                                 1: "partially relevant", 0: "not relevant"}),
    system_prompt=CHECKLIST_TEXT,
)

CHECKLIST_1_4 = Rubric(
    code="RUBRIC1_4",
    scale=Scale("1-4", 1, 4, 3, {4: "highly relevant", 3: "moderately relevant",
                                 2: "partially relevant", 1: "not relevant"}),
    system_prompt=YES_NO_TEXT,
    confidence=(1.0, 5.0),
)

RUBRICS: dict[str, Rubric] = {rubric.scale.name: rubric
                              for rubric in (CHECKLIST_0_3, CHECKLIST_1_4)}
