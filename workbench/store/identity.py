"""Who the workbench is when it calls the cluster.

* While answering a request, every cluster call is made **as the caller**: the caller's own
  ``Authorization`` header goes to the cluster exactly as sent (an empty header stays empty). A
  caller who sent none is sent as nobody, so a secured cluster answers its own 401, unless the
  operator opts in to lending the workbench's credentials (``WORKBENCH_ANONYMOUS_AS_SERVICE``).
* Jobs that run later (judgments, experiments, scheduled runs) act as the **service identity**,
  the configured ``OPENSEARCH_USERNAME``; with ``WORKBENCH_JOB_IMPERSONATION`` they impersonate
  the user who created the job through the security plugin's REST impersonation header, so
  document- and field-level security applies to the job's searches too.
* A handful of internal reads (system-index bootstrap, the SRW settings the gate reads, which
  plugins the cluster runs) are made as the service identity on purpose, and say so.

The identity lives in a context variable read by ``ClusterAuth``, the opensearch-py ``http_auth``
hook of every client the workbench builds. Worker threads started while answering a request or
running a job must be given the context (``carry``), or they would act as the process default:
nobody in the API process (fail closed), the service in a worker.
"""

from __future__ import annotations

import contextlib
import contextvars
import hashlib
import json
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, TypeVar

from opensearchpy import OpenSearch
from opensearchpy.exceptions import ConflictError

from workbench.config import Config
from workbench.store.upstream import Upstream

IMPERSONATE_HEADER = "opendistro_security_impersonate_as"
AUTHINFO_PATH = "/_plugins/_security/authinfo"

T = TypeVar("T")


@dataclass(frozen=True)
class Identity:
    """The credentials one cluster call carries.

    ``authorization`` is the ``Authorization`` header value to send, or None to send none;
    ``impersonate`` names a user the (service) credentials act for.
    """

    authorization: str | None
    impersonate: str | None = None


NOBODY = Identity(None)

_current: contextvars.ContextVar[Identity | None] = contextvars.ContextVar(
    "workbench_cluster_identity", default=None)


def service_identity(config: Config) -> Identity:
    """The workbench's own configured credentials (none when none are configured)."""
    return Identity(config.opensearch_authorization)


def caller_identity(headers: Iterable[tuple[str, str]], config: Config) -> Identity:
    """The identity of a request: its ``Authorization`` as sent, even empty; a request without
    one acts as nobody unless anonymous callers may borrow the service identity."""
    for name, value in headers:
        if name.lower() == "authorization":
            return Identity(value)
    return service_identity(config) if config.anonymous_as_service else NOBODY


def current() -> Identity | None:
    """The identity set for this context, or None for the process default."""
    return _current.get()


@contextmanager
def acting_as(identity: Identity) -> Iterator[None]:
    """Make every cluster call inside the block with ``identity``."""
    token = _current.set(identity)
    try:
        yield
    finally:
        _current.reset(token)


def as_service(client: OpenSearch) -> contextlib.AbstractContextManager[None]:
    """Make the cluster calls inside the block as ``client``'s service identity: for the
    workbench's own internal reads and writes, never for anything a caller asked to see."""
    auth = client.transport.kwargs.get("http_auth")
    assert isinstance(auth, ClusterAuth), "clients are built by store.client.make_client"
    return acting_as(auth.service)


def bind(identity: Identity) -> contextvars.Token[Identity | None]:
    """Set the identity until ``unbind`` (for request hooks, which cannot use a ``with``)."""
    return _current.set(identity)


def unbind(token: contextvars.Token[Identity | None]) -> None:
    _current.reset(token)


def carry(fn: Callable[..., T]) -> Callable[..., T]:
    """``fn`` bound to the caller's context, for running on another thread with the same
    identity (``pool.submit(carry(fn), ...)``)."""
    context = contextvars.copy_context()

    def run(*args: Any, **kwargs: Any) -> T:
        # A context can be entered by one thread at a time: each call runs in its own copy.
        return context.copy().run(fn, *args, **kwargs)

    return run


