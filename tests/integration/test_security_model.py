"""The workbench in front of a real secured cluster (OpenSearch with the security plugin and its
demo configuration, see ``tests/support/secure_cluster.py``): nothing can be read or changed
through the workbench that the caller's own credentials could not read or change on the cluster.

Users: ``alice`` may search ``wb-sec-a``, ``bob`` may search ``wb-sec-b``, ``carol`` sees only
the red documents of ``wb-sec-c`` (document-level security); all three may use the SRW indices.
The workbench's own identity is ``workbench`` (all access, allowed to impersonate), and jobs run
impersonating their creator.
"""

from __future__ import annotations

import base64
import json
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
import urllib3

from tests.conftest import JUDGE_MODEL, LLM_KEY
from tests.support.api import Api, Reply, search_configuration
from tests.support.processes import FRONTS, Server, Worker, base_env, helper_units
from tests.support.secure_cluster import SecureCluster
from tests.support.waiting import finished
from workbench.bench.llm_server import LLMServer
from workbench.config import Config
from workbench.store.indices import (
    EVALUATION_INDEX,
    EXPERIMENT_INDEX,
    JOBS_INDEX,
    JUDGMENT_INDEX,
    QUERY_SET_INDEX,
    SEARCH_CONFIG_INDEX,
)

C_INDEX = "wb-sec-c"
SECRET_KEY = "q9bHk2m0T3v5w7y9A1c3E5g7I9k1M3o5Q7s9U1w3Y5a="  # a Fernet key for these tests only
C_DOCS = [("c1", "red apple", "red"), ("c2", "red cherry", "red"),
          ("c3", "blue apple", "blue"), ("c4", "blue cherry", "blue")]


def cluster_call(sec: SecureCluster, method: str, path: str, body: Any = None,
                 user: str | None = "admin") -> urllib3.BaseHTTPResponse:
    """The node itself, as ``user`` (the admin by default; anonymous for None)."""
    return sec.request(method, path, body, user=user)


@pytest.fixture(scope="module")
def sec(secure_cluster: SecureCluster) -> SecureCluster:
    """The secured node, plus carol and her document-level-security role on ``wb-sec-c``."""
    cluster_call(secure_cluster, "DELETE", f"/{C_INDEX}")
    for doc_id, title, team in C_DOCS:
        reply = cluster_call(secure_cluster, "PUT", f"/{C_INDEX}/_doc/{doc_id}?refresh=true",
                             {"title": title, "team": team})
        assert reply.status in (200, 201), reply.data
    role = {"cluster_permissions": [],
            "index_permissions": [{"index_patterns": [C_INDEX],
                                   "dls": json.dumps({"term": {"team": "red"}}),
                                   "allowed_actions": ["read", "indices:admin/mappings/get"]}]}
    assert cluster_call(secure_cluster, "PUT", "/_plugins/_security/api/roles/reader_c_dls",
                        role).status in (200, 201)
    user = {"password": secure_cluster.password("carol"),
            "opendistro_security_roles": ["srw_user", "reader_c_dls"]}
    assert cluster_call(secure_cluster, "PUT", "/_plugins/_security/api/internalusers/carol",
                        user).status in (200, 201)
    return secure_cluster


@pytest.fixture(scope="module")
def sec_env(sec: SecureCluster, redis_url: str, llm_server: LLMServer) -> dict[str, str]:
    models = [{"id": JUDGE_MODEL, "name": "Test judge", "provider": "openai",
               "base_url": llm_server.openai_base_url, "model": "judge-1",
               "api_key_env": "TEST_LLM_KEY"}]
    # By host name: HAProxy verifies an upstream certificate against names, never IP addresses.
    url = sec.url.replace("://127.0.0.1:", "://localhost:")
    return base_env(url, redis_url, WORKBENCH_QUEUE=f"test-sec-{uuid.uuid4().hex[:8]}",
                    OPENSEARCH_USERNAME="workbench",
                    OPENSEARCH_PASSWORD=sec.password("workbench"),
                    **({"OPENSEARCH_CA_CERTS": sec.ca_certs} if sec.ca_certs
                       else {"OPENSEARCH_VERIFY_CERTS": "false"}),
                    WORKBENCH_JOB_IMPERSONATION="true",
                    WORKBENCH_SECRET_KEY=SECRET_KEY,
                    # A/B impressions land where alice may read and bob may not
                    WORKBENCH_AB_QUERIES_INDEX=AB_QUERIES, WORKBENCH_AB_EVENTS_INDEX=AB_EVENTS,
                    WORKBENCH_AB_FLUSH_SECONDS="0.1",
                    WORKBENCH_MODELS=json.dumps(models), TEST_LLM_KEY=LLM_KEY)


@pytest.fixture(scope="module", params=FRONTS, ids=[f"front={f}" for f in FRONTS])
def sec_server(request: pytest.FixtureRequest, sec_env: dict[str, str]) -> Iterator[Server]:
    srv = Server(sec_env, workers=1, wait_cluster=False, front=request.param)
    yield srv
    srv.stop()


@pytest.fixture(scope="module")
def sec_worker(sec_env: dict[str, str]) -> Iterator[Worker]:
    wrk = Worker(sec_env)
    yield wrk
    wrk.stop()


