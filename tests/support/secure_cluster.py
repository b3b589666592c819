"""A real secured OpenSearch for tests of the workbench's security model.

``secure_cluster()`` starts (once per process) the security plugin's demo node with
``OPENSEARCH_SECURITY=demo scripts/opensearch.sh start`` (HTTPS with the demo certificates on
https://127.0.0.1:9250, or on port ``OPENSEARCH_SECURE_PORT``), or uses
``OPENSEARCH_SECURE_URL`` when set (with ``OPENSEARCH_SECURE_CA``, the CA to verify it by, if
any). It then sets up, idempotently, through the security REST API as ``admin``:

- role ``srw_user``: ``crud``, ``create_index``, ``manage`` on ``search-relevance-*``,
  ``.plugins-search-relevance-*`` and ``.search-relevance-*`` (the scheduled jobs); cluster
  ``cluster_composite_ops``, ``cluster_monitor``;
- roles ``reader_a`` / ``reader_b``: reading (``read``, mappings, index metadata, monitor) on
  ``wb-sec-a*`` / ``wb-sec-b*``;
- users ``alice`` (srw_user, reader_a), ``bob`` (srw_user, reader_b) and ``workbench`` (the
  workbench's service identity: ``all_access``; the node's opensearch.yml lets it impersonate
  any user over REST, header ``opendistro_security_impersonate_as``), by role mappings;
- indices ``wb-sec-a`` and ``wb-sec-b`` with five product-like documents each (``title`` text,
  ``category`` keyword, ``price``), refreshed.

The security plugin refuses passwords that are weak or resemble the user name, so none contains
it: see ``PASSWORDS``. ``password(user)`` also gives a strong password for any other user a test
creates. Run ``python -m tests.support.secure_cluster`` to set the node up by hand.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import subprocess
from dataclasses import dataclass, field
from typing import Any

import urllib3

from tests.support.services import REPO

#: The admin's password unless OPENSEARCH_ADMIN_PASSWORD says otherwise (scripts/opensearch.sh).
DEFAULT_ADMIN_PASSWORD = "Wb-Loopback-9Node!"
PASSWORDS = {
    "alice": "Looking-Glass-47!",
    "bob": "Sponge-Square-83!",
    "workbench": "Service-Ident-61!",
}
#: The SRW indices (workbench/store/indices.py): docs/security.md's patterns for a workbench user.
SRW_INDICES = ["search-relevance-*", ".plugins-search-relevance-*", ".search-relevance-*"]
#: What _search, _msearch, _count, get, _mapping and index metadata need on a reader's indices.
READ_ACTIONS = ["read", "indices:admin/mappings/get", "indices:admin/get", "indices:monitor/*"]
ROLES: dict[str, dict[str, Any]] = {
    "srw_user": {
        "cluster_permissions": ["cluster_composite_ops", "cluster_monitor"],
        "index_permissions": [{"index_patterns": SRW_INDICES,
                               "allowed_actions": ["crud", "create_index", "manage"]}],
    },
    "reader_a": {"index_permissions": [{"index_patterns": ["wb-sec-a*"],
                                        "allowed_actions": READ_ACTIONS}]},
    "reader_b": {"index_permissions": [{"index_patterns": ["wb-sec-b*"],
                                        "allowed_actions": READ_ACTIONS}]},
}
#: Role -> users mapped to it (added to the role's existing mapping, never removing anyone).
ROLE_USERS = {"srw_user": ["alice", "bob"], "reader_a": ["alice"], "reader_b": ["bob"],
              "all_access": ["workbench"]}
DOCS: dict[str, list[tuple[str, str, str, float]]] = {
    "wb-sec-a": [("a1", "red apple", "fruit", 1.2), ("a2", "green apple juice", "drinks", 2.5),
                 ("a3", "cherry pie", "bakery", 6.0), ("a4", "apple cherry tart", "bakery", 7.5),
                 ("a5", "banana bread", "bakery", 4.0)],
    "wb-sec-b": [("b1", "apple laptop sleeve", "accessories", 19.0),
                 ("b2", "cherry wood desk", "furniture", 240.0),
                 ("b3", "apple charger cable", "accessories", 15.0),
                 ("b4", "oak bookshelf", "furniture", 120.0),
                 ("b5", "cherry red headphones", "audio", 59.0)],
}
MAPPINGS = {"properties": {"title": {"type": "text"}, "category": {"type": "keyword"},
                           "price": {"type": "float"}}}


@dataclass(frozen=True)
class Credentials:
    username: str
    password: str


@dataclass(frozen=True)
class SecureCluster:
    """Where the secured node is and who may log in to it."""

    url: str
    #: The demo root CA that signed the node's certificate; None: do not verify the node.
    ca_certs: str | None
    admin: Credentials
    workbench: Credentials
    alice: Credentials
    bob: Credentials
    _http: urllib3.PoolManager = field(repr=False, compare=False)

    @property
    def verify_certs(self) -> bool:
        return self.ca_certs is not None

    def password(self, user: str) -> str:
        """The password of ``user``: the known ones, else a strong one derived from the name."""
        if user == self.admin.username:
            return self.admin.password
        if user in PASSWORDS:
            return PASSWORDS[user]
        return f"Srw-{hashlib.sha256(user.encode()).hexdigest()[:8]}-T3st!"

    def headers(self, user: str | None) -> dict[str, str]:
        """Basic authorization for ``user``; none for None."""
        if user is None:
            return {}
        return urllib3.make_headers(basic_auth=f"{user}:{self.password(user)}")

    def request(self, method: str, path: str, body: Any = None, user: str | None = "admin",
                headers: dict[str, str] | None = None) -> urllib3.BaseHTTPResponse:
        """One call to the node as ``user`` (anonymous for None), verifying its certificate
        when the CA is known. ``body``: JSON, or bytes/str sent as they are."""
        data = body if isinstance(body, (bytes, str)) or body is None else json.dumps(body)
        sent = {"Content-Type": "application/json", **self.headers(user), **(headers or {})}
        return self._http.request(method, self.url + path, body=data, headers=sent)


def _checked(reply: urllib3.BaseHTTPResponse, what: str) -> Any:
    if reply.status >= 300:
        raise RuntimeError(f"{what}: HTTP {reply.status} {reply.data[:500]!r}")
    return json.loads(reply.data) if reply.data else None


def _start_node() -> tuple[str, str]:
    """Start the demo node with the project's script; its URL and the demo root CA's path."""
    script = str(REPO / "scripts" / "opensearch.sh")
    env = {**os.environ, "OPENSEARCH_SECURITY": "demo"}
    # These choose the plain node's port, version and heap; the secured node has its own
    # defaults, and its port may be moved with OPENSEARCH_SECURE_PORT.
    for name in ("OPENSEARCH_PORT", "OPENSEARCH_VERSION", "OPENSEARCH_HEAP"):
        env.pop(name, None)
    if os.environ.get("OPENSEARCH_SECURE_PORT"):
        env["OPENSEARCH_PORT"] = os.environ["OPENSEARCH_SECURE_PORT"]
    started = subprocess.run([script, "start"], env=env, capture_output=True, text=True,
                             timeout=900)
    if started.returncode != 0:
        raise RuntimeError(f"OPENSEARCH_SECURITY=demo scripts/opensearch.sh start failed:\n"
                           f"{started.stderr[-4000:]}")
    ca = subprocess.run([script, "ca"], env=env, capture_output=True, text=True, check=True)
    return started.stdout.strip().splitlines()[-1], ca.stdout.strip()


def _ensure_security(cluster: SecureCluster) -> None:
    api = "/_plugins/_security/api"
    for role, body in ROLES.items():
        _checked(cluster.request("PUT", f"{api}/roles/{role}", body), f"role {role}")
    for user in ("alice", "bob", "workbench"):
        _checked(cluster.request("PUT", f"{api}/internalusers/{user}",
                                 {"password": cluster.password(user)}), f"user {user}")
    for role, users in ROLE_USERS.items():
        reply = cluster.request("GET", f"{api}/rolesmapping/{role}")
        mapping = _checked(reply, f"mapping {role}")[role] if reply.status != 404 else {}
        if set(users) <= set(mapping.get("users", [])):
            continue
        body = {key: mapping.get(key, []) for key in ("backend_roles", "hosts", "users",
                                                      "and_backend_roles")}
        body["users"] = sorted({*body["users"], *users})
        if mapping.get("description"):
            body["description"] = mapping["description"]
        _checked(cluster.request("PUT", f"{api}/rolesmapping/{role}", body), f"mapping {role}")


def _ensure_indices(cluster: SecureCluster) -> None:
    for index, docs in DOCS.items():
        reply = cluster.request("PUT", f"/{index}", {"mappings": MAPPINGS})
        if reply.status >= 300 and b"resource_already_exists_exception" not in reply.data:
            _checked(reply, f"index {index}")
        lines = []
        for doc_id, title, category, price in docs:
            lines.append(json.dumps({"index": {"_index": index, "_id": doc_id}}))
            lines.append(json.dumps({"title": title, "category": category, "price": price}))
        reply = cluster.request("POST", "/_bulk?refresh=true", "\n".join(lines) + "\n",
                                headers={"Content-Type": "application/x-ndjson"})
        if _checked(reply, f"documents of {index}")["errors"]:
            raise RuntimeError(f"documents of {index}: {reply.data[:500]!r}")


@functools.cache
def secure_cluster() -> SecureCluster:
    """The secured node, its users and roles, and the indices wb-sec-a and wb-sec-b."""
    url = os.environ.get("OPENSEARCH_SECURE_URL", "").rstrip("/")
    ca: str | None = os.environ.get("OPENSEARCH_SECURE_CA") or None
    if not url:
        url, ca = _start_node()
    if ca:
        http = urllib3.PoolManager(retries=False, timeout=60, cert_reqs="CERT_REQUIRED",
                                   ca_certs=ca)
    else:
        http = urllib3.PoolManager(retries=False, timeout=60, cert_reqs="CERT_NONE")
    admin = os.environ.get("OPENSEARCH_ADMIN_PASSWORD") or DEFAULT_ADMIN_PASSWORD
    cluster = SecureCluster(
        url=url, ca_certs=ca, admin=Credentials("admin", admin),
        workbench=Credentials("workbench", PASSWORDS["workbench"]),
        alice=Credentials("alice", PASSWORDS["alice"]), bob=Credentials("bob", PASSWORDS["bob"]),
        _http=http)
    _ensure_security(cluster)
    _ensure_indices(cluster)
    return cluster


if __name__ == "__main__":
    found = secure_cluster()
    print(json.dumps({"url": found.url, "ca_certs": found.ca_certs,
                      **{c.username: c.password for c in (found.admin, found.workbench,
                                                          found.alice, found.bob)}}, indent=2))
