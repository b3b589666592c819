"""Creates are never ambiguous: one place for every SRW entity create (docs/reliability.md).

* A create whose write to the cluster fails after the entity's id was chosen says which entity
  it was and whether it may exist: ``entity_id`` and ``entity_may_exist`` in the 504
  (``timeout_exception``) or 503 (``cluster_unavailable_exception``) envelope. It may not exist
  only when the connection itself could not be made, so the request never reached the cluster.
  The job of a job entity whose create was ambiguous is not queued by that request: a retry with
  the same Idempotency-Key queues it, and so does the lease sweeper (workbench/jobs/sweeper.py),
  which queues a stored PROCESSING entity that has neither queued marker nor lease.
* A create that the cluster fails before its write (a check of the body, or a read it needs,
  not answered in time or not reached) names its entity too, with ``entity_may_exist: false``:
  the app's error handlers ask ``unwritten`` (``Create`` is kept in ``flask.g`` for them).
* ``Idempotency-Key`` (the IETF httpapi draft's header): with a key, the entity's id is derived
  from the entity kind, the caller's user name and the key, so a retry writes the same id. A
  fingerprint of the body is kept in Redis for ``KEY_TTL_SECONDS``: the same key with another
  body is a 422. A retry that finds the entity already written answers the first create's answer
  with ``Idempotent-Replayed: true`` and, for a job entity still waiting, makes sure its job is
  queued. Without Redis, a job entity's create is a 503 before anything is written (its job
  could not be queued either); a query set or search configuration is created without the
  fingerprint check (logged), the derived id still keeping a retry from making a second one.
"""

from __future__ import annotations

import hashlib
import json
import logging
import uuid
from dataclasses import dataclass
from typing import Any

import urllib3.exceptions
from flask import Response, g, request
from opensearchpy.exceptions import ConnectionError as OpenSearchConnectionError
from opensearchpy.exceptions import ConnectionTimeout as OpenSearchConnectionTimeout
from opensearchpy.exceptions import TransportError
from redis.exceptions import RedisError

from workbench import redis_keys
from workbench.api import SRW_PREFIX, caller, json_response, services
from workbench.errors import (
    AlreadyExists,
    BadRequest,
    ClusterTimeout,
    ClusterUnavailable,
    WorkbenchError,
    timeout_reason,
    unreachable_reason,
)
from workbench.evaluation.batch_job import TASK as EVALUATE_BATCH_TASK
from workbench.jobs import leases
from workbench.jobs.queue import QueueUnavailable, enqueue
from workbench.querygen.job import TASK as QUERYGEN_TASK
from workbench.store.client import InFlightLost
from workbench.store.repository import Repository, new_id
from workbench.telemetry import instruments

log = logging.getLogger(__name__)

HEADER = "Idempotency-Key"
REPLAYED_HEADER = "Idempotent-Replayed"
MAX_KEY_CHARS = 255
KEY_TTL_SECONDS = 24 * 3600
# Fixed for good: a derived id depends on it, and retries must keep finding their entity.
NAMESPACE = uuid.UUID("5b7e0c8e-2f4d-4c55-9d0a-6a1f3c2e9b47")
QUEUE_DOWN = "The job queue (Redis) cannot be reached; the job was not started"


@dataclass(frozen=True)
class Kind:
    """A kind of entity: ``name`` goes into derived ids and Redis keys, ``label`` into reasons,
    ``path`` (under the SRW prefix) is where it is read; ``task`` is the job it waits for."""

    name: str
    label: str
    path: str
    task: str | None = None


QUERY_SET = Kind("query_set", "query set", "/query_sets")
#: a query set generated from an index: the same entity, with a job (workbench/querygen)
GENERATED_QUERY_SET = Kind("query_set", "query set", "/query_sets", QUERYGEN_TASK)
SEARCH_CONFIGURATION = Kind("search_configuration", "search configuration",
                            "/search_configurations")
JUDGMENT = Kind("judgment", "judgment", "/judgments", "workbench.judgments.generate")
EXPERIMENT = Kind("experiment", "experiment", "/experiments", "workbench.experiments.run")
EVALUATE_BATCH = Kind("evaluate_batch", "evaluation batch", "/_evaluate/_batch",
                      EVALUATE_BATCH_TASK)


class KeyReused(BadRequest):
    """The Idempotency-Key was used before with another body (422, as the draft says)."""

    status = 422


