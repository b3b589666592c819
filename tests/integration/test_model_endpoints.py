"""A registered model's endpoint is no door into the workbench's network (docs/model-endpoints.md).

Real processes: API servers under three sets of operator rules — the defaults (trusted hosted
APIs only), any URL but public addresses only, and a local set-up that allows everything — each
resolving names through a hosts file of the test's own (``HostsFile``: the test resolver), a
worker, the shared OpenSearch and, standing for an internal admin service, a local HTTP probe
that answers every request with a secret.

* Endpoints on loopback, 10.x, 172.16.x, 192.168.x, 169.254.169.254, [::1], a name resolving
  to loopback and a public-looking name resolving to a private address are refused when a
  model is registered, with a 400 naming the field and the rule; allowed by the operator
  settings.
* A name that resolves to a private address only after registration (DNS rebinding) is refused
  when it is called, and a redirect is never followed: the probe sees no request.
* Where the operator lets a model reach the probe, its secret appears in no response, no stored
  document and no log line.
* On a secured cluster, only a caller who may write the models index may register, change or
  delete a model, and that is checked before anything else.
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from opensearchpy import OpenSearch

from tests.support import secure_cluster as secure
from tests.support.api import Api
from tests.support.processes import LOOPBACK_MODELS, HostsFile, Server, Worker, base_env
from workbench.store.indices import JUDGMENT_INDEX

SECRET = "INTERNAL-ADMIN-SECRET-42 db_password=hunter2"
PUBLIC = "104.18.6.192"  # any global address: registration resolves names, never connects
PRIVATE_RULE = ("endpoints on non-public addresses are refused unless the operator allows "
                "them (WORKBENCH_MODEL_PRIVATE_ENDPOINTS=true)")
TRUST_RULE = ("is not a trusted endpoint: it matches none of the patterns of "
              "WORKBENCH_MODEL_ENDPOINTS")


class Probe:
    """An internal service: every request is counted and answered with ``SECRET`` (``mode``
    says how); ``/redirect`` answers 307 to ``/target`` on the same service."""

    def __init__(self) -> None:
        self.mode = "text500"
        self.paths: list[str] = []
        probe = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                probe.paths.append(self.path)
                if self.path.startswith("/redirect"):
                    self.send_response(307)
                    self.send_header("Location", f"http://127.0.0.1:{probe.port}/target")
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                status, kind, body = {
                    "text500": (500, "text/plain", SECRET),
                    "text200": (200, "text/plain", SECRET),
                    "json200": (200, "application/json", json.dumps({"admin": SECRET})),
                    "json404": (404, "application/json", json.dumps({"detail": SECRET})),
                }[probe.mode]
                data = body.encode()
                self.send_response(status)
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: object) -> None:
                return

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()


@pytest.fixture(scope="module")
def probe() -> Iterator[Probe]:
    service = Probe()
    yield service
    service.close()


@pytest.fixture(scope="module")
def hosts() -> HostsFile:
    return HostsFile({"api.openai.com": PUBLIC, "models.wb-test.example": "10.9.8.7",
                      "rebind.wb-test.example": PUBLIC})


def rules_env(env: dict[str, str], **rules: str) -> dict[str, str]:
    """The session's environment with the endpoint rules replaced by ``rules``."""
    out = {k: v for k, v in env.items() if k not in LOOPBACK_MODELS}
    return {**out, **rules}


ANY_URL = json.dumps([".*"])


@pytest.fixture(scope="module")
def servers(env: dict[str, str], hosts: HostsFile) -> Iterator[dict[str, Api]]:
    """API servers under the default rules, public addresses only, and everything allowed."""
    started = {
        "default": Server(rules_env(env), workers=1, prefix=hosts.command()),
        "public": Server(rules_env(env, WORKBENCH_MODEL_ENDPOINTS=ANY_URL), workers=1,
                         prefix=hosts.command()),
        "allowed": Server(rules_env(env, WORKBENCH_MODEL_ENDPOINTS=ANY_URL,
                                    WORKBENCH_MODEL_PRIVATE_ENDPOINTS="true"), workers=1,
                          prefix=hosts.command()),
    }
    yield {name: Api(server.url) for name, server in started.items()}
    for server in started.values():
        server.stop()