class As:
    """Raw HTTP to the workbench as one user (or anonymously, or with an empty header)."""

    def __init__(self, server: Server, sec: SecureCluster, user: str | None,
                 authorization: str | None = None) -> None:
        self.api = Api(server.url)
        if authorization is not None:
            self.headers = {"Authorization": authorization}
        else:
            self.headers = sec.headers(user)

    def call(self, method: str, path: str, body: Any = None) -> Reply:
        return self.api.call(method, path, body, headers=self.headers)

    def srw(self, method: str, path: str, body: Any = None) -> Reply:
        return self.api.srw(method, path, body, headers=self.headers)


def forbidden(reply: Reply, user: str) -> None:
    """The cluster's own 403 for ``user``."""
    assert reply.status == 403, reply.data[:500]
    body = reply.json
    assert body["status"] == 403
    assert body["error"]["type"] == "security_exception"
    assert f"User [name={user}" in body["error"]["reason"]


def count(sec: SecureCluster, index: str, field: str, value: str) -> int:
    """Documents of ``index`` whose keyword ``field`` is ``value`` (seen by the admin)."""
    cluster_call(sec, "POST", f"/{index}/_refresh")
    reply = cluster_call(sec, "POST", f"/{index}/_count?ignore_unavailable=true",
                         {"query": {"term": {field: value}}})
    return int(json.loads(reply.data)["count"])


def wait_done(user: As, path: str, timeout: float = 120) -> dict[str, Any]:
    return finished(user, path, timeout, interval=0.25)


def config(user: As, index: str) -> str:
    return search_configuration(user, f"{index} title {uuid.uuid4().hex[:6]}", index,
                                '{"query":{"match":{"title":"%SearchText%"}}}')


ROUTES: list[tuple[str, str, Any]] = [
    ("GET", "/_plugins/_search_relevance/query_sets", None),
    ("PUT", "/_plugins/_search_relevance/query_sets",
     {"name": "anon", "querySetQueries": [{"queryText": "apple"}]}),
    ("POST", "/_plugins/_search_relevance/_evaluate",
     {"queryText": "apple", "index": "wb-sec-a", "searchQuery": {"match_all": {}},
      "judge": "token_overlap", "referenceAnswer": "apple"}),
    ("GET", "/_plugins/_search_relevance/stats", None),
    ("GET", "/_plugins/_search_relevance/experiments", None),
    ("PUT", "/_plugins/_search_relevance/judgments",
     {"name": "anon", "type": "IMPORT_JUDGMENT",
      "judgmentRatings": [{"query": "q", "ratings": [{"docId": "a", "rating": "1"}]}]}),
    ("GET", "/_cluster/settings", None),
    ("PUT", "/_cluster/settings",
     {"persistent": {"plugins.search_relevance.stats_enabled": True}}),
    ("POST", "/_plugins/_ml/models/_search", {"query": {"match_all": {}}}),
    ("POST", "/_plugins/ubi/initialize", None),
    ("GET", "/wb-sec-a/_search", None),
    ("GET", "/", None),
]


@pytest.mark.parametrize(("method", "path", "body"), ROUTES,
                         ids=[f"{m} {p}" for m, p, _ in ROUTES])
def test_requests_without_valid_credentials_get_the_clusters_own_401(
        sec: SecureCluster, sec_server: Server, method: str, path: str, body: Any) -> None:
    own = cluster_call(sec, "GET", "/_plugins/_security/authinfo", user=None)
    assert own.status == 401
    callers = [As(sec_server, sec, None), As(sec_server, sec, None, authorization=""),
               As(sec_server, sec, None, authorization="Basic " + base64.b64encode(
                   b"alice:wrong-password").decode())]
    for caller in callers:
        reply = caller.call(method, path, body)
        assert reply.status == 401, (caller.headers, reply.status, reply.data[:300])
        assert reply.data == own.data
        assert reply.headers.get("WWW-Authenticate") == own.headers.get("WWW-Authenticate")
    assert count(sec, QUERY_SET_INDEX, "name", "anon") == 0
    assert count(sec, JUDGMENT_INDEX, "name", "anon") == 0


def test_evaluate_searches_as_the_caller(sec: SecureCluster, sec_server: Server) -> None:
    alice = As(sec_server, sec, "alice")
    body = {"queryText": "apple", "searchQuery": {"query": {"match": {"title": "%SearchText%"}}},
            "k": 10, "debug": True, "judge": "token_overlap", "referenceAnswer": "red apple"}
    own = alice.srw("POST", "/_evaluate", {**body, "index": "wb-sec-a"})
    assert own.status == 200, own.data
    assert own.json["hits"], own.json
    assert {hit["id"] for hit in own.json["hits"]} <= {"a1", "a2", "a3", "a4", "a5"}
    forbidden(alice.srw("POST", "/_evaluate", {**body, "index": "wb-sec-b"}), "alice")
    forbidden(As(sec_server, sec, "bob").srw("POST", "/_evaluate",
                                             {**body, "index": "wb-sec-a"}), "bob")


