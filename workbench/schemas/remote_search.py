"""The bodies of remote search configurations (issue 47, a workbench extension of the plugin's
proposal opensearch-project/search-relevance#267): ``PUT|POST /remote_search_configurations``,
``PUT /remote_search_configurations/{id}`` (a full replace, but for the password) and
``POST /remote_search/execute``.

Fields are checked in the order declared, the first bad one is the 400, its reason opening with
the field's name. What needs a layer above (the template and mapping rules of
``workbench.remote``, the operator's endpoint policy, whether a password can be stored) is the
route's ``RemoteRules``. A field the body should not have is a 400 naming it.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from marshmallow import ValidationError, missing

from workbench.schemas.body import Step, StepSchema, Text
from workbench.schemas.text import DESCRIPTION_LIMIT, NAME_LIMIT

DEFAULT_MAX_RPS = 10.0
MIN_RPS, MAX_RPS = 0.1, 1000.0
DEFAULT_MAX_CONCURRENT = 5
MAX_CONCURRENT = 64
DEFAULT_CACHE_MINUTES = 60
MAX_CACHE_MINUTES = 10_080  # a week
MAX_URL_CHARS = 2_048
MAX_USERNAME_CHARS = 256
MAX_PASSWORD_CHARS = 1_024
MAX_TEMPLATE_CHARS = 65_536
DEFAULT_EXECUTE_SIZE = 10
MAX_EXECUTE_SIZE = 100
#: the data key of the step that checks the body's keys (no body field is named so)
_KEYS = "\0fields"


@dataclass(frozen=True)
class RemoteRules:
    """The route's checks; each returns an error message (naming the field) or None, but
    ``response_template``, which answers the template as stored or raises ValueError."""

    connection_url: Callable[[str], str | None]
    password: Callable[[str], str | None]
    query_template: Callable[[str], str | None]
    response_template: Callable[[Any], Any]


def _unknown(body: dict[str, Any], allowed: tuple[str, ...], what: str) -> None:
    extra = [key for key in body if key not in allowed]
    if extra:
        raise ValidationError(f"{extra[0]} is not a field of {what}; allowed: "
                              f"[{', '.join(allowed)}]")


def _number(value: Any, name: str, low: float, high: float) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) \
            or not math.isfinite(value) or not low <= value <= high:
        raise ValidationError(f"{name} must be a number from {low:g} to {high:g}, got: "
                              f"{json.dumps(value)}")
    return float(value)


def _int(value: Any, name: str, low: int, high: int) -> int:
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise ValidationError(f"{name} must be an integer from {low} to {high}, got: "
                              f"{json.dumps(value)}")
    return value


class _Step(Step):
    @property
    def remote_rules(self) -> RemoteRules:
        rules: RemoteRules = self.rules
        return rules


def _fail_if(message: str | None) -> None:
    if message:
        raise ValidationError(message)


class _Keys(_Step):
    """The body's keys, each a field of the schema (loads nothing)."""

    def check(self, value: Any) -> Any:
        assert isinstance(self.parent, StepSchema)
        allowed = tuple(f.data_key or n for n, f in self.parent.fields.items()
                        if not (f.data_key or n).startswith("\0"))
        _unknown(self.body, allowed, "a remote search configuration")
        return missing


class _ConnectionUrl(_Step):
    def check(self, value: Any) -> str:
        if value is None:
            raise ValidationError("connectionUrl is required: the full search URL, such as "
                                  "http://host:9200/products/_search")
        if not isinstance(value, str) or not value.strip():
            raise ValidationError("connectionUrl must be a non-empty string")
        url = value.strip()
        if len(url) > MAX_URL_CHARS:
            raise ValidationError(f"connectionUrl must be at most {MAX_URL_CHARS} characters")
        try:
            parts = urlsplit(url)
            parts.port  # noqa: B018 - a port that is not a number raises here
        except ValueError:
            parts = None
        if parts is None or parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValidationError(f"connectionUrl must be an http or https URL with a host, "
                                  f"got: {url}")
        if parts.fragment:
            raise ValidationError("connectionUrl must not have a fragment (#...)")
        _fail_if(self.remote_rules.connection_url(url))
        return url


class _Username(_Step):
    def check(self, value: Any) -> str | None:
        if value is None or value == "":
            return None
        if not isinstance(value, str) or len(value) > MAX_USERNAME_CHARS or ":" in value:
            raise ValidationError(f"username must be a string of at most {MAX_USERNAME_CHARS} "
                                  "characters without ':'")
        return value


class _Password(_Step):
    """Absent: missing (an update keeps the stored one); null or "": None (none)."""

    def deserialize(self, value: Any, attr: str | None = None,
                    data: Any = None, **kwargs: Any) -> Any:
        if value is missing:
            return missing
        return super().deserialize(value, attr, data, **kwargs)

    def check(self, value: Any) -> str | None:
        if value is None or value == "":
            return None
        if not isinstance(value, str) or len(value) > MAX_PASSWORD_CHARS:
            raise ValidationError(f"password must be a string of at most {MAX_PASSWORD_CHARS} "
                                  "characters")
        _fail_if(self.remote_rules.password(value))
        return value


