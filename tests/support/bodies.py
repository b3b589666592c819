"""What the schema unit tests share: the reason a body is refused with."""

from __future__ import annotations

from typing import Any

import pytest
from marshmallow import Schema

from workbench.errors import BadRequest
from workbench.schemas.body import load


def reason(schema: Schema, body: dict[str, Any]) -> str:
    """The reason of the plain 400 (``illegal_argument_exception``) ``schema`` refuses
    ``body`` with; fails when the body loads or is refused otherwise."""
    with pytest.raises(BadRequest) as caught:
        load(schema, body)
    assert type(caught.value) is BadRequest
    assert caught.value.status == 400
    assert caught.value.error_type == "illegal_argument_exception"
    return caught.value.reason