def idempotency_key() -> str | None:
    """The request's Idempotency-Key, or None; a key that is not 1-255 printable ASCII
    characters is a 400 (the key itself is never quoted back, nor logged)."""
    key = request.headers.get(HEADER)
    if key is None:
        return None
    if not key:
        problem = "it is empty"
    elif len(key) > MAX_KEY_CHARS:
        problem = f"it has {len(key)}"
    elif not all(" " <= char <= "~" for char in key):
        problem = "it has a character that is not printable ASCII"
    else:
        return key
    raise BadRequest(f"{HEADER} header must be 1 to {MAX_KEY_CHARS} printable ASCII characters; "
                     f"{problem}")


def derived_id(kind: Kind, user: str, key: str) -> str:
    """The id a keyed create writes: the same for every retry of one caller's request, and
    different for another kind or another user (the user is empty on an unsecured cluster)."""
    return str(uuid.uuid5(NAMESPACE, f"{kind.name}\n{user}\n{key}"))


def fingerprint(body: Any) -> str:
    """sha256 of the body as canonical JSON (sorted keys, no spaces)."""
    text = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def never_sent(exc: OpenSearchConnectionError) -> bool:
    """True only when the connection to the cluster could not be made (refused, or not made
    within the timeout): then the request provably never reached the cluster."""
    cause: Any = exc.info
    for _ in range(5):
        if isinstance(cause, (urllib3.exceptions.ConnectTimeoutError, ConnectionRefusedError)):
            return True  # NewConnectionError is a ConnectTimeoutError
        if not isinstance(cause, BaseException):
            return False
        cause = getattr(cause, "reason", None) or cause.__cause__ or cause.__context__
    return False


