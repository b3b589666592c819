"""The body of ``POST /_plugins/_ml/models/{model_id}/_predict`` for a model the workbench
registers (any other id goes to the cluster's ML Commons, body unread).

Dashboards' prompt validation sends chat messages as ``parameters.messages`` (a list, or a
connector-style JSON string of one); ``parameters.prompt`` is one user message. System messages
become the system prompt, every other message the user prompt (workbench/api/ml.py calls the
model with them).
"""

from __future__ import annotations

import json
from typing import Any, NamedTuple

from marshmallow import ValidationError

from workbench.schemas.body import BodyField, BodySchema

NOT_AN_OBJECT = "parameters must be an object holding messages or prompt"
NOT_JSON = "parameters.messages must be a list of {role, content}"
NOT_MESSAGES = "parameters.messages must be a non-empty list of {role, content}"


class Prompt(NamedTuple):
    """What the model is asked: the system messages' contents, and the others', each joined
    by a blank line."""

    system: str
    user: str


class _Parameters(BodyField):
    """``parameters``: an object holding ``messages`` or ``prompt``, loaded as the ``Prompt``."""

    def check(self, value: Any) -> Prompt:
        if not isinstance(value, dict):
            raise ValidationError(NOT_AN_OBJECT)
        messages = value.get("messages")
        if messages is None and isinstance(value.get("prompt"), str):
            messages = [{"role": "user", "content": value["prompt"]}]
        if isinstance(messages, str):  # a connector-style JSON string of messages
            try:
                messages = json.loads(messages)
            except ValueError:
                raise ValidationError(NOT_JSON) from None
        if not isinstance(messages, list) or not messages or not all(
                isinstance(m, dict) and isinstance(m.get("content"), str) for m in messages):
            raise ValidationError(NOT_MESSAGES)
        return Prompt("\n\n".join(m["content"] for m in messages if m.get("role") == "system"),
                      "\n\n".join(m["content"] for m in messages if m.get("role") != "system"))


class PredictSchema(BodySchema):
    """A ``_predict`` body: ``parameters`` (required), loaded as the ``Prompt``."""

    parameters = _Parameters()
