"""The secured node of ``tests/support/secure_cluster.py`` is what the security-model tests take
it for: the cluster's own authentication, index permissions and REST impersonation, seen
directly on the node (the workbench is not involved)."""

from __future__ import annotations

import json
from typing import Any

import pytest
import urllib3

from tests.support.secure_cluster import DOCS, SecureCluster

IMPERSONATE = "opendistro_security_impersonate_as"


def call(sec: SecureCluster, method: str, path: str, user: str | None,
         body: Any = None, **headers: str) -> tuple[int, Any]:
    """Status and body (JSON, or text: the node's 401 is plain "Unauthorized")."""
    reply = sec.request(method, path, body, user=user, headers=headers)
    if reply.headers.get("Content-Type", "").startswith("application/json"):
        return reply.status, json.loads(reply.data)
    return reply.status, reply.data.decode()


def assert_forbidden(status: int, body: Any, user: str) -> None:
    assert status == 403, body
    assert body["error"]["type"] == "security_exception"
    assert f"User [name={user}" in body["error"]["reason"]


def test_certificate_verifies_against_the_demo_root_ca(secure_cluster: SecureCluster) -> None:
    if not secure_cluster.verify_certs:
        pytest.skip("OPENSEARCH_SECURE_URL without OPENSEARCH_SECURE_CA: nothing to verify by")
    assert secure_cluster.url.startswith("https://")
    verified = urllib3.PoolManager(cert_reqs="CERT_REQUIRED", ca_certs=secure_cluster.ca_certs,
                                   retries=False, timeout=30)
    assert verified.request("GET", secure_cluster.url + "/",
                            headers=secure_cluster.headers("admin")).status == 200
    unverified = urllib3.PoolManager(cert_reqs="CERT_REQUIRED", retries=False, timeout=30)
    with pytest.raises(urllib3.exceptions.SSLError):
        unverified.request("GET", secure_cluster.url + "/")


@pytest.mark.parametrize(("user", "own", "other"), [("alice", "wb-sec-a", "wb-sec-b"),
                                                    ("bob", "wb-sec-b", "wb-sec-a")])
def test_each_reader_reads_only_their_index(secure_cluster: SecureCluster, user: str, own: str,
                                            other: str) -> None:
    status, body = call(secure_cluster, "POST", f"/{own}/_search", user,
                        {"query": {"match": {"title": "apple"}}})
    assert status == 200, body
    assert body["hits"]["hits"], body
    assert all(hit["_index"] == own for hit in body["hits"]["hits"])
    status, body = call(secure_cluster, "GET", f"/{own}/_count", user)
    assert (status, body["count"]) == (200, len(DOCS[own]))
    doc_id = DOCS[own][0][0]
    status, body = call(secure_cluster, "GET", f"/{own}/_doc/{doc_id}", user)
    assert (status, body["_source"]["title"]) == (200, DOCS[own][0][1])
    status, body = call(secure_cluster, "GET", f"/{own}/_mapping", user)
    assert status == 200 and body[own]["mappings"]["properties"]["title"]["type"] == "text"
    msearch = "\n".join(json.dumps(line) for line in [{"index": own}, {"size": 1}]) + "\n"
    status, body = call(secure_cluster, "POST", "/_msearch", user, msearch,
                        **{"Content-Type": "application/x-ndjson"})
    assert status == 200 and body["responses"][0]["hits"]["total"]["value"] == len(DOCS[own])

    for method, path in [("POST", f"/{other}/_search"), ("GET", f"/{other}/_count"),
                         ("GET", f"/{other}/_doc/{DOCS[other][0][0]}"),
                         ("GET", f"/{other}/_mapping")]:
        assert_forbidden(*call(secure_cluster, method, path, user), user)
    # Writing is not reading: not even their own index.
    assert_forbidden(*call(secure_cluster, "PUT", f"/{own}/_doc/x", user, {"title": "x"}), user)


def test_no_or_wrong_credentials_get_401(secure_cluster: SecureCluster) -> None:
    assert call(secure_cluster, "GET", "/wb-sec-a/_search", None) == (401, "Unauthorized")
    reply = secure_cluster.request("GET", "/_plugins/_security/authinfo", user=None,
                                   headers=urllib3.make_headers(basic_auth="alice:wrong"))
    assert reply.status == 401


def test_authinfo_names_the_user_and_their_roles(secure_cluster: SecureCluster) -> None:
    for user, roles in [("alice", {"srw_user", "reader_a"}), ("bob", {"srw_user", "reader_b"}),
                        ("workbench", {"all_access"}), ("admin", {"all_access"})]:
        status, body = call(secure_cluster, "GET", "/_plugins/_security/authinfo", user)
        assert status == 200, body
        assert body["user_name"] == user
        assert roles <= set(body["roles"]), body["roles"]


def test_workbench_impersonates_a_user_and_gets_only_their_rights(
        secure_cluster: SecureCluster) -> None:
    status, body = call(secure_cluster, "GET", "/_plugins/_security/authinfo", "workbench",
                        **{IMPERSONATE: "alice"})
    assert (status, body["user_name"]) == (200, "alice")
    assert "all_access" not in body["roles"]
    status, body = call(secure_cluster, "POST", "/wb-sec-a/_search", "workbench",
                        **{IMPERSONATE: "alice"})
    assert status == 200 and body["hits"]["total"]["value"] == len(DOCS["wb-sec-a"])
    assert_forbidden(*call(secure_cluster, "POST", "/wb-sec-b/_search", "workbench",
                           **{IMPERSONATE: "alice"}), "alice")
    # Without the header the service identity reads everything.
    status, _ = call(secure_cluster, "POST", "/wb-sec-b/_search", "workbench")
    assert status == 200


def test_only_the_workbench_may_impersonate(secure_cluster: SecureCluster) -> None:
    status, body = call(secure_cluster, "GET", "/_plugins/_security/authinfo", "alice",
                        **{IMPERSONATE: "bob"})
    assert (status, body["error"]["reason"]) == (
        403, "'alice' is not allowed to impersonate as 'bob'")
    status, body = call(secure_cluster, "GET", "/_plugins/_security/authinfo", "workbench",
                        **{IMPERSONATE: "nobody-such"})
    assert (status, body["error"]["reason"]) == (403, "No such user:nobody-such")