def test_lookups_while_answering_run_as_the_caller(sec: SecureCluster,
                                                   sec_server: Server) -> None:
    alice = As(sec_server, sec, "alice")
    name = f"cfg-{uuid.uuid4().hex[:6]}"
    forbidden(alice.srw("PUT", "/search_configurations", {
        "name": name, "index": "wb-sec-b",
        "query": '{"query":{"match":{"title":"%SearchText%"}}}'}), "alice")
    assert count(sec, SEARCH_CONFIG_INDEX, "name", name) == 0
    forbidden(alice.srw("POST", "/query_sets", {
        "name": name, "sampling": "topn", "querySetSize": 5, "ubiQueriesIndex": "wb-sec-b"}),
        "alice")
    assert count(sec, QUERY_SET_INDEX, "name", name) == 0
    forbidden(alice.call("GET", "/wb-sec-b/_search"), "alice")
    assert alice.call("GET", "/wb-sec-a/_search").status == 200


def test_jobs_over_indices_the_caller_cannot_search_are_refused_and_nothing_is_stored(
        sec: SecureCluster, sec_server: Server) -> None:
    alice, bob = As(sec_server, sec, "alice"), As(sec_server, sec, "bob")
    on_a, also_on_a = config(alice, "wb-sec-a"), config(alice, "wb-sec-a")
    query_set = alice.srw("PUT", "/query_sets", {
        "name": f"qs-{uuid.uuid4().hex[:6]}",
        "querySetQueries": [{"queryText": "apple"}]}).json["query_set_id"]
    name = f"bob-{uuid.uuid4().hex[:6]}"
    forbidden(bob.srw("PUT", "/judgments", {
        "name": name, "type": "LLM_JUDGMENT", "modelId": JUDGE_MODEL, "querySetId": query_set,
        "searchConfigurationList": [on_a], "size": 3}), "bob")
    forbidden(bob.srw("PUT", "/judgments", {
        "name": name, "type": "UBI_JUDGMENT", "clickModel": "coec", "maxRank": 10,
        "ubiEventsIndex": "wb-sec-a"}), "bob")
    assert count(sec, JUDGMENT_INDEX, "name", name) == 0
    before = count(sec, EXPERIMENT_INDEX, "querySetId", query_set)
    forbidden(bob.srw("PUT", "/experiments", {
        "type": "PAIRWISE_COMPARISON", "querySetId": query_set,
        "searchConfigurationList": [on_a, also_on_a], "size": 5}), "bob")
    assert count(sec, EXPERIMENT_INDEX, "querySetId", query_set) == before
    # alice may; bob may not schedule her experiment
    created = alice.srw("PUT", "/experiments", {
        "type": "PAIRWISE_COMPARISON", "querySetId": query_set,
        "searchConfigurationList": [on_a, also_on_a], "size": 5})
    assert created.status == 200, created.data
    experiment_id = created.json["experiment_id"]
    forbidden(bob.srw("POST", "/experiments/schedule", {
        "experimentId": experiment_id, "cronExpression": "0 3 * * *"}), "bob")
    assert count(sec, JOBS_INDEX, "id", experiment_id) == 0
    scheduled = alice.srw("POST", "/experiments/schedule", {
        "experimentId": experiment_id, "cronExpression": "0 3 * * *"})
    assert scheduled.status == 200, scheduled.data
    job = alice.srw("GET", f"/experiments/schedule/{experiment_id}").json
    assert job["hits"]["hits"][0]["_source"]["createdBy"] == "alice"
    assert alice.srw("DELETE", f"/experiments/schedule/{experiment_id}").status == 200


def test_jobs_record_their_creator_and_search_as_that_user(
        sec: SecureCluster, sec_server: Server, sec_worker: Worker) -> None:
    """carol sees only the red documents of wb-sec-c; the workbench's own identity sees all.
    Her experiment's results hold only red documents: the job searched as carol."""
    carol = As(sec_server, sec, "carol")
    on_c = config(carol, C_INDEX)
    query_set = carol.srw("PUT", "/query_sets", {
        "name": f"qs-{uuid.uuid4().hex[:6]}",
        "querySetQueries": [{"queryText": "apple"}, {"queryText": "cherry"}]}).json[
        "query_set_id"]
    judgment = carol.srw("PUT", "/judgments", {
        "name": f"carol-{uuid.uuid4().hex[:6]}", "type": "IMPORT_JUDGMENT",
        "judgmentRatings": [{"query": q, "ratings": [{"docId": d, "rating": "1"}
                                                      for d, _, _ in C_DOCS]}
                            for q in ("apple", "cherry")]})
    assert judgment.status == 200, judgment.data
    judgment_id = judgment.json["judgment_id"]
    assert wait_done(carol, f"/judgments/{judgment_id}")["status"] == "COMPLETED"
    created = carol.srw("PUT", "/experiments", {
        "type": "POINTWISE_EVALUATION", "querySetId": query_set,
        "searchConfigurationList": [on_c], "judgmentList": [judgment_id], "size": 10})
    assert created.status == 200, created.data
    experiment_id = created.json["experiment_id"]
    experiment = wait_done(carol, f"/experiments/{experiment_id}")
    assert experiment["status"] == "COMPLETED", experiment
    assert experiment["createdBy"] == "carol"
    results = json.loads(cluster_call(sec, "POST", f"/{EVALUATION_INDEX}/_search", {
        "query": {"term": {"experimentId": experiment_id}}, "size": 100}).data)
    found = {doc_id for hit in results["hits"]["hits"] for doc_id in hit["_source"]["documentIds"]}
    assert found == {"c1", "c2"}  # the workbench's own identity would have found c3, c4 too


