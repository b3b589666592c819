"""One search sent to a remote engine: through the operator's endpoint policy, with basic
auth, timeouts, retries, the configuration's shared limits, and the answer cache.

* Policy: the same mechanism as model endpoints (``llm.endpoints``) with its own settings,
  ``WORKBENCH_REMOTE_ENDPOINTS`` (regular expressions the whole connectionUrl must match; none
  set refuses every remote) and ``WORKBENCH_REMOTE_PRIVATE_ENDPOINTS``; checked when a
  configuration is stored and on every new connection (``guarded_pool``). Redirects are never
  followed.
* TLS: the system's CAs, plus ``WORKBENCH_REMOTE_CA`` when set.
* Timeouts: connect 5 s, read ``WORKBENCH_REMOTE_TIMEOUT``. Up to ``ATTEMPTS`` attempts on a
  connection error, a timeout, 429 and 5xx, ``BACKOFF`` seconds apart; a ``Retry-After`` (at
  most ``MAX_RETRY_AFTER`` s) pauses every process through the rate limiter.
* Each attempt takes a rate-limit turn and a concurrency slot (``remote.limits``).
* Cache: the mapped hits of a successful answer, under a key of the request and the mapping,
  for ``cacheDurationMinutes``; ``refreshCache`` never reads it (and still writes it).

The password and the Authorization header appear in no log line, reason or answer: reasons
name the method and the URL without its user information, and are scrubbed of the password.
"""

from __future__ import annotations

import functools
import hashlib
import json
import logging
import ssl
import time
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import redis
import urllib3

from workbench.config import Config
from workbench.llm.base import LLMError, parse_retry_after, scrub
from workbench.llm.endpoints import EndpointPolicy, EndpointRefused, guarded_pool
from workbench.redis_keys import remote_cache_key
from workbench.remote import limits
from workbench.remote.configs import RemoteConfig
from workbench.remote.mapping import Unmappable
from workbench.remote.templates import RenderedRequest
from workbench.services import Services

log = logging.getLogger(__name__)

TRUSTED_SETTING = "WORKBENCH_REMOTE_ENDPOINTS"
PRIVATE_SETTING = "WORKBENCH_REMOTE_PRIVATE_ENDPOINTS"
CONNECT_TIMEOUT = 5.0
ATTEMPTS = 3
BACKOFF = (0.5, 1.0)
MAX_RETRY_AFTER = 30.0
#: how much of a remote's answer a reason quotes
BODY_CHARS = 200


class RemoteError(Exception):
    """One search failed; ``reason`` names the configuration, what was sent and what came
    back. ``retryable``: another attempt may succeed."""

    def __init__(self, remote: RemoteConfig, detail: str, retryable: bool = False,
                 retry_after: float | None = None) -> None:
        detail = scrub(detail, [remote.password])
        super().__init__(f"{remote.describe()}: {detail}")
        self.reason = f"{remote.describe()}: {detail}"
        self.detail = detail
        self.retryable = retryable
        self.retry_after = retry_after


def policy(config: Config) -> EndpointPolicy:
    return _policy(config.remote_endpoints or (), config.remote_private_endpoints)


@functools.cache
def _policy(patterns: tuple[str, ...], allow_private: bool) -> EndpointPolicy:
    return EndpointPolicy.of(patterns, allow_private, TRUSTED_SETTING, PRIVATE_SETTING)


def refusal(config: Config, connection_url: str, registering: bool = False) -> str | None:
    """Why the operator's policy refuses ``connection_url`` (a reason naming the field and the
    setting), or None. ``registering``: also every address its host resolves to now (on a
    connection, the guarded pool checks the addresses it connects to)."""
    if not config.remote_endpoints:
        return (f"connectionUrl is refused: no remote endpoint is trusted until the operator "
                f"lists the allowed URLs in {TRUSTED_SETTING}")
    rules = policy(config)
    try:
        if registering:
            rules.check_registered(connection_url)
        else:
            rules.check_url(connection_url)
    except EndpointRefused as exc:
        return f"connectionUrl {exc}"
    return None


def pool(config: Config) -> urllib3.PoolManager:
    """The process's connection pool for remote searches (one per set of settings)."""
    return _pool(config.remote_endpoints or (), config.remote_private_endpoints,
                 config.remote_ca)


@functools.cache
def _pool(patterns: tuple[str, ...], allow_private: bool,
          ca: str | None) -> urllib3.PoolManager:
    context = ssl.create_default_context()
    if ca:
        context.load_verify_locations(cafile=ca)
    return guarded_pool(_policy(patterns, allow_private), ssl_context=context, maxsize=16,
                        block=False)


def shown_url(url: str) -> str:
    """``url`` without user information (a password may be written there)."""
    parts = urlsplit(url)
    if "@" not in parts.netloc:
        return url
    return urlunsplit(parts._replace(netloc=parts.netloc.rsplit("@", 1)[1]))


def headers(config: RemoteConfig, request: RenderedRequest) -> dict[str, str]:
    out = {"Accept": "application/json"}
    if request.body is not None:
        out["Content-Type"] = "application/json"
    if config.username or config.password:
        out.update(urllib3.make_headers(
            basic_auth=f"{config.username or ''}:{config.password or ''}"))
    return out


def _snippet(config: RemoteConfig, data: bytes) -> str:
    text = data.decode("utf-8", "replace").strip()
    text = scrub(text, [config.password])
    return text[:BODY_CHARS] + ("..." if len(text) > BODY_CHARS else "")