class Create:
    """One create of a ``kind`` entity; make it as soon as the route has its body (a bad key
    is a 400 before anything is looked up or written) and build the document with ``id``."""

    def __init__(self, kind: Kind, before_write: bool = True) -> None:
        """``before_write``: a cluster error before the write names the entity (not for a
        request that may end without creating one, as a small batch answered at once)."""
        self.kind = kind
        self.key = idempotency_key()
        self.id = derived_id(kind, caller.user_name(), self.key) if self.key else new_id()
        self.replayed = False
        self._claimed = False  # this request stored the fingerprint
        self.writing = False  # the write was sent (or is being sent) to the cluster
        if before_write:
            g.workbench_create = self

    @property
    def _redis_key(self) -> str:
        return redis_keys.idempotency_key(self.kind.name, self.id)

    def store(self, repo: Repository, doc: dict[str, Any], body: Any) -> dict[str, Any]:
        """Write ``doc`` (and queue its job): the cluster's index response, or on a replay one
        saying ``created`` as the first create's did."""
        if doc["id"] != self.id:
            raise ValueError("the document must be built with Create.id")
        self._claim(body)
        self.writing = True
        job = self.kind.task is not None
        try:
            # A job's entity is refreshed after its job is queued, not by its write: the worker
            # reads it by id (real time), so the job starts while the refresh is under way.
            result = repo.create(doc, refresh=not job)
        except AlreadyExists:
            if self.key is None:
                raise
            self.replayed = True
            if self.kind.task is not None:
                self._ensure_queued(repo, self.kind.task)
            return {"_id": self.id, "result": "created"}
        except OpenSearchConnectionError as exc:  # ConnectionTimeout included
            raise self._ambiguous(exc) from exc
        except Exception:
            self._unclaim()  # the cluster answered: nothing was written
            raise
        if self.kind.task is not None:
            try:
                enqueue(self.kind.task, self.id, str(doc.get("type") or ""))
            except QueueUnavailable:
                repo.delete(self.id)  # never queued: leave nothing PROCESSING behind
                self._unclaim()
                raise
            self._refresh(repo)
        instruments.ENTITIES_CREATED.labels(self.kind.name, str(doc.get("type") or "")).inc()
        return result

    def _refresh(self, repo: Repository) -> None:
        """Make the stored entity searchable before the answer, as every write is. It is stored
        and its job queued already, so a refresh the cluster fails is no reason to answer an
        error: the index's own refresh (1 s) shows it soon after, and the log says so."""
        try:
            repo.refresh()
        except (OpenSearchConnectionError, TransportError) as exc:
            log.warning("%s %s: stored and queued, but the refresh after it failed (%s); it "
                        "shows in searches at the index's next refresh", self.kind.label,
                        self.id, type(exc).__name__)

    def answer(self, body: dict[str, Any], status: int = 200) -> Response:
        """The route's answer; a replay carries ``Idempotent-Replayed: true``."""
        response = json_response(body, status)
        if self.replayed:
            response.headers[REPLAYED_HEADER] = "true"
        return response

    def _claim(self, body: Any) -> None:
        """Store the body's fingerprint under the key (first request), or check it (retry)."""
        if self.key is None:
            return
        wanted = fingerprint(body)
        try:
            r = services().redis
            if r.set(self._redis_key, wanted, nx=True, ex=KEY_TTL_SECONDS):
                self._claimed = True
                return
            stored = r.get(self._redis_key)
        except RedisError as exc:
            if self.kind.task is not None:
                raise QueueUnavailable(QUEUE_DOWN) from exc
            log.warning("%s %s: Redis cannot be reached (%s); the %s header is not checked "
                        "against an earlier request's body", self.kind.label, self.id,
                        type(exc).__name__, HEADER)
            return
        if isinstance(stored, bytes):
            stored = stored.decode()
        if stored is not None and stored != wanted:
            raise KeyReused(f"The {HEADER} header was already used for {self.kind.label} "
                            f"{self.id} with a different request body; send a new {HEADER} "
                            "with a different request")

    def _unclaim(self) -> None:
        """Forget the fingerprint this request stored: nothing was created under the key."""
        if not self._claimed:
            return
        try:
            services().redis.delete(self._redis_key)
        except RedisError as exc:
            log.warning("%s %s: could not forget its %s (%s)", self.kind.label, self.id,
                        HEADER, type(exc).__name__)

    def _ensure_queued(self, repo: Repository, task: str) -> None:
        """A replayed job entity still PROCESSING with neither queued marker nor lease (its
        first create was ambiguous) is queued now; a second message would be harmless."""
        stored = repo.get_source(self.id, ["status"])
        if stored is None or stored.get("status") != "PROCESSING":
            return
        try:
            queued, lease = leases.state(services().redis, task, self.id)
        except RedisError as exc:
            raise QueueUnavailable(QUEUE_DOWN) from exc
        if queued is None and lease is None:
            log.info("%s %s: replayed create queues its job", self.kind.label, self.id)
            enqueue(task, self.id)

    def not_written(self, error: ClusterTimeout | ClusterUnavailable) -> WorkbenchError:
        """``error`` (the cluster not answering in time, or not reached) met before the write:
        it names the entity, which was not created."""
        what = f"{self.kind.label} {self.id}"
        again = f" with the same {HEADER} header" if self.key else ""
        return type(error)(
            f"{error.reason}; {what} was not created (the cluster failed before its write). "
            f"Send the request again{again} once the cluster answers.",
            details={"entity_id": self.id, "entity_may_exist": False})

    def _ambiguous(self, exc: OpenSearchConnectionError) -> WorkbenchError:
        """The 504 or 503 of a write the cluster did not answer, naming the entity."""
        config = services().config
        url = config.opensearch_url_safe
        what = f"{self.kind.label} {self.id}"
        may_exist = not never_sent(exc)
        details = {"entity_id": self.id, "entity_may_exist": may_exist}
        if not may_exist:
            self._unclaim()
            again = " with the same Idempotency-Key header" if self.key else ""
            return ClusterUnavailable(
                f"{unreachable_reason(url)}; {what} was not created (the request never reached "
                f"the cluster). Send the request again{again} once the cluster can be reached.",
                details=details)
        if self.key:
            advice = (f"Send the same request again with the same {HEADER} header to get that "
                      f"{self.kind.label} instead of a second one.")
        else:
            advice = (f"Look for it (GET {SRW_PREFIX}{self.kind.path}/{self.id}) before sending "
                      f"the request again, or send creates with an {HEADER} header: a retry "
                      f"with the same key gets the {self.kind.label} instead of a second one.")
        if isinstance(exc, OpenSearchConnectionTimeout) and not isinstance(exc, InFlightLost):
            reason = timeout_reason(url, config.opensearch_timeout)
            return ClusterTimeout(f"{reason} while {what} was being created; it may have been "
                                  f"stored. {advice}", details=details)
        return ClusterUnavailable(
            f"{unreachable_reason(url)}: the connection was lost while {what} was being "
            f"created; it may have been stored. {advice}", details=details)


def unwritten(error: WorkbenchError) -> WorkbenchError:
    """``error`` as the answer of the request: when it is the cluster's timeout or
    unavailability met by a create before its write, naming the entity (``Create.not_written``);
    otherwise ``error`` itself."""
    create = g.get("workbench_create")
    if (isinstance(create, Create) and not create.writing and error.details is None
            and isinstance(error, (ClusterTimeout, ClusterUnavailable))):
        return create.not_written(error)
    return error
