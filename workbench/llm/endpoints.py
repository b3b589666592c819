"""Which endpoints a model registered through the API may call: trusted ones, on public hosts.

A model's endpoint is a URL the workers and the API will POST prompts to. Registered through
``/_plugins/_search_relevance/models`` by anyone allowed to write the models index, it would
otherwise be a door into every network the workbench can reach (loopback admin ports, other
hosts of a private network, a cloud's metadata service). So, as ML Commons does for its
connectors (a trusted-endpoints list, private addresses refused unless enabled):

* the endpoint must match one of the operator's regular expressions
  (``WORKBENCH_MODEL_ENDPOINTS``; the default admits the hosted OpenAI-compatible APIs below);
* its host — a literal address, or every address its name resolves to — must be public,
  unless the operator allows non-public ones (``WORKBENCH_MODEL_PRIVATE_ENDPOINTS=true``,
  as a local llama.cpp set-up and the test suite do).

Both are checked when a model is registered or changed (a 400 naming the field and the rule;
a name that does not resolve then is accepted, and checked when used) and again on every new
connection (``guarded_pool``): the name is resolved once, every address checked, and the
socket connected to a checked address, so a name that resolves elsewhere later (DNS
rebinding) is refused too. Redirects are never followed (``base.post_json``). Models from the
environment (``WORKBENCH_MODELS``) are the operator's own and are not limited.
"""

from __future__ import annotations

import ipaddress
import re
import socket
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import urllib3
from urllib3.connection import HTTPConnection, HTTPSConnection
from urllib3.connectionpool import HTTPConnectionPool, HTTPSConnectionPool
from urllib3.util import connection as urllib3_connection
from urllib3.util.timeout import _DEFAULT_TIMEOUT

from workbench.config import Config

#: the hosted APIs the ``openai`` and ``azure_openai`` providers speak to out of the box
DEFAULT_TRUSTED = (
    r"^https://api\.openai\.com(/.*)?$",
    r"^https://[a-z0-9-]+\.openai\.azure\.com(/.*)?$",
    r"^https://[a-z0-9-]+\.cognitiveservices\.azure\.com(/.*)?$",
    r"^https://api\.mistral\.ai(/.*)?$",
    r"^https://api\.groq\.com/openai(/.*)?$",
    r"^https://api\.together\.xyz(/.*)?$",
    r"^https://api\.deepseek\.com(/.*)?$",
    r"^https://openrouter\.ai/api(/.*)?$",
    r"^https://generativelanguage\.googleapis\.com/v1beta/openai(/.*)?$",
)
TRUSTED_SETTING = "WORKBENCH_MODEL_ENDPOINTS"
PRIVATE_SETTING = "WORKBENCH_MODEL_PRIVATE_ENDPOINTS"
_NAT64 = ipaddress.ip_network("64:ff9b::/96")


class EndpointRefused(Exception):
    """An endpoint a registered model may not use; ``str()`` names the rule."""


def address_kind(address: ipaddress.IPv4Address | ipaddress.IPv6Address) -> str | None:
    """What makes an address non-public ("a loopback address"...), or None for a public one."""
    if isinstance(address, ipaddress.IPv6Address):
        mapped = address.ipv4_mapped or address.sixtofour
        if mapped is None and address in _NAT64:
            mapped = ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
        if mapped is not None:
            return address_kind(mapped)
    for kind, test in (("an unspecified", address.is_unspecified),
                       ("a loopback", address.is_loopback),
                       ("a link-local", address.is_link_local),
                       ("a multicast", address.is_multicast),
                       ("a reserved", address.is_reserved),
                       ("a private", address.is_private),
                       ("a non-public", not address.is_global)):
        if test:
            return f"{kind} address"
    return None


