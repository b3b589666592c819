"""Why queries cannot be generated from an index, each with the message a client reads."""

from __future__ import annotations

from collections.abc import Sequence


class GenerationError(Exception):
    """Query generation cannot start from what it was given; the message says why."""


class UnknownIndex(GenerationError):
    """The source index (or alias, or pattern) names no index."""

    def __init__(self, index: str) -> None:
        super().__init__(f"index [{index}] does not exist")
        self.index = index


class UnknownContextFields(GenerationError):
    """Context fields the index mapping does not have, named in the order the client gave."""

    def __init__(self, fields: Sequence[str]) -> None:
        super().__init__(
            f"Context fields [{', '.join(fields)}] do not exist in the index mapping")
        self.fields = list(fields)


class UnusableStratifyField(GenerationError):
    """The field to draw by is not one whose values can be counted (a keyword field)."""

    def __init__(self, field: str) -> None:
        super().__init__(f"cannot draw documents by [{field}]: it has no keyword values in the "
                         "index")
        self.field = field