def register(api: Api, endpoint: str, model_id: str | None = None) -> Any:
    return api.srw("PUT", "/models", {"id": model_id or f"ep-{uuid.uuid4().hex[:8]}",
                                      "provider": "openai", "endpoint": endpoint, "model": "m"})


def endpoints(probe: Probe) -> dict[str, str]:
    """Each endpoint a model must not reach by default -> what makes it non-public."""
    return {
        f"http://127.0.0.1:{probe.port}/internal": "is on 127.0.0.1, a loopback address",
        "http://10.1.2.3/v1": "is on 10.1.2.3, a private address",
        "http://172.16.5.4/v1": "is on 172.16.5.4, a private address",
        "http://192.168.0.10/v1": "is on 192.168.0.10, a private address",
        "http://169.254.169.254/latest/meta-data": "is on 169.254.169.254, a link-local address",
        f"http://[::1]:{probe.port}/v1": "is on ::1, a loopback address",
        f"http://localhost:{probe.port}/v1":
            "has a host name (localhost) that resolves to a loopback address",
        "https://models.wb-test.example/v1":
            "has a host name (models.wb-test.example) that resolves to a private address",
    }


def test_non_public_endpoints_are_refused_when_registered(servers: dict[str, Api],
                                                          probe: Probe) -> None:
    before = len(probe.paths)
    for endpoint, why in endpoints(probe).items():
        register(servers["default"], endpoint).error(
            400, f'Invalid model: field "endpoint" {TRUST_RULE}', "illegal_argument_exception")
        register(servers["public"], endpoint).error(
            400, f'Invalid model: field "endpoint" {why}; {PRIVATE_RULE}',
            "illegal_argument_exception")
        allowed = register(servers["allowed"], endpoint)
        assert allowed.status == 200, (endpoint, allowed.data)
        servers["allowed"].srw("DELETE", f"/models/{allowed.json['model_id']}")
    # The environment list's spelling is refused too (named as the API names it).
    reply = servers["public"].srw("PUT", "/models", {
        "id": "snake", "provider": "openai", "base_url": "http://10.1.2.3/v1", "model": "m"})
    reply.error(400, f'Invalid model: field "endpoint" is on 10.1.2.3, a private address; '
                     f"{PRIVATE_RULE}")
    # The hosted API of the default list is trusted (its name resolves to a public address).
    for name in ("default", "public"):
        created = register(servers[name], "https://api.openai.com/v1")
        assert created.status == 200, created.data
        servers[name].srw("DELETE", f"/models/{created.json['model_id']}")
    # Changing a model is checked as registering one.
    model = register(servers["public"], "https://api.openai.com/v1").json["model_id"]
    servers["public"].srw("PUT", f"/models/{model}", {"endpoint": "http://10.1.2.3/v1"}).error(
        400, f'Invalid model: field "endpoint" is on 10.1.2.3, a private address; '
             f"{PRIVATE_RULE}")
    servers["public"].srw("DELETE", f"/models/{model}")
    assert len(probe.paths) == before  # registering never connects


def evaluate(api: Api, model_id: str) -> Any:
    return api.srw("POST", "/_evaluate", {
        "queryText": "red shoes", "judge": "llm", "modelId": model_id, "k": 1,
        "fields": ["title"], "hits": [{"id": "B1", "title": "Red shoes"}]})


def test_a_name_that_turns_private_after_registration_is_refused_when_called(
        servers: dict[str, Api], probe: Probe, hosts: HostsFile) -> None:
    api = servers["public"]
    endpoint = f"http://rebind.wb-test.example:{probe.port}/internal"
    model = register(api, endpoint).json["model_id"]
    try:
        hosts.write({"api.openai.com": PUBLIC, "models.wb-test.example": "10.9.8.7",
                     "rebind.wb-test.example": "127.0.0.1"})  # the attacker's DNS changes
        before = len(probe.paths)
        reply = evaluate(api, model)
        assert reply.status == 400, reply.data
        assert reply.reason.endswith(
            'field "endpoint" has a host name (rebind.wb-test.example) that resolves to a '
            f"loopback address; {PRIVATE_RULE}"), reply.reason
        assert len(probe.paths) == before
    finally:
        hosts.write({"api.openai.com": PUBLIC, "models.wb-test.example": "10.9.8.7",
                     "rebind.wb-test.example": PUBLIC})
        api.srw("DELETE", f"/models/{model}")


