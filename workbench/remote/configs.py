"""A remote search configuration as stored (``search-relevance-remote-search-config``) and as
the code uses it (``RemoteConfig``, the password decrypted).

The document holds the password only as a Fernet token (``passwordEncrypted``, with
WORKBENCH_SECRET_KEY) beside ``passwordSet``; ``PUBLIC_SOURCE`` is what every answer reads of a
document, without the token.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from opensearchpy.exceptions import NotFoundError

from workbench.llm.secrets import SecretBox, SecretKeyMissing, UndecryptableKey
from workbench.remote.mapping import DEFAULT_PRESET, MappingError, ResponseMapping, parse
from workbench.services import Services
from workbench.store.indices import REMOTE_CONFIG_INDEX
from workbench.store.repository import Repository

SECRET_FIELD = "passwordEncrypted"
#: every read answered to a client leaves the token out
PUBLIC_SOURCE = {"excludes": [SECRET_FIELD]}
DEFAULT_MAX_RPS = 10.0
DEFAULT_MAX_CONCURRENT = 5
DEFAULT_CACHE_MINUTES = 60


@dataclass(frozen=True)
class RemoteConfig:
    """One remote search configuration, ready to search. ``unusable``: why it cannot be used
    as stored (a password that cannot be decrypted, a template no longer valid), or None."""

    id: str
    name: str
    connection_url: str
    query_template: str
    mapping: ResponseMapping
    response_template: str | dict[str, Any] = DEFAULT_PRESET
    description: str = ""
    username: str | None = None
    password: str | None = field(default=None, repr=False)
    max_requests_per_second: float = DEFAULT_MAX_RPS
    max_concurrent_requests: int = DEFAULT_MAX_CONCURRENT
    cache_duration_minutes: int = DEFAULT_CACHE_MINUTES
    refresh_cache: bool = False
    metadata: dict[str, Any] = field(default_factory=dict)
    timestamp: str | None = None
    unusable: str | None = None

    @property
    def preset(self) -> str | None:
        return self.mapping.preset

    @property
    def password_set(self) -> bool:
        return self.password is not None

    def definition(self) -> dict[str, Any]:
        """What the configuration searches with, without the password (an experiment's input
        signature reads it): a password change is not a change of the searches."""
        return {"connectionUrl": self.connection_url, "username": self.username,
                "queryTemplate": self.query_template,
                "responseTemplate": self.response_template}

    def describe(self) -> str:
        return f"remote search configuration [{self.id}]"


def password_problem(exc: Exception) -> str:
    """Why a stored password cannot be decrypted (``llm.secrets`` speaks of API keys)."""
    return str(exc).replace("the stored API key", "the stored password")


def from_document(doc: dict[str, Any], secret_box: SecretBox) -> RemoteConfig:
    """The configuration a stored document describes, its password decrypted."""
    unusable = None
    password = None
    token = doc.get(SECRET_FIELD)
    if token:
        try:
            password = secret_box.decrypt(str(token))
        except (SecretKeyMissing, UndecryptableKey) as exc:
            unusable = password_problem(exc)
    template = doc.get("responseTemplate")
    try:
        mapping = parse(template)
    except MappingError as exc:
        mapping = parse(DEFAULT_PRESET)
        unusable = unusable or str(exc)
    query_template = doc.get("queryTemplate")
    cache, metadata = doc.get("cacheDurationMinutes"), doc.get("metadata")
    if not isinstance(query_template, str):
        query_template = json.dumps(query_template)
    return RemoteConfig(
        id=str(doc.get("id")), name=str(doc.get("name") or ""),
        description=str(doc.get("description") or ""),
        connection_url=str(doc.get("connectionUrl") or ""),
        query_template=query_template, mapping=mapping,
        response_template=template if isinstance(template, (str, dict)) else DEFAULT_PRESET,
        username=doc.get("username") or None, password=password,
        max_requests_per_second=float(doc.get("maxRequestsPerSecond") or DEFAULT_MAX_RPS),
        max_concurrent_requests=int(doc.get("maxConcurrentRequests") or DEFAULT_MAX_CONCURRENT),
        cache_duration_minutes=int(cache if cache is not None else DEFAULT_CACHE_MINUTES),
        refresh_cache=bool(doc.get("refreshCache")),
        metadata=metadata if isinstance(metadata, dict) else {},
        timestamp=doc.get("timestamp"), unusable=unusable)


def repository(svc: Services) -> Repository:
    return Repository(svc.client, REMOTE_CONFIG_INDEX)


def stored(svc: Services, config_id: str) -> dict[str, Any] | None:
    """The stored document (token included), or None."""
    try:
        return repository(svc).get_source(config_id)
    except NotFoundError:
        return None


def load_config(svc: Services, config_id: str) -> RemoteConfig | None:
    """The configuration, its password decrypted, or None when there is none of that id."""
    doc = stored(svc, config_id)
    return None if doc is None else from_document(doc, svc.secret_box)


def is_remote(svc: Services, config_id: str) -> bool:
    """Whether a remote search configuration of that id exists."""
    try:
        return repository(svc).get_hit(config_id, ["id"]) is not None
    except NotFoundError:
        return False