class ClusterAuth:
    """opensearch-py's ``http_auth`` hook: the headers that carry the current identity.

    ``default`` applies where no identity was set: nobody in the API process, so a cluster call
    that was not given the caller's identity by mistake fails closed; the service in a worker.
    """

    def __init__(self, config: Config, default: Identity | None = None) -> None:
        self.service = service_identity(config)
        self.default = self.service if default is None else default

    def __call__(self, method: str, url: str, body: Any) -> dict[str, str]:
        identity = _current.get() or self.default
        headers: dict[str, str] = {}
        if identity.authorization is not None:
            headers["authorization"] = identity.authorization
        if identity.impersonate:
            headers[IMPERSONATE_HEADER] = identity.impersonate
        return headers


class Refused(Exception):
    """The cluster refused the caller's credentials: its own status, headers and body."""

    def __init__(self, status: int, headers: tuple[tuple[str, str], ...], body: bytes) -> None:
        super().__init__(f"the cluster answered {status} to the caller's credentials")
        self.status = status
        self.headers = headers
        self.body = body


@dataclass(frozen=True)
class Caller:
    """Who the cluster says the caller is; ``user`` is None when the cluster is not secured."""

    secured: bool
    user: str | None


_TTL = 30.0
_UNSECURED_TTL = 60.0
_lock = threading.Lock()
_known: dict[str, tuple[float, Caller]] = {}


def _key(identity: Identity) -> str:
    return hashlib.sha256(repr(identity).encode()).hexdigest()


def known(identity: Identity) -> Caller | None:
    """Who ``identity`` is, when the cluster said so less than a TTL ago (no call is made)."""
    now = time.monotonic()
    with _lock:
        for hit in (_known.get("unsecured"), _known.get(_key(identity))):
            if hit and hit[0] > now:
                return hit[1]
    return None


def authenticate(upstream: Upstream, identity: Identity) -> Caller:
    """Ask the security plugin who ``identity`` is; raise ``Refused`` with the cluster's own
    answer when it refuses the credentials (401). A cluster without the security plugin has no
    users: every caller is accepted, as the cluster itself would (checked once a minute)."""
    known_caller = known(identity)
    if known_caller is not None:
        return known_caller
    key = _key(identity)
    now = time.monotonic()
    headers = [] if identity.authorization is None else [("Authorization", identity.authorization)]
    if identity.impersonate:
        headers.append((IMPERSONATE_HEADER, identity.impersonate))
    answer = upstream.request("GET", AUTHINFO_PATH, headers, None, None)
    try:
        data = answer.read()
    finally:
        answer.release_conn()
    if answer.status in (400, 404):  # "no handler found": no security plugin
        caller = Caller(secured=False, user=None)
        with _lock:
            _known["unsecured"] = (now + _UNSECURED_TTL, caller)
        return caller
    if answer.status >= 300:
        kept = tuple((k, v) for k, v in answer.headers.items()
                     if k.lower() in ("content-type", "www-authenticate"))
        raise Refused(answer.status, kept, data)
    info = json.loads(data)
    caller = Caller(secured=True, user=str(info.get("user_name") or "") or None)
    with _lock:
        if len(_known) > 10_000:
            _known.clear()
        _known[key] = (now + _TTL, caller)
    return caller


def check_can_search(client: OpenSearch, indices: list[str]) -> None:
    """Refuse, with the cluster's own 403, a job over indices the current identity may not
    search: the job itself runs later, as the service identity."""
    wanted = sorted({i for i in indices if i})
    if not wanted:
        return
    client.search(index=",".join(wanted), body={"size": 0, "query": {"match_all": {}}},
                  params={"ignore_unavailable": "true", "allow_no_indices": "true"})


#: a document id no write check ever finds, and a sequence number no document ever has
_PROBE_ID = "workbench-write-permission-check"
_NO_SEQ_NO = 2**62


def check_can_write(client: OpenSearch, index: str) -> None:
    """Refuse, with the cluster's own 403, an identity that may not index documents into
    ``index``: an index request conditional on a sequence number no document has, which the
    cluster authorizes first (403) and then refuses as a version conflict (409) without
    writing anything."""
    try:
        client.index(index=index, id=_PROBE_ID, body={}, if_seq_no=_NO_SEQ_NO,
                     if_primary_term=1)
    except ConflictError:
        return
    raise AssertionError(f"a conditional write to {index} that cannot apply was applied")