def send_once(config: Config, remote: RemoteConfig, request: RenderedRequest) -> Any:
    """One attempt: the answer's JSON, or a RemoteError. The connectionUrl is checked against
    the operator's policy first (it may have changed since the configuration was stored)."""
    where = f"{request.method} {shown_url(request.url)}"
    refused = refusal(config, remote.connection_url)
    if refused:
        raise RemoteError(remote, refused)
    try:
        response = pool(config).request(
            request.method, request.url, body=request.body, headers=headers(remote, request),
            timeout=urllib3.Timeout(connect=min(CONNECT_TIMEOUT, config.remote_timeout),
                                    read=config.remote_timeout),
            retries=False, redirect=False, preload_content=True)
    except EndpointRefused as exc:
        raise RemoteError(remote, f"connectionUrl {exc}") from None
    except urllib3.exceptions.SSLError as exc:
        raise RemoteError(remote, f"TLS error talking to {where}: {exc}") from None
    except urllib3.exceptions.LocationValueError:
        raise RemoteError(remote, f"invalid URL: {where}") from None
    except urllib3.exceptions.NameResolutionError:
        raise RemoteError(remote, f"could not reach {where}: the host name does not resolve",
                          retryable=True) from None
    except urllib3.exceptions.NewConnectionError:
        raise RemoteError(remote, f"could not reach {where}: the connection was refused or "
                          "not made", retryable=True) from None
    except (urllib3.exceptions.TimeoutError, TimeoutError):
        raise RemoteError(remote, f"no answer from {where} within "
                          f"{config.remote_timeout:g}s", retryable=True) from None
    except (urllib3.exceptions.HTTPError, OSError) as exc:
        raise RemoteError(remote, f"could not reach {where}: the connection failed "
                          f"({type(exc).__name__})", retryable=True) from None
    status, data = response.status, response.data or b""
    if not 200 <= status < 300:
        what = ("a redirect, which is not followed" if 300 <= status < 400
                else _snippet(remote, data))
        raise RemoteError(remote, f"HTTP {status} from {where}: {what}",
                          retryable=status == 429 or status >= 500,
                          retry_after=parse_retry_after(response.headers.get("Retry-After")))
    try:
        return json.loads(data)
    except (ValueError, UnicodeDecodeError):
        raise RemoteError(remote, f"the answer from {where} is not JSON: "
                          f"{_snippet(remote, data)}") from None


def send(svc: Services, remote: RemoteConfig, request: RenderedRequest) -> Any:
    """The answer's JSON after up to ``ATTEMPTS`` attempts, each under the configuration's
    shared rate limit and concurrency slots; the last attempt's RemoteError otherwise."""
    config = svc.config
    limiter = limits.rate_limiter(config, remote.id, remote.max_requests_per_second)
    slots = limits.slots(config, remote.id, remote.max_concurrent_requests)
    for attempt in range(ATTEMPTS):
        try:
            limiter.acquire(0)
            with slots.slot():
                return send_once(config, remote, request)
        except RemoteError as exc:
            if not exc.retryable or attempt == ATTEMPTS - 1:
                raise
            if exc.retry_after is not None:
                limiter.pause(min(exc.retry_after, MAX_RETRY_AFTER))
            log.info("%s: attempt %d failed (%s); trying again", remote.describe(),
                     attempt + 1, exc.reason)
            time.sleep(BACKOFF[min(attempt, len(BACKOFF) - 1)])
        except (LLMError, redis.RedisError) as exc:
            raise RemoteError(remote, f"the shared limits' Redis is unavailable "
                              f"({type(exc).__name__})") from None
    raise AssertionError("unreachable")


@dataclass(frozen=True)
class Cached:
    """The hits of one search and whether they came from the cache."""

    hits: list[dict[str, Any]]
    from_cache: bool


def cache_digest(remote: RemoteConfig, request: RenderedRequest, size: int) -> str:
    parts = [request.method, request.url, (request.body or b"").decode("utf-8", "replace"),
             remote.mapping.signature(), str(size)]
    return hashlib.sha256("\n".join(parts).encode("utf-8", "surrogatepass")).hexdigest()


def search(svc: Services, remote: RemoteConfig, request: RenderedRequest,
           size: int) -> Cached:
    """The mapped hits of one search, from the cache when fresh; a RemoteError otherwise (an
    answer that does not map included)."""
    key = remote_cache_key(remote.id, cache_digest(remote, request, size))
    cache_seconds = remote.cache_duration_minutes * 60
    if cache_seconds and not remote.refresh_cache:
        try:
            found = svc.redis.get(key)
        except redis.RedisError as exc:
            log.warning("%s: the answer cache cannot be read (%s)", remote.describe(),
                        type(exc).__name__)
            found = None
        if found is not None:
            return Cached(json.loads(found), True)
    answer = send(svc, remote, request)
    try:
        hits = remote.mapping.map(answer, size)
    except Unmappable as exc:
        raise RemoteError(remote, f"the answer does not map: {exc}") from None
    if cache_seconds:
        try:
            svc.redis.set(key, json.dumps(hits, ensure_ascii=False), ex=cache_seconds)
        except redis.RedisError as exc:
            log.warning("%s: the answer cannot be cached (%s)", remote.describe(),
                        type(exc).__name__)
    return Cached(hits, False)
