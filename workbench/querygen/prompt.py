"""What the model that writes a generated set's queries is asked (docs/cold-start.md, "How
queries are asked"): read by ``querygen.llm``, which asks, and ``querygen.cost``, which counts
the calls before they are made."""

from __future__ import annotations

import json
from typing import Any

from workbench.querygen.documents import SourceDocument

SYSTEM = (
    "You write the search queries real users type into a search box. Given one document of "
    "a search index, write one query a user would type to find exactly this document. "
    "Answer with JSON only: {\"query\": \"...\"}."
)
INSTRUCTIONS = {
    "lexical": "Write a short keyword query (2 to 6 words) using words from the document, as a "
               "user who knows what the product is called would type it.",
    "semantic": "Write a short query (3 to 10 words) that describes what the user needs, in "
                "other words than the document's, as a user who does not know the product's "
                "name would type it.",
}
RESPONSE_FORMAT: dict[str, Any] = {
    "type": "json_schema",
    "json_schema": {
        "name": "generated_query",
        "strict": True,
        "schema": {"type": "object", "properties": {"query": {"type": "string"}},
                   "required": ["query"], "additionalProperties": False},
    },
}


def user_prompt(document: SourceDocument, category: str) -> str:
    """What the model is shown: the instruction of the category and the document's fields."""
    shown = json.dumps(document.fields, ensure_ascii=False, default=str)
    return f"{INSTRUCTIONS[category]}\n\nDocument:\n{shown}"