@dataclass(frozen=True)
class EndpointPolicy:
    """The operator's rules for endpoints of models registered through the API (and, with
    their own settings, of remote search configurations)."""

    trusted: tuple[re.Pattern[str], ...]
    allow_private: bool
    #: the operator settings the refusals name (the models'; remote search configurations
    #: have their own, ``remote.client``)
    trusted_setting: str = TRUSTED_SETTING
    private_setting: str = PRIVATE_SETTING

    @classmethod
    def of(cls, patterns: Sequence[str], allow_private: bool,
           trusted_setting: str = TRUSTED_SETTING,
           private_setting: str = PRIVATE_SETTING) -> EndpointPolicy:
        return cls(tuple(re.compile(p) for p in patterns), allow_private, trusted_setting,
                   private_setting)

    @classmethod
    def from_config(cls, config: Config) -> EndpointPolicy:
        patterns = DEFAULT_TRUSTED if config.model_endpoints is None else config.model_endpoints
        return cls.of(patterns, config.model_private_endpoints)

    def check_url(self, endpoint: str) -> None:
        """The endpoint matches a trusted pattern, and its host, if an address, is allowed."""
        if not any(p.fullmatch(endpoint) for p in self.trusted):
            raise EndpointRefused(f"is not a trusted endpoint: it matches none of the patterns "
                                  f"of {self.trusted_setting}")
        host = urlsplit(endpoint).hostname or ""
        try:
            literal = ipaddress.ip_address(host)
        except ValueError:
            return
        self._check_address(literal, f"is on {host},")

    def check_registered(self, endpoint: str) -> None:
        """At registration: the URL rules, and every address its host name resolves to now
        (a name that does not resolve is left to the check made on each connection)."""
        self.check_url(endpoint)
        parts = urlsplit(endpoint)
        port = parts.port or (443 if parts.scheme == "https" else 80)
        try:
            self.resolve(parts.hostname or "", port)
        except socket.gaierror:
            return

    def resolve(self, host: str, port: int) -> list[tuple[Any, ...]]:
        """``getaddrinfo`` for a connection, refused unless every address is allowed."""
        found = socket.getaddrinfo(host, port, urllib3_connection.allowed_gai_family(),
                                   socket.SOCK_STREAM)
        for *_, sockaddr in found:
            address = ipaddress.ip_address(str(sockaddr[0]).split("%", 1)[0])
            if str(address) != host:
                self._check_address(address, f"has a host name ({host}) that resolves to")
            else:
                self._check_address(address, f"is on {host},")
        return found

    def _check_address(self, address: ipaddress.IPv4Address | ipaddress.IPv6Address,
                       where: str) -> None:
        kind = address_kind(address)
        if kind is not None and not self.allow_private:
            raise EndpointRefused(f"{where} {kind}; endpoints on non-public addresses are "
                                  f"refused unless the operator allows them "
                                  f"({self.private_setting}=true)")


def _connect(conn: HTTPConnection, policy: EndpointPolicy) -> socket.socket:
    """``HTTPConnection._new_conn`` through the policy: resolve once, check every address,
    connect to a checked one (never resolve again). Refusals raise ``EndpointRefused``."""
    try:
        found = policy.resolve(conn._dns_host, conn.port)  # urllib3 connects to _dns_host
    except socket.gaierror as exc:
        raise urllib3.exceptions.NameResolutionError(conn.host, conn, exc) from exc
    error: OSError | None = None
    for family, kind, proto, _, sockaddr in found:
        sock = socket.socket(family, kind, proto)
        try:
            for option in conn.socket_options or ():
                sock.setsockopt(*option)
            if conn.timeout is not _DEFAULT_TIMEOUT:
                sock.settimeout(conn.timeout)
            sock.connect(sockaddr)
            return sock
        except TimeoutError as exc:
            sock.close()
            raise urllib3.exceptions.ConnectTimeoutError(
                conn, f"Connection to {conn.host} timed out. (connect timeout={conn.timeout})",
            ) from exc
        except OSError as exc:
            sock.close()
            error = exc
    raise urllib3.exceptions.NewConnectionError(
        conn, f"Failed to establish a new connection: {error}")


def guarded_pool(policy: EndpointPolicy, **kwargs: Any) -> urllib3.PoolManager:
    """A PoolManager whose every new connection goes through ``policy`` (``_connect``)."""

    class GuardedHTTP(HTTPConnection):
        def _new_conn(self) -> socket.socket:
            return _connect(self, policy)

    class GuardedHTTPS(HTTPSConnection):
        def _new_conn(self) -> socket.socket:
            return _connect(self, policy)

    class GuardedHTTPPool(HTTPConnectionPool):
        ConnectionCls = GuardedHTTP

    class GuardedHTTPSPool(HTTPSConnectionPool):
        ConnectionCls = GuardedHTTPS

    pool = urllib3.PoolManager(**kwargs)
    pool.pool_classes_by_scheme = {"http": GuardedHTTPPool, "https": GuardedHTTPSPool}
    return pool