def _template_text(value: Any, name: str) -> str:
    if isinstance(value, dict):
        value = json.dumps(value, ensure_ascii=False)
    if not isinstance(value, str) or not value.strip():
        raise ValidationError(f"{name} must be a non-empty string or a JSON object")
    if len(value) > MAX_TEMPLATE_CHARS:
        raise ValidationError(f"{name} must be at most {MAX_TEMPLATE_CHARS} characters")
    return value.strip()


class _QueryTemplate(_Step):
    def check(self, value: Any) -> str:
        if value is None:
            raise ValidationError("queryTemplate is required: the search body (a JSON object) "
                                  "or query string, with %SearchText% where the query text "
                                  "goes")
        text = _template_text(value, "queryTemplate")
        _fail_if(self.remote_rules.query_template(text))
        return text


class _ResponseTemplate(_Step):
    def check(self, value: Any) -> Any:
        try:
            return self.remote_rules.response_template(value)
        except ValueError as exc:
            raise ValidationError(str(exc)) from None


class _Rps(_Step):
    def check(self, value: Any) -> float:
        if value is None:
            return DEFAULT_MAX_RPS
        return _number(value, "maxRequestsPerSecond", MIN_RPS, MAX_RPS)


class _Concurrent(_Step):
    def check(self, value: Any) -> int:
        if value is None:
            return DEFAULT_MAX_CONCURRENT
        return _int(value, "maxConcurrentRequests", 1, MAX_CONCURRENT)


class _CacheMinutes(_Step):
    def check(self, value: Any) -> int:
        if value is None:
            return DEFAULT_CACHE_MINUTES
        return _int(value, "cacheDurationMinutes", 0, MAX_CACHE_MINUTES)


class _Bool(_Step):
    def check(self, value: Any) -> bool:
        if value is None:
            return False
        if not isinstance(value, bool):
            raise ValidationError(f"{self.data_key} must be true or false, got: "
                                  f"{json.dumps(value)}")
        return value


class _Metadata(_Step):
    def check(self, value: Any) -> dict[str, Any]:
        if value is None:
            return {}
        if not isinstance(value, dict):
            raise ValidationError("metadata must be an object")
        return value


class RemoteSearchConfigurationSchema(StepSchema):
    """``PUT|POST /remote_search_configurations`` and ``PUT .../{id}``: every field with its
    default; ``password`` only when given (None: remove it)."""

    fields_known = _Keys(data_key=_KEYS)
    name = Text("name", NAME_LIMIT)
    description = Text("description", DESCRIPTION_LIMIT, optional=True)
    connectionUrl = _ConnectionUrl(data_key="connectionUrl")
    username = _Username(data_key="username")
    password = _Password(data_key="password")
    queryTemplate = _QueryTemplate(data_key="queryTemplate")
    responseTemplate = _ResponseTemplate(data_key="responseTemplate")
    maxRequestsPerSecond = _Rps(data_key="maxRequestsPerSecond")
    maxConcurrentRequests = _Concurrent(data_key="maxConcurrentRequests")
    cacheDurationMinutes = _CacheMinutes(data_key="cacheDurationMinutes")
    refreshCache = _Bool(data_key="refreshCache")
    metadata = _Metadata(data_key="metadata")

    def __init__(self, rules: RemoteRules, **kwargs: Any) -> None:
        super().__init__(rules=rules, **kwargs)


class _ExecuteKeys(_Step):
    def check(self, value: Any) -> Any:
        _unknown(self.body, ("remoteConfigId", "queryText", "size", "query"),
                 "a remote search execute body")
        return missing


class _RemoteConfigId(_Step):
    def check(self, value: Any) -> str:
        if not isinstance(value, str) or not value.strip():
            raise ValidationError("remoteConfigId is required: the id of a remote search "
                                  "configuration")
        return value.strip()


class _QueryText(_Step):
    def check(self, value: Any) -> str:
        if not isinstance(value, str) or not value.strip():
            raise ValidationError("queryText is required: a non-empty string")
        return value


class _Size(_Step):
    def check(self, value: Any) -> int:
        if value is None:
            return DEFAULT_EXECUTE_SIZE
        return _int(value, "size", 1, MAX_EXECUTE_SIZE)


class _Query(_Step):
    def check(self, value: Any) -> str | dict[str, Any] | None:
        if value is None:
            return None
        if isinstance(value, dict):
            return value
        return _template_text(value, "query")


class RemoteExecuteSchema(StepSchema):
    """``POST /remote_search/execute``: ``remoteConfigId``, ``queryText``, ``size`` (1 to
    100, default 10) and ``query`` (replaces the stored queryTemplate for this call)."""

    fields_known = _ExecuteKeys(data_key=_KEYS)
    remoteConfigId = _RemoteConfigId(data_key="remoteConfigId")
    queryText = _QueryText(data_key="queryText")
    size = _Size(data_key="size")
    query = _Query(data_key="query")