def test_a_redirect_is_never_followed(servers: dict[str, Api], probe: Probe) -> None:
    api = servers["allowed"]
    model = register(api, f"http://127.0.0.1:{probe.port}/redirect").json["model_id"]
    try:
        before = len(probe.paths)
        reply = evaluate(api, model)
        assert reply.status == 502, reply.data
        assert (f"HTTP 307 from http://127.0.0.1:{probe.port}/redirect/chat/completions: a "
                "redirect, which is not followed") in reply.reason, reply.reason
        # Asked with structured output, then once plainly (the judge's rule); never /target.
        assert probe.paths[before:] == ["/redirect/chat/completions"] * 2
    finally:
        api.srw("DELETE", f"/models/{model}")


@pytest.fixture(scope="module")
def allowed_worker(env: dict[str, str], hosts: HostsFile) -> Iterator[Worker]:
    """A worker under the rules of the "allowed" server, on the session's queue."""
    worker = Worker(rules_env(env, WORKBENCH_MODEL_ENDPOINTS=ANY_URL,
                              WORKBENCH_MODEL_PRIVATE_ENDPOINTS="true"),
                    queue=f"probe-{uuid.uuid4().hex[:8]}", prefix=hosts.command())
    yield worker
    worker.stop()


def test_the_probe_s_secret_comes_back_nowhere(
        env: dict[str, str], servers: dict[str, Api], probe: Probe, hosts: HostsFile,
        allowed_worker: Worker, direct: OpenSearch, index_name: str) -> None:
    endpoint = f"http://127.0.0.1:{probe.port}/internal"
    # The default rules: the probe is never reached.
    before = len(probe.paths)
    register(servers["default"], endpoint, "ssrf-probe").error(
        400, f'Invalid model: field "endpoint" {TRUST_RULE}')
    assert len(probe.paths) == before

    # An operator who allows loopback endpoints: the calls happen, their answers are not shown.
    queue_env = rules_env(env, WORKBENCH_MODEL_ENDPOINTS=ANY_URL,
                          WORKBENCH_MODEL_PRIVATE_ENDPOINTS="true",
                          WORKBENCH_QUEUE=allowed_worker.queue)
    server = Server(queue_env, workers=1, prefix=hosts.command())
    api = Api(server.url)
    model = f"ssrf-probe-{uuid.uuid4().hex[:6]}"
    answers: list[bytes] = []
    try:
        assert register(api, endpoint, model).status == 200
        direct.index(index=index_name, id="B1", body={"title": "Red shoes"}, refresh=True)
        query_set = api.srw("PUT", "/query_sets", {"name": "probe", "querySetQueries": [
            {"queryText": "red shoes"}]}).json["query_set_id"]
        config = api.srw("PUT", "/search_configurations", {
            "name": "probe", "index": index_name,
            "query": '{"query":{"match":{"title":"%SearchText%"}}}'}).json[
            "search_configuration_id"]
        for mode, shown in (("text500", "HTTP 500 from"), ("text200", "is not JSON"),
                            ("json200", "has no choices[0].message"), ("json404", "HTTP 404")):
            probe.mode = mode
            before = len(probe.paths)
            reply = evaluate(api, model)
            answers.append(reply.data)
            assert reply.status == 502, reply.data
            assert shown in reply.reason, reply.reason
            assert len(probe.paths) > before  # the call was made
            created = api.srw("PUT", "/judgments", {
                "name": f"probe-{mode}", "type": "LLM_JUDGMENT", "modelId": model,
                "querySetId": query_set, "searchConfigurationList": [config], "size": 1,
                "contextFields": ["title"], "overwriteCache": True})
            assert created.status == 200, created.data
            judgment = created.json["judgment_id"]
            deadline = time.monotonic() + 120
            while time.monotonic() < deadline:
                reply = api.srw("GET", f"/judgments/{judgment}")
                if reply.json["hits"]["hits"][0]["_source"]["status"] != "PROCESSING":
                    break
                time.sleep(0.3)
            answers.append(reply.data)
            doc = direct.get(index=JUDGMENT_INDEX, id=judgment)["_source"]
            reason = json.dumps(doc["metadata"])
            assert shown in reason, doc["metadata"]
            answers.append(json.dumps(doc).encode())
            answers.append(api.srw("GET", "/judgments", params={"status": "ERROR"}).data)
        answers.append(api.srw("GET", f"/models/{model}").data)
    finally:
        api.srw("DELETE", f"/models/{model}")
        server.stop()
    logs = server.log() + allowed_worker.log()
    for text in [*(a.decode() for a in answers), logs]:
        assert "INTERNAL-ADMIN-SECRET" not in text and "hunter2" not in text