def test_anonymous_callers_borrow_the_workbench_identity_only_when_the_operator_opts_in(
        sec: SecureCluster, sec_env: dict[str, str]) -> None:
    server = Server(dict(sec_env, WORKBENCH_ANONYMOUS_AS_SERVICE="true"), workers=1,
                    wait_cluster=False)
    try:
        assert As(server, sec, None).srw("GET", "/query_sets").status == 200
        assert As(server, sec, None).call("GET", "/wb-sec-b/_search").status == 200
        empty = As(server, sec, None, authorization="")
        assert empty.srw("GET", "/query_sets").status == 401
        assert empty.call("GET", "/wb-sec-b/_search").status == 401
        forbidden(As(server, sec, "alice").call("GET", "/wb-sec-b/_search"), "alice")
    finally:
        server.stop()


#: entries a batch judges while the caller waits (the default)
BATCH_LIMIT = Config().evaluate_batch_limit

OWN = {"alice": ("wb-sec-a", "wb-sec-b"), "bob": ("wb-sec-b", "wb-sec-a")}
AB_QUERIES, AB_EVENTS = "wb-sec-a-ab-queries", "wb-sec-a-ab-events"


@pytest.mark.parametrize("user", sorted(OWN))
def test_every_route_answers_each_user_as_the_cluster_would(
        sec: SecureCluster, sec_server: Server, sec_worker: Worker, llm: LLMServer,
        user: str, env: dict[str, str]) -> None:
    """Every route the workbench answers, and the pass-through, called as ``user``: what the
    user's own permissions allow answers as it would on an open cluster, what they do not is the
    cluster's 403; nothing answers 401 or 5xx. The route table is the app's own, so a new route
    fails this test until it is exercised here."""
    from workbench.app import create_app

    own, other = OWN[user]
    me, admin = As(sec_server, sec, user), As(sec_server, sec, "admin")
    seen: dict[tuple[str, str], set[int]] = {}

    def call(method: str, rule: str, path: str, body: Any = None, expect: int = 200) -> Reply:
        reply = me.call(method, path, body)
        assert reply.status == expect, (method, path, reply.status, reply.data[:400])
        if expect == 403:
            forbidden(reply, user)
        seen.setdefault((method, rule), set()).add(reply.status)
        return reply

    srw = "/_plugins/_search_relevance"
    theirs = config(admin, other)
    # query sets
    qs = call("PUT", f"{srw}/query_sets", f"{srw}/query_sets", {
        "name": f"qs-{user}-{uuid.uuid4().hex[:6]}",
        "querySetQueries": [{"queryText": "apple"}, {"queryText": "cherry"}]}).json["query_set_id"]
    call("POST", f"{srw}/query_sets", f"{srw}/query_sets", {
        "name": "sampled", "sampling": "topn", "querySetSize": 5, "ubiQueriesIndex": other},
        expect=403)
    call("GET", f"{srw}/query_sets", f"{srw}/query_sets")
    call("GET", f"{srw}/query_sets/<entity_id>", f"{srw}/query_sets/{qs}")
    for method in ("GET", "POST"):
        call(method, f"{srw}/query_sets/_search", f"{srw}/query_sets/_search")
    # a set generated from an index: the caller must be able to read it (the job reads it as
    # the service identity)
    generated_body = {"name": f"gen-{user}-{uuid.uuid4().hex[:6]}",
                      "sampling": "reference_random", "numberOfQueryTerms": 2}
    call("POST", f"{srw}/query_sets/_estimate", f"{srw}/query_sets/_estimate",
         {**generated_body, "index": own})
    call("POST", f"{srw}/query_sets/_estimate", f"{srw}/query_sets/_estimate",
         {**generated_body, "index": other}, expect=403)
    generated = call("PUT", f"{srw}/query_sets", f"{srw}/query_sets",
                     {**generated_body, "index": own}).json["query_set_id"]
    call("PUT", f"{srw}/query_sets", f"{srw}/query_sets", {**generated_body, "index": other},
         expect=403)
    assert wait_done(me, f"/query_sets/{generated}")["status"] == "COMPLETED"
    call("POST", f"{srw}/query_sets/<entity_id>/_cancel",
         f"{srw}/query_sets/{generated}/_cancel", expect=409)  # finished: nothing to cancel
    # search configurations
    mine = call("PUT", f"{srw}/search_configurations", f"{srw}/search_configurations", {
        "name": f"cfg-{user}-{uuid.uuid4().hex[:6]}", "index": own,
        "query": '{"query":{"match":{"title":"%SearchText%"}}}'}).json["search_configuration_id"]
    call("PUT", f"{srw}/search_configurations", f"{srw}/search_configurations", {
        "name": f"cfg-{user}-{uuid.uuid4().hex[:6]}", "index": other,
        "query": '{"query":{"match":{"title":"%SearchText%"}}}'}, expect=403)
    call("GET", f"{srw}/search_configurations", f"{srw}/search_configurations")
    call("GET", f"{srw}/search_configurations/<entity_id>",
         f"{srw}/search_configurations/{mine}")
    for method in ("GET", "POST"):
        call(method, f"{srw}/search_configurations/_search", f"{srw}/search_configurations/_search")
    # judgments
    imported = call("PUT", f"{srw}/judgments", f"{srw}/judgments", {
        "name": f"imp-{user}-{uuid.uuid4().hex[:6]}", "type": "IMPORT_JUDGMENT",
        "judgmentRatings": [{"query": "apple", "ratings": [{"docId": f"{own[-1]}1",
                                                            "rating": "1"}]}]}).json["judgment_id"]
    llm_body = {"name": f"llm-{user}-{uuid.uuid4().hex[:6]}", "type": "LLM_JUDGMENT",
                "modelId": JUDGE_MODEL, "querySetId": qs, "size": 3}
    rated = call("PUT", f"{srw}/judgments", f"{srw}/judgments",
                 {**llm_body, "searchConfigurationList": [mine]}).json["judgment_id"]
    call("PUT", f"{srw}/judgments", f"{srw}/judgments",
         {**llm_body, "searchConfigurationList": [theirs]}, expect=403)
    assert wait_done(me, f"/judgments/{imported}")["status"] == "COMPLETED"
    assert wait_done(me, f"/judgments/{rated}")["status"] == "COMPLETED"
    call("GET", f"{srw}/judgments", f"{srw}/judgments")
    call("GET", f"{srw}/judgments/<entity_id>", f"{srw}/judgments/{rated}")
    for method in ("GET", "POST"):
        call(method, f"{srw}/judgments/_search", f"{srw}/judgments/_search")
    call("PUT", f"{srw}/judgments/<entity_id>", f"{srw}/judgments/{rated}", {
        "judgmentRatings": [{"query": "apple", "ratings": [{"docId": f"{own[-1]}1",
                                                            "rating": 1}]}]})
    retried = call("POST", f"{srw}/judgments/<entity_id>/_retry",
                   f"{srw}/judgments/{rated}/_retry", expect=400)
    assert retried.reason == "No failed documents to retry"
    call("POST", f"{srw}/judgments/<entity_id>/_cancel", f"{srw}/judgments/{rated}/_cancel",
         expect=409)  # finished: nothing to cancel
    call("POST", f"{srw}/judgments/_compare", f"{srw}/judgments/_compare",
         {"referenceJudgmentId": imported, "candidateJudgmentId": rated})
    estimated = call("POST", f"{srw}/judgments/_estimate", f"{srw}/judgments/_estimate",
                     {**llm_body, "searchConfigurationList": [mine]})
    assert estimated.json["calls"] == 0 and estimated.json["cachedPairs"] > 0  # rated above
    call("POST", f"{srw}/judgments/_estimate", f"{srw}/judgments/_estimate",
         {**llm_body, "searchConfigurationList": [theirs]}, expect=403)
    # experiments and schedules
    experiment_body = {"type": "POINTWISE_EVALUATION", "querySetId": qs, "size": 5,
                       "judgmentList": [imported]}
    experiment = call("PUT", f"{srw}/experiments", f"{srw}/experiments", {
        **experiment_body, "searchConfigurationList": [mine]}).json["experiment_id"]
    call("PUT", f"{srw}/experiments", f"{srw}/experiments",
         {**experiment_body, "searchConfigurationList": [theirs]}, expect=403)
    assert wait_done(me, f"/experiments/{experiment}")["status"] == "COMPLETED"
    call("GET", f"{srw}/experiments", f"{srw}/experiments")
    call("GET", f"{srw}/experiments/<entity_id>", f"{srw}/experiments/{experiment}")
    for method in ("GET", "POST"):
        call(method, f"{srw}/experiments/_search", f"{srw}/experiments/_search")
    call("GET", f"{srw}/experiments/<entity_id>/validate",
         f"{srw}/experiments/{experiment}/validate")
    call("GET", f"{srw}/experiments/<entity_id>/_summary",
         f"{srw}/experiments/{experiment}/_summary")
    call("GET", f"{srw}/experiments/<entity_id>/_report",
         f"{srw}/experiments/{experiment}/_report?format=md")
    sample = call("GET", f"{srw}/experiments/<entity_id>/_label_sample",
                  f"{srw}/experiments/{experiment}/_label_sample?queries=1&seed=1&fields=title")
    assert all("title" in row["fields"] for row in sample.json["rows"])
    # filling its holes: the experiment and the documents are read as the caller, the job
    # runs as its creator
    fill_path = f"{srw}/experiments/{experiment}/_fill"
    estimated = call("POST", f"{srw}/experiments/<entity_id>/_fill/_estimate",
                     f"{fill_path}/_estimate", {"modelId": JUDGE_MODEL})
    assert estimated.json["pool"]["pairs"] >= 1
    filled = call("POST", f"{srw}/experiments/<entity_id>/_fill", fill_path,
                  {"modelId": JUDGE_MODEL}).json["judgment_id"]
    assert wait_done(me, f"/judgments/{filled}")["status"] == "COMPLETED"
    call("POST", f"{srw}/experiments/<entity_id>/_cancel",
         f"{srw}/experiments/{experiment}/_cancel", expect=409)  # finished: nothing to cancel
    call("PATCH", f"{srw}/experiments/<entity_id>", f"{srw}/experiments/{experiment}",
         {"description": f"patched by {user}"})
    call("POST", f"{srw}/experiments/schedule", f"{srw}/experiments/schedule",
         {"experimentId": experiment, "cronExpression": "0 3 * * *"})
    call("GET", f"{srw}/experiments/schedule", f"{srw}/experiments/schedule")
    call("GET", f"{srw}/experiments/schedule/<job_id>",
         f"{srw}/experiments/schedule/{experiment}")
    call("DELETE", f"{srw}/experiments/schedule/<job_id>",
         f"{srw}/experiments/schedule/{experiment}")
    # monitors: the configuration must be searchable by the caller; a run is a job run as the
    # monitor's creator, its documents read as the caller
    monitor_body = {"name": f"mon-{user}-{uuid.uuid4().hex[:6]}", "k": 5, "goldPairs": 0,
                    "queries": {"querySetId": qs}, "judgmentList": [imported],
                    "judge": {"judge": "token_overlap"}}
    watched = call("PUT", f"{srw}/monitors", f"{srw}/monitors",
                   {**monitor_body, "searchConfigurationId": mine}).json["monitor_id"]
    call("PUT", f"{srw}/monitors", f"{srw}/monitors",
         {**monitor_body, "searchConfigurationId": theirs}, expect=403)
    call("PUT", f"{srw}/monitors/<entity_id>", f"{srw}/monitors/{watched}",
         {**monitor_body, "searchConfigurationId": mine, "description": f"by {user}"})
    call("GET", f"{srw}/monitors", f"{srw}/monitors")
    call("GET", f"{srw}/monitors/<entity_id>", f"{srw}/monitors/{watched}")
    for method in ("GET", "POST"):
        call(method, f"{srw}/monitors/_search", f"{srw}/monitors/_search")
    run_id = call("POST", f"{srw}/monitors/<entity_id>/_run",
                  f"{srw}/monitors/{watched}/_run").json["run_id"]
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and call(
            "GET", f"{srw}/monitors/<entity_id>/runs", f"{srw}/monitors/{watched}/runs"
    ).json["runs"][0]["status"] == "PROCESSING":
        time.sleep(0.25)
    monitor_runs = call("GET", f"{srw}/monitors/<entity_id>/runs",
                        f"{srw}/monitors/{watched}/runs").json["runs"]
    assert (monitor_runs[0]["id"], monitor_runs[0]["status"]) == (run_id, "COMPLETED")
    call("GET", f"{srw}/monitors/<entity_id>/_report",
         f"{srw}/monitors/{watched}/_report?format=csv")
    call("DELETE", f"{srw}/monitors/<entity_id>", f"{srw}/monitors/{watched}")
    # on the spot, stats, settings, models, UBI, the document
    evaluate = {"queryText": "apple", "k": 5, "judge": "token_overlap", "referenceAnswer": "apple",
                "searchQuery": {"query": {"match": {"title": "%SearchText%"}}}}
    call("POST", f"{srw}/_evaluate", f"{srw}/_evaluate", {**evaluate, "index": own})
    call("POST", f"{srw}/_evaluate", f"{srw}/_evaluate", {**evaluate, "index": other},
         expect=403)
    node = next(iter(call("GET", f"{srw}/stats", f"{srw}/stats").json["nodes"]))
    call("GET", f"{srw}/stats/<stat>", f"{srw}/stats/experiment_executions")
    call("GET", f"{srw}/<node_id>/stats", f"{srw}/{node}/stats")
    call("GET", f"{srw}/<node_id>/stats/<stat>", f"{srw}/{node}/stats/experiment_executions")
    call("GET", "/_cluster/settings", "/_cluster/settings")
    call("PUT", "/_cluster/settings", "/_cluster/settings",
         {"persistent": {"plugins.search_relevance.stats_enabled": True}})
    for method in ("GET", "POST"):
        call(method, "/_plugins/_ml/models/_search", "/_plugins/_ml/models/_search",
             {"query": {"match_all": {}}})
    # models registered at run time: the models index is read and written as the caller, and
    # _evaluate reads the model as the caller
    model = call("PUT", f"{srw}/models", f"{srw}/models", {
        "id": f"m-{user}-{uuid.uuid4().hex[:6]}", "provider": "openai",
        "endpoint": llm.openai_base_url, "model": "judge-1", "apiKey": LLM_KEY}).json["model_id"]
    posted = call("POST", f"{srw}/models", f"{srw}/models", {
        "provider": "openai", "endpoint": llm.openai_base_url, "model": "judge-1"}
        ).json["model_id"]
    listed = call("GET", f"{srw}/models", f"{srw}/models")
    assert model in [m["id"] for m in listed.json["models"]]
    call("GET", f"{srw}/models/<entity_id>", f"{srw}/models/{model}")
    call("PUT", f"{srw}/models/<entity_id>", f"{srw}/models/{model}", {"name": f"by {user}"})
    judged = call("POST", f"{srw}/_evaluate", f"{srw}/_evaluate", {
        "queryText": "apple", "k": 1, "judge": "llm", "modelId": model,
        "referenceAnswer": uuid.uuid4().hex, "hits": [{"id": "x", "title": "apple"}]})
    assert judged.json["modelId"] == model
    batch = call("POST", f"{srw}/_evaluate/_batch", f"{srw}/_evaluate/_batch", {
        "modelId": model, "queries": [
            {"query": {"inputs": {"text": "apple"}}, "referenceAnswer": uuid.uuid4().hex,
             "hits": [{"id": "x", "text": "apple"}]},
            {**evaluate, "index": own}]})
    assert batch.json["summary"]["queries"] == 2 and batch.json["results"][1]["hits"]
    call("POST", f"{srw}/_evaluate/_batch", f"{srw}/_evaluate/_batch",
         {"queries": [{**evaluate, "index": other}]}, expect=403)
    # a batch above the limit is a job, run as the service identity; its document is read as
    # the caller
    queued = call("POST", f"{srw}/_evaluate/_batch", f"{srw}/_evaluate/_batch",
                  {"queries": [{**evaluate, "index": own}] * (BATCH_LIMIT + 1)}, expect=202)
    call("POST", f"{srw}/_evaluate/_batch", f"{srw}/_evaluate/_batch",
         {"queries": [{**evaluate, "index": other}] * (BATCH_LIMIT + 1)}, expect=403)
    job_path = f"{srw}/_evaluate/_batch/{queued.json['id']}"
    deadline = time.monotonic() + 60
    while call("GET", f"{srw}/_evaluate/_batch/<batch_id>", job_path).json["status"] \
            == "PROCESSING" and time.monotonic() < deadline:
        time.sleep(0.25)
    finished = call("GET", f"{srw}/_evaluate/_batch/<batch_id>", job_path).json
    assert finished["status"] == "COMPLETED", finished
    assert finished["result"]["summary"]["queries"] == BATCH_LIMIT + 1
    call("DELETE", f"{srw}/_evaluate/_batch/<batch_id>", job_path)
    predicted = call("POST", "/_plugins/_ml/models/<model_id>/_predict",
                     f"/_plugins/_ml/models/{model}/_predict",
                     {"parameters": {"messages": [{"role": "user", "content": "say yes"}]}})
    assert isinstance(predicted.json["inference_results"][0]["output"][0]["result"], str)
    call("POST", "/_plugins/ubi/initialize", "/_plugins/ubi/initialize", expect=403)
    # A/B tests: the test index is the workbench's; the searches run as the caller, the
    # impressions are written as the service, the results read as the caller
    ab, second = f"{srw}/ab_tests", config(me, own)
    test_id = f"ab-{user}-{uuid.uuid4().hex[:6]}"
    call("PUT", f"{ab}/<test_id>", f"{ab}/{test_id}",
         {"search_configuration_a": mine, "search_configuration_b": second})
    call("PUT", f"{ab}/<test_id>/_update", f"{ab}/{test_id}/_update", {"enabled": True})
    shown = call("POST", f"{ab}/<test_id>/_search", f"{ab}/{test_id}/_search",
                 {"query_params": {"SearchText": "apple"}, "client_id": user}).json
    assert shown["hits"] and shown["query_id"]
    call("GET", ab, ab)
    for method in ("GET", "POST"):
        call(method, f"{ab}/_search", f"{ab}/_search")
    assert call("GET", f"{ab}/<test_id>", f"{ab}/{test_id}").json["versions"]
    time.sleep(1)  # the impression is written (as the service) into alice's index
    readable = 200 if user == "alice" else 403
    call("GET", f"{ab}/<test_id>/_results", f"{ab}/{test_id}/_results", expect=readable)
    call("GET", f"{ab}/<test_id>/_report", f"{ab}/{test_id}/_report", expect=readable)
    other_test = f"ab-{user}-theirs-{uuid.uuid4().hex[:6]}"
    call("PUT", f"{ab}/<test_id>", f"{ab}/{other_test}",
         {"search_configuration_a": theirs, "search_configuration_b": config(admin, other)})
    call("POST", f"{ab}/<test_id>/_search", f"{ab}/{other_test}/_search",
         {"query_params": {"SearchText": "apple"}}, expect=403)
    for test in (test_id, other_test):
        call("DELETE", f"{ab}/<test_id>", f"{ab}/{test}")
    # remote search configurations: their index is read and written as the caller; this server
    # trusts no remote endpoint (docs/engines.md), so a definition is refused before any probe
    remote, missing = f"{srw}/remote_search_configurations", uuid.uuid4().hex
    definition = {"name": f"remote by {user}", "connectionUrl": "https://127.0.0.1:9250/x/_search",
                  "queryTemplate": '{"query": {"match": {"title": "%SearchText%"}}}'}
    for method in ("PUT", "POST"):
        call(method, remote, remote, definition, expect=400)
    call("GET", remote, remote)
    for method in ("GET", "DELETE"):
        call(method, f"{remote}/<entity_id>", f"{remote}/{missing}", expect=404)
    call("PUT", f"{remote}/<entity_id>", f"{remote}/{missing}", definition, expect=404)
    call("POST", f"{srw}/remote_search/execute", f"{srw}/remote_search/execute",
         {"remoteConfigId": missing, "queryText": "apple"}, expect=404)
    call("GET", f"{srw}/_openapi", f"{srw}/_openapi")
    # deletes
    for model_id in (model, posted):
        call("DELETE", f"{srw}/models/<entity_id>", f"{srw}/models/{model_id}")
    call("DELETE", f"{srw}/experiments/<entity_id>", f"{srw}/experiments/{experiment}")
    for judgment in (imported, rated, filled):
        call("DELETE", f"{srw}/judgments/<entity_id>", f"{srw}/judgments/{judgment}")
    call("DELETE", f"{srw}/search_configurations/<entity_id>",
         f"{srw}/search_configurations/{mine}")
    call("DELETE", f"{srw}/query_sets/<entity_id>", f"{srw}/query_sets/{qs}")
    # the pass-through
    call("GET", "pass-through", f"/{own}/_search")
    call("GET", "pass-through", f"/{other}/_search", expect=403)
    call("POST", "pass-through", f"/{own}/_doc", {"title": "written"}, expect=403)

    # Built with the session's config: building an app points this process's Celery app at its
    # config's queue, and later tests queue jobs in process (the scheduler tests).
    routes = {(method, rule.rule) for rule in create_app(Config.from_env(env)).url_map.iter_rules()
              if rule.endpoint != "proxy.pass_through"
              for method in rule.methods - {"HEAD", "OPTIONS"}}
    assert routes - set(seen) == set(), "routes not exercised as each user"


