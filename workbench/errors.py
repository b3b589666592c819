"""The workbench's exception tree and OpenSearch's error envelope.

Every error a client sees is either the envelope
``{"error": {"root_cause": [...], "type": ..., "reason": ...}, "status": N}``, or, where the SRW
contract says so, a plain-text body (``TextError``), or, for an unreadable content type, the bare
``{"error": "<reason>", "status": 406}`` OpenSearch answers then (``NotAcceptable``).
"""

from __future__ import annotations

import re
from typing import Any

MAX_REASON_CHARS = 2_000


def clip(reason: str, limit: int = MAX_REASON_CHARS) -> str:
    """A reason of at most about ``limit`` characters: the middle of a longer one (a bad value
    it quotes) is elided with a marker, keeping how it starts and ends."""
    if len(reason) <= limit:
        return reason
    head, tail = limit * 3 // 4, limit // 4
    return f"{reason[:head]}...[{len(reason) - head - tail} characters elided]...{reason[-tail:]}"


def envelope(
    status: int, error_type: str, reason: str, caused_by: dict[str, Any] | None = None,
    details: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """OpenSearch's error body for one exception; the reason is clipped, so that a value of any
    length quoted in it costs the answer at most ``MAX_REASON_CHARS``. ``details`` are extra
    fields of the error, set beside ``type`` and ``reason`` in the error and its root cause, as
    OpenSearch sets e.g. ``index`` (``entity_id`` of a create that failed: api/creates.py)."""
    reason = clip(reason)
    extra = details or {}
    error: dict[str, Any] = {
        "root_cause": [{"type": error_type, "reason": reason, **extra}],
        "type": error_type,
        "reason": reason,
        **extra,
    }
    if caused_by:
        error["caused_by"] = caused_by
        error["root_cause"] = [caused_by]
    return {"error": error, "status": status}


def snake_case(name: str) -> str:
    """``IllegalArgumentException`` -> ``illegal_argument_exception`` (OpenSearch's type names)."""
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


class WorkbenchError(Exception):
    """An error with an HTTP status and an OpenSearch exception type."""

    status: int = 500
    error_type: str = "search_relevance_exception"

    def __init__(
        self,
        reason: str,
        status: int | None = None,
        error_type: str | None = None,
        caused_by: dict[str, Any] | None = None,
        details: dict[str, Any] | None = None,
    ) -> None:
        super().__init__(reason)
        self.reason = reason
        if status is not None:
            self.status = status
        if error_type is not None:
            self.error_type = error_type
        self.caused_by = caused_by
        self.details = details

    def body(self) -> dict[str, Any]:
        return envelope(self.status, self.error_type, self.reason, self.caused_by, self.details)


class BadRequest(WorkbenchError):
    """The client sent something invalid (400, ``illegal_argument_exception``)."""

    status = 400
    error_type = "illegal_argument_exception"


class ParseError(BadRequest):
    """The body is not valid JSON or is missing (400, ``parse_exception``)."""

    error_type = "parse_exception"


class NotFound(WorkbenchError):
    """A referenced entity does not exist (404, ``resource_not_found_exception``)."""

    status = 404
    error_type = "resource_not_found_exception"


class Conflict(WorkbenchError):
    """The entity is in a state that forbids the request (409)."""

    status = 409
    error_type = "search_relevance_exception"


class SearchRelevanceError(WorkbenchError):
    """The plugin's ``SearchRelevanceException`` with the status it carries. A ``cause`` (an
    exception that is not OpenSearch's own, e.g. Java's ``IllegalArgumentException``) is shown
    as ``caused_by`` only: OpenSearch names the exception itself as the root cause then."""

    error_type = "search_relevance_exception"

    def __init__(self, reason: str, status: int, cause: dict[str, Any] | None = None) -> None:
        super().__init__(reason, status=status)
        self.cause = cause

    def body(self) -> dict[str, Any]:
        body = envelope(self.status, self.error_type, self.reason)
        if self.cause:
            body["error"]["caused_by"] = self.cause
        return body


class AlreadyExists(Conflict):
    """A create found a document with its id (``op_type=create``): 409, as the cluster says it.
    A create with an Idempotency-Key answers its first result instead (api/creates.py)."""

    error_type = "version_conflict_engine_exception"


class MethodNotAllowedError(WorkbenchError):
    """A known path with the wrong method (405); the response carries ``Allow``."""

    status = 405
    error_type = "method_not_allowed_exception"

    def __init__(self, reason: str, allowed: list[str]) -> None:
        super().__init__(reason)
        self.allowed = allowed


class PayloadTooLarge(WorkbenchError):
    """The request body is over the configured limit (413)."""

    status = 413
    error_type = "content_too_long_exception"


class NotAcceptable(WorkbenchError):
    """A body in a content type the route cannot read (406). OpenSearch answers this one with
    a bare string as ``error``, not the envelope: so does the workbench."""

    status = 406
    error_type = "not_acceptable"

    def body(self) -> dict[str, Any]:
        return {"error": clip(self.reason), "status": self.status}


def unreachable_reason(url: str) -> str:
    """Why a ``ClusterUnavailable``; ``url`` is the cluster's URL without credentials."""
    return f"OpenSearch cluster at {url} is unreachable"


def timeout_reason(url: str, seconds: float) -> str:
    """Why a ``ClusterTimeout``; ``seconds`` is OPENSEARCH_TIMEOUT."""
    return f"OpenSearch cluster at {url} did not answer within {seconds:g}s"


class ClusterUnavailable(WorkbenchError):
    """The cluster cannot be reached (503); the reason names its URL, never credentials."""

    status = 503
    error_type = "cluster_unavailable_exception"


class ClusterTimeout(WorkbenchError):
    """The cluster accepted the connection but did not answer in time (504)."""

    status = 504
    error_type = "timeout_exception"


class RedisUnavailable(WorkbenchError):
    """The workbench's Redis (stats counters, schedule bookkeeping) cannot be reached (503)."""

    status = 503
    error_type = "redis_unavailable_exception"


class TextError(Exception):
    """An answer the SRW contract gives as a bare ``text/plain`` body, e.g. the workbench gate."""

    def __init__(self, status: int, text: str) -> None:
        super().__init__(text)
        self.status = status
        self.text = text