@pytest.fixture(scope="module")
def sec_api(secure_cluster: secure.SecureCluster, redis_url: str,
            hosts: HostsFile) -> Iterator[tuple[secure.SecureCluster, Api]]:
    """A server in front of the secured node, under the default endpoint rules, and a user
    ``dora`` who may read the SRW indices but write none of them."""
    sec = secure_cluster
    role = {"index_permissions": [{"index_patterns": secure.SRW_INDICES,
                                   "allowed_actions": ["read"]}],
            "cluster_permissions": ["cluster_composite_ops_ro"]}
    api_path = "/_plugins/_security/api"
    assert sec.request("PUT", f"{api_path}/roles/srw_reader", role).status in (200, 201)
    assert sec.request("PUT", f"{api_path}/internalusers/dora",
                       {"password": sec.password("dora")}).status in (200, 201)
    assert sec.request("PUT", f"{api_path}/rolesmapping/srw_reader",
                       {"users": ["dora"]}).status in (200, 201)
    env = base_env(sec.url.replace("://127.0.0.1:", "://localhost:"), redis_url,
                   OPENSEARCH_USERNAME="workbench", OPENSEARCH_PASSWORD=sec.password("workbench"),
                   **({"OPENSEARCH_CA_CERTS": sec.ca_certs} if sec.ca_certs
                      else {"OPENSEARCH_VERIFY_CERTS": "false"}))
    server = Server(rules_env(env), workers=1, wait_cluster=False, prefix=hosts.command())
    yield sec, Api(server.url)
    server.stop()


def test_only_who_may_write_the_models_index_registers_models(
        sec_api: tuple[secure.SecureCluster, Api], probe: Probe) -> None:
    sec, api = sec_api
    endpoint = f"http://127.0.0.1:{probe.port}/internal"
    dora, alice = sec.headers("dora"), sec.headers("alice")
    before = len(probe.paths)
    for method, path, body in (("PUT", "/models", {"id": "m1", "provider": "openai",
                                                    "endpoint": endpoint, "model": "m"}),
                               ("POST", "/models", {}),  # not even the body is looked at
                               ("PUT", "/models/m1", {"endpoint": endpoint}),
                               ("DELETE", "/models/m1", None)):
        reply = api.srw(method, path, body, headers=dora)
        assert reply.status == 403, (method, path, reply.data)
        assert reply.json["error"]["type"] == "security_exception"
        assert "indices:data/write/index" in reply.reason, reply.reason
    # Whoever may write it gets as far as the endpoint rules.
    register_reply = api.srw("PUT", "/models", {"id": "m1", "provider": "openai",
                                                "endpoint": endpoint, "model": "m"},
                             headers=alice)
    register_reply.error(400, f'Invalid model: field "endpoint" {TRUST_RULE}')
    assert api.srw("GET", "/models", headers=dora).status == 200  # reading stays open
    assert len(probe.paths) == before