def test_a_split_job_searches_as_its_creator_on_every_worker(
        sec: SecureCluster, sec_env: dict[str, str]) -> None:
    """carol's hybrid experiment over 40 queries, split in 8 units over two workers:
    the units the helper worker does search as carol too (only red documents in any result),
    though the helper task is not the job that read her name from the experiment."""
    env = dict(sec_env, WORKBENCH_QUEUE=f"test-sec-split-{uuid.uuid4().hex[:8]}",
               WORKBENCH_SPLIT_QUERIES="2")
    server = Server(env, workers=1, wait_cluster=False, front="none")
    workers = [Worker(env, extra=["--concurrency", "1"]) for _ in range(2)]
    try:
        carol = As(server, sec, "carol")
        # 40 queries in 8 units of 5: the parent's two threads take far longer than the
        # helper's Celery hop (with 8 units of one query the parent once did them all before
        # the helper started, on a loaded CI machine)
        texts = [f"{text} {n}" for n in range(5)
                 for text in ("apple", "cherry", "red apple", "red cherry", "blue apple",
                              "blue cherry", "apple cherry", "red")]
        query_set = carol.srw("PUT", "/query_sets", {
            "name": f"qs-{uuid.uuid4().hex[:6]}",
            "querySetQueries": [{"queryText": t} for t in texts]}).json["query_set_id"]
        hybrid = carol.srw("PUT", "/search_configurations", {
            "name": f"hybrid {uuid.uuid4().hex[:6]}", "index": C_INDEX,
            "query": '{"query":{"hybrid":{"queries":[{"match":{"title":"%SearchText%"}},'
                     '{"match":{"team":"%SearchText%"}}]}}}'}).json["search_configuration_id"]
        judgment = carol.srw("PUT", "/judgments", {
            "name": f"carol-{uuid.uuid4().hex[:6]}", "type": "IMPORT_JUDGMENT",
            "judgmentRatings": [{"query": t, "ratings": [{"docId": d, "rating": "1"}
                                                          for d, _, _ in C_DOCS]}
                                for t in texts]}).json["judgment_id"]
        assert wait_done(carol, f"/judgments/{judgment}")["status"] == "COMPLETED"
        before = [w.log() for w in workers]
        created = carol.srw("PUT", "/experiments", {
            "type": "HYBRID_OPTIMIZER", "querySetId": query_set,
            "searchConfigurationList": [hybrid], "judgmentList": [judgment], "size": 10})
        assert created.status == 200, created.data
        experiment_id = created.json["experiment_id"]
        experiment = wait_done(carol, f"/experiments/{experiment_id}", timeout=300)
        assert experiment["status"] == "COMPLETED", experiment
        logs = [w.log()[len(old):] for w, old in zip(workers, before, strict=True)]
    finally:
        for worker in workers:
            worker.stop()
        server.stop()
    assert any(f"experiment {experiment_id} split into 8 units" in text for text in logs), logs
    assert sum(helper_units(text) for text in logs) >= 1, logs
    results = json.loads(cluster_call(sec, "POST", f"/{EVALUATION_INDEX}/_search", {
        "query": {"term": {"experimentId": experiment_id}}, "size": 1000}).data)
    found = {doc_id for hit in results["hits"]["hits"] for doc_id in hit["_source"]["documentIds"]}
    assert results["hits"]["total"]["value"] > 40
    assert found == {"c1", "c2"}  # the workbench's own identity would have found c3, c4 too
