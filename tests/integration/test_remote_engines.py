"""Remote search configurations end to end with the real engines (issue 47): the shipped
catalogue in the local OpenSearch, in the secured demo node (https, basic auth, its demo CA
through WORKBENCH_REMOTE_CA) and in Solr (``scripts/solr.sh``), and the JSON search API
(``scripts/json_search_api.py``) whose answers only a declarative mapping reads.

An API server and two workers of this module's own (one job at a time each, on a queue of
their own) trust the loopback remotes and read a remote's answer for at most
``REMOTE_TIMEOUT`` seconds. Checked:

* one POINTWISE experiment over the 150 ESCI queries and their human judgments with a local
  title match, the same search on the secured node and its Solr analogue: the secured node
  finds exactly what the local cluster finds (the same index body, loaded in the same order,
  so the same BM25 and the same order of equal scores) with the same metrics; Solr's NDCG@10
  of every query is recomputed here from Solr's own answer to the same request and the
  judgment file;
* the generic JSON API through an object ``responseTemplate``: the ids evaluated are the API's
  own answers mapped by hand;
* ``maxRequestsPerSecond`` held across two workers running two experiments at once, read from
  the times the API received the searches;
* per-query failures (a 429 with Retry-After, a 503 every attempt, an answer too slow, an
  answer that does not map) recorded on a COMPLETED experiment, and a remote that went down
  ending the run ERROR;
* the secured node's passwords in no answer, stored document or log line of any of it.

The indices hold the whole catalogue and are kept between runs (``load_demo`` leaves a complete
one as it is), so only the first run pays for loading them.
"""

from __future__ import annotations

import base64
import copy
import json
import os
import re
import sys
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
import redis
import urllib3
from cryptography.fernet import Fernet
from opensearchpy import OpenSearch

from tests.integration.test_esci_end_to_end import reference_ndcg
from tests.integration.test_experiments import by_experiment
from tests.support import services
from tests.support.api import Api, Reply, search_configuration
from tests.support.processes import REPO, Proc, Server, Worker, free_port
from tests.support.secure_cluster import READ_ACTIONS, SecureCluster
from tests.support.waiting import finished, poll
from workbench.config import Config
from workbench.demo.load import (
    JUDGMENTS,
    PRODUCTS,
    QUERY_SET,
    load_demo,
    read_json,
    shipped_catalogue_size,
)
from workbench.redis_keys import remote_cache_pattern
from workbench.remote.client import ATTEMPTS
from workbench.store.bootstrap import load_spec
from workbench.store.client import make_client
from workbench.store.indices import (
    EVALUATION_INDEX,
    EXPERIMENT_INDEX,
    REMOTE_CONFIG_INDEX,
    VARIANT_INDEX,
)

EVALUATIONS, VARIANTS = EVALUATION_INDEX, VARIANT_INDEX
K = 10
#: the catalogue's index on the local cluster and on the secured node (kept between runs)
LOCAL_INDEX = "test-remote-engines-products"
SECURE_INDEX = "wb-remote-engines-products"
#: a role and users of this module's own on the secured node: reading SECURE_INDEX only
READER_ROLE = "remote_engines_reader"
READER = "remote-engines-reader"
ROTATED = "remote-engines-rotated"
ROTATED_LATER = "Rotated-Later-pw-83!"
TITLE_MATCH = {"query": {"match": {"title": "%SearchText%"}}}
#: Solr's analogue of TITLE_MATCH: the words OR-ed (edismax's mm is 0% with q.op OR) in title
SOLR_PARAMS = {"defType": "edismax", "qf": "title", "fl": "id,score,title"}
SOLR_TEMPLATE = "q=%SearchText%&" + "&".join(f"{k}={v}" for k, v in SOLR_PARAMS.items())
JSON_TEMPLATE = "q=%SearchText%&limit=${size}"
JSON_MAPPING = {"hits": "$.results", "id": "$.sku", "score": "$.relevance",
                "fields": {"title": "$.product.title", "brand": "$.product.brand"}}
SECRET_KEY = Fernet.generate_key().decode()
REMOTE_TIMEOUT = 2
RATE = 20
WORDS = re.compile(r"[^\W_]+")
#: how Solr parses a query of SOLR_PARAMS when it is TITLE_MATCH's analogue: one optional
#: clause per word, each a term of title ("+" requires one of them to match)
_TERM = r"DisjunctionMaxQuery\(\(title:[^\s()]+\)\)"
TITLE_TERMS = re.compile(rf"\+(?:{_TERM}|\({_TERM}(?: {_TERM})*\))")

http = urllib3.PoolManager(retries=False, timeout=60)


class RecordingApi(Api):
    """An ``Api`` that keeps every answer, for the password checks at the end."""

    def __init__(self, base: str) -> None:
        super().__init__(base)
        self.replies: list[Reply] = []

    def call(self, *args: Any, **kwargs: Any) -> Reply:
        reply = super().call(*args, **kwargs)
        self.replies.append(reply)
        return reply


# -- the engines ----------------------------------------------------------------------------------

def index_body(config: Config) -> dict[str, Any]:
    """The demo index's spec without its analysis: the secured node, a build without the
    analysis-common module, knows no ``stemmer`` filter, so both clusters analyse with the
    standard analyzer. One shard, and no refresh until the load is done: one segment whose
    documents are in load order, so that equal scores rank alike on both."""
    body = copy.deepcopy(load_spec(config.index_mappings_dir, "demo/ecommerce.json").body)
    body["settings"]["index"].pop("analysis", None)
    body["settings"].pop("analysis", None)
    body["settings"]["index"]["refresh_interval"] = "-1"
    for field in body["mappings"]["properties"].values():
        field.pop("analyzer", None)
    return body


def load_catalogue(config: Config, index: str) -> None:
    """The shipped catalogue in ``index`` (``index_body``) through ``load_demo``; an incomplete
    index is first deleted, so that no replaced document is left in BM25's statistics."""
    client = make_client(config)
    if client.indices.exists(index=index):
        if int(client.count(index=index)["count"]) == shipped_catalogue_size():
            return
        client.indices.delete(index=index)
    client.indices.create(index=index, body=index_body(config))
    assert load_demo(config, str(PRODUCTS), index, None) == {index: shipped_catalogue_size()}
    client.indices.put_settings(index=index, body={"index": {"refresh_interval": None}})


def secure_config(cluster: SecureCluster) -> Config:
    """The secured node as its admin sees it (to load the catalogue there)."""
    env = {"OPENSEARCH_URL": cluster.url, "OPENSEARCH_USERNAME": cluster.admin.username,
           "OPENSEARCH_PASSWORD": cluster.admin.password,
           "OPENSEARCH_VERIFY_CERTS": "true" if cluster.verify_certs else "false"}
    if cluster.ca_certs:
        env["OPENSEARCH_CA_CERTS"] = cluster.ca_certs
    return Config.from_env(env)


def admin_call(cluster: SecureCluster, method: str, path: str, body: Any) -> None:
    reply = cluster.request(method, path, body)
    assert reply.status < 300, reply.data[:500]


@pytest.fixture(scope="module")
def secured(secure_cluster: SecureCluster) -> SecureCluster:
    """The secured node with the catalogue in SECURE_INDEX, which READER and ROTATED (their
    passwords as ``secure_cluster.password`` gives them) may read."""
    load_catalogue(secure_config(secure_cluster), SECURE_INDEX)
    api = "/_plugins/_security/api"
    admin_call(secure_cluster, "PUT", f"{api}/roles/{READER_ROLE}", {"index_permissions": [
        {"index_patterns": [SECURE_INDEX], "allowed_actions": READ_ACTIONS}]})
    for user in (READER, ROTATED):
        admin_call(secure_cluster, "PUT", f"{api}/internalusers/{user}",
                   {"password": secure_cluster.password(user)})
    admin_call(secure_cluster, "PUT", f"{api}/rolesmapping/{READER_ROLE}",
               {"users": [READER, ROTATED]})
    return secure_cluster


@pytest.fixture(scope="module")
def solr() -> str:
    return services.solr_url()


def parsed_by_solr(solr: str, text: str) -> str:
    reply = http.request("GET", f"{solr}/products/select", fields={
        "q": text, **SOLR_PARAMS, "rows": "0", "wt": "json", "debugQuery": "true"})
    assert reply.status == 200, reply.data
    return str(json.loads(reply.data)["debug"]["parsedquery"])


@pytest.fixture(scope="module")
def json_api() -> str:
    """The shared JSON search API (only searched here: its knobs are left alone)."""
    return services.json_search_api_url()


class JsonApi:
    """A JSON search API of the module's own (its faults and request log are the tests')."""

    def __init__(self) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.proc = Proc([sys.executable, str(REPO / "scripts" / "json_search_api.py"),
                          "--port", str(self.port)], dict(os.environ), "json-search-api")

        def up() -> bool | None:
            assert self.proc.alive(), self.proc.log()
            try:
                return http.request("GET", f"{self.url}/", timeout=2).status == 200 or None
            except urllib3.exceptions.HTTPError:
                return None

        poll(up, 60, 0.2, "the JSON search API of the test did not answer")

    def fault(self, **fault: Any) -> None:
        reply = http.request("POST", f"{self.url}/_faults", body=json.dumps(fault))
        assert reply.status == 200, reply.data

    def requests(self) -> dict[str, Any]:
        return dict(json.loads(http.request("GET", f"{self.url}/_requests").data))

    def reset(self) -> None:
        assert http.request("DELETE", f"{self.url}/_faults").status == 200
        assert http.request("DELETE", f"{self.url}/_requests").status == 200

    def stop(self) -> None:
        self.proc.stop()


@pytest.fixture(scope="module")
def own_api() -> Iterator[JsonApi]:
    api = JsonApi()
    try:
        yield api
    finally:
        api.stop()


def json_search(url: str, text: str, size: int = K) -> list[str]:
    """The API's own answer, mapped by hand: the skus in its order."""
    reply = http.request("GET", f"{url}/search", fields={"q": text, "limit": str(size)})
    assert reply.status == 200, reply.data
    return [result["sku"] for result in json.loads(reply.data)["results"]]


# -- the workbench --------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def stack(env: dict[str, str], secured: SecureCluster) -> Iterator[dict[str, Any]]:
    """An API server and two workers on a queue of their own, one job at a time each, never
    splitting a run (so two runs at once are on two processes)."""
    own = dict(env, WORKBENCH_QUEUE=f"test-remote-engines-{uuid.uuid4().hex[:8]}",
               WORKBENCH_SECRET_KEY=SECRET_KEY,
               WORKBENCH_REMOTE_ENDPOINTS=json.dumps([r"^https?://127\.0\.0\.1:.*"]),
               WORKBENCH_REMOTE_PRIVATE_ENDPOINTS="true",
               WORKBENCH_REMOTE_CA=secured.ca_certs or "",
               WORKBENCH_REMOTE_TIMEOUT=str(REMOTE_TIMEOUT),
               WORKBENCH_WORKER_CONCURRENCY="1", WORKBENCH_SPLIT_QUERIES="0")
    server = Server(own, workers=2)
    workers: list[Worker] = []
    try:
        workers.extend(Worker(own) for _ in range(2))
        yield {"api": RecordingApi(server.url), "server": server, "workers": workers}
    finally:
        for worker in workers:
            worker.stop()
        server.stop()


@pytest.fixture(scope="module")
def wb(stack: dict[str, Any]) -> RecordingApi:
    api: RecordingApi = stack["api"]
    return api


@pytest.fixture(scope="module")
def esci(wb: RecordingApi, env: dict[str, str]) -> dict[str, Any]:
    """The catalogue in the local cluster; the ESCI query set and human judgments."""
    load_catalogue(Config.from_env(env), LOCAL_INDEX)
    query_set_body = read_json(QUERY_SET)
    reply = wb.srw("PUT", "/query_sets", query_set_body)
    assert reply.status == 200, reply.data
    judgment_body = read_json(JUDGMENTS)
    judgment = wb.srw("PUT", "/judgments", judgment_body)
    assert judgment.status == 200, judgment.data
    judgment_id = judgment.json["judgment_id"]
    assert finished(wb, f"/judgments/{judgment_id}", 300)["status"] == "COMPLETED"
    return {"querySetId": reply.json["query_set_id"], "judgment": judgment_id,
            "queries": [q["queryText"] for q in query_set_body["querySetQueries"]],
            "ratings": {row["query"]: {r["docId"]: float(r["rating"]) for r in row["ratings"]}
                        for row in judgment_body["judgmentRatings"]}}


def remote(api: Api, url: str, template: Any, **extra: Any) -> str:
    reply = api.srw("PUT", "/remote_search_configurations", {
        "name": f"remote-engines-{uuid.uuid4().hex[:6]}", "connectionUrl": url,
        "queryTemplate": template, **extra})
    assert reply.status == 200, reply.data
    return str(reply.json["remote_search_configuration_id"])


def query_set(api: Api, texts: list[str]) -> str:
    reply = api.srw("PUT", "/query_sets", {"name": f"remote-engines-{uuid.uuid4().hex[:6]}",
                                           "querySetQueries": [{"queryText": t} for t in texts]})
    assert reply.status == 200, reply.data
    return str(reply.json["query_set_id"])


def start(api: Api, query_set_id: str, configs: list[Any], judgment: str) -> str:
    reply = api.srw("PUT", "/experiments", {
        "type": "POINTWISE_EVALUATION", "querySetId": query_set_id,
        "searchConfigurationList": configs, "judgmentList": [judgment], "size": K})
    assert reply.status == 200, reply.data
    return str(reply.json["experiment_id"])


def run(api: Api, query_set_id: str, configs: list[Any], judgment: str) -> dict[str, Any]:
    return finished(api, f"/experiments/{start(api, query_set_id, configs, judgment)}", 300)



def exact(evaluation: dict[str, Any], name: str) -> float:
    return float({m["metric"]: m["value"] for m in evaluation["exactMetrics"]}[name])


# -- 1. three engines, one experiment -------------------------------------------------------------

@pytest.fixture(scope="module")
def three(wb: RecordingApi, esci: dict[str, Any], secured: SecureCluster,
          solr: str) -> dict[str, Any]:
    """The POINTWISE experiment over the 150 ESCI queries of the local title match, the same
    search on the secured node (as READER) and its Solr analogue."""
    local = search_configuration(wb, f"remote-engines local {uuid.uuid4().hex[:6]}",
                                 LOCAL_INDEX, json.dumps(TITLE_MATCH))
    node = remote(wb, f"{secured.url}/{SECURE_INDEX}/_search", TITLE_MATCH,
                  username=READER, password=secured.password(READER),
                  maxRequestsPerSecond=200)
    on_solr = remote(wb, f"{solr}/products/select", SOLR_TEMPLATE, responseTemplate="solr",
                     maxRequestsPerSecond=200)
    done = run(wb, esci["querySetId"], [local, node, {"type": "remote", "id": on_solr}],
               esci["judgment"])
    return {"local": local, "node": node, "solr": on_solr, "done": done}


def test_local_secured_node_and_solr_in_one_experiment(
        three: dict[str, Any], esci: dict[str, Any], solr: str, direct: OpenSearch) -> None:
    local, node, on_solr, done = three["local"], three["node"], three["solr"], three["done"]
    assert done["status"] == "COMPLETED", str(done)[:2000]
    assert done["searchConfigurationList"] == [local, node, on_solr]
    assert done["remoteSearchConfigurationIds"] == [node, on_solr]
    assert (done["remoteSearchFailures"], done["remoteSearchFailureCount"]) == ([], 0)

    evaluations: dict[str, dict[str, dict[str, Any]]] = {local: {}, node: {}, on_solr: {}}
    for evaluation in by_experiment(direct, EVALUATIONS, done["id"]):
        evaluations[evaluation["searchConfigurationId"]][evaluation["searchText"]] = evaluation
    assert len(by_experiment(direct, VARIANTS, done["id"])) == 3 * 150

    # the secured node answers every query as the local cluster does
    assert set(evaluations[local]) == set(evaluations[node])
    assert len(evaluations[local]) >= 140  # nearly every query finds something
    for text, mine in evaluations[local].items():
        theirs = evaluations[node][text]
        assert theirs["documentIds"] == mine["documentIds"], text
        for key in ("metrics", "exactMetrics", "condensedMetrics", "judgmentIds"):
            assert theirs[key] == mine[key], (text, key)

    # Solr: every query's NDCG@10 from Solr's own answer to the same request, by hand
    means = {"local": 0.0, "secured": 0.0, "solr": 0.0}
    for text in esci["queries"]:
        reply = http.request("GET", f"{solr}/products/select",
                             fields={"q": text, **SOLR_PARAMS, "rows": str(K), "wt": "json"})
        assert reply.status == 200, reply.data
        docs = json.loads(reply.data)["response"]["docs"]
        ids = [str(doc["id"]) for doc in docs]
        # the title match: Solr ORs the words in title, nothing else; every title found holds
        # one of the query's words
        assert TITLE_TERMS.fullmatch(parsed_by_solr(solr, text)), text
        words = set(WORDS.findall(text.lower()))
        assert all(words & set(WORDS.findall(doc["title"].lower())) for doc in docs), text
        expected = reference_ndcg(ids, esci["ratings"].get(text, {}), K)
        means["solr"] += expected / len(esci["queries"])
        if not ids:
            assert text not in evaluations[on_solr], text
            continue
        evaluation = evaluations[on_solr][text]
        assert evaluation["documentIds"] == ids, text
        assert exact(evaluation, f"NDCG@{K}") == pytest.approx(expected, rel=1e-9, abs=1e-12)
        rounded = {m["metric"]: m["value"] for m in evaluation["metrics"]}[f"NDCG@{K}"]
        assert rounded == pytest.approx(expected, abs=0.005), text
        for name, config_id in (("local", local), ("secured", node)):
            if text in evaluations[config_id]:
                means[name] += exact(evaluations[config_id][text], f"NDCG@{K}") / \
                    len(esci["queries"])
    assert len(evaluations[on_solr]) >= 140
    assert means["local"] == pytest.approx(means["secured"], abs=1e-12)
    print(f"\nmean NDCG@{K} over {len(esci['queries'])} ESCI queries: "
          + ", ".join(f"{name} {value:.4f}" for name, value in means.items()))


# -- 2. the generic JSON API ----------------------------------------------------------------------

def test_a_json_api_mapped_by_an_object_response_template(
        wb: RecordingApi, esci: dict[str, Any], json_api: str, direct: OpenSearch) -> None:
    config_id = remote(wb, f"{json_api}/search", JSON_TEMPLATE, responseTemplate=JSON_MAPPING)
    texts = esci["queries"][:20]
    done = run(wb, query_set(wb, texts), [config_id], esci["judgment"])
    assert done["status"] == "COMPLETED", str(done)[:2000]
    assert done["remoteSearchFailureCount"] == 0
    evaluations = {e["searchText"]: e for e in by_experiment(direct, EVALUATIONS, done["id"])}
    for text in texts:
        skus = json_search(json_api, text)
        if not skus:
            assert text not in evaluations, text
            continue
        assert evaluations[text]["documentIds"] == skus, text
        expected = reference_ndcg(skus, esci["ratings"].get(text, {}), K)
        assert exact(evaluations[text], f"NDCG@{K}") == pytest.approx(expected, rel=1e-9,
                                                                      abs=1e-12)
    assert len(evaluations) >= 15

    # the mapped hit: the sku, the relevance, and the two fields named
    reply = wb.srw("POST", "/remote_search/execute",
                   {"remoteConfigId": config_id, "queryText": "kindle", "size": 3})
    assert reply.status == 200, reply.data
    answer = json.loads(http.request("GET", f"{json_api}/search",
                                     fields={"q": "kindle", "limit": "3"}).data)
    assert reply.json["hits"]["hits"] == [
        {"_id": r["sku"], "_score": r["relevance"],
         "_source": {k: r["product"][k] for k in ("title", "brand") if k in r["product"]}}
        for r in answer["results"]]


# -- 3. the rate limit across two workers ---------------------------------------------------------

def test_the_rate_limit_holds_across_two_workers(
        wb: RecordingApi, esci: dict[str, Any], own_api: JsonApi) -> None:
    config_id = remote(wb, f"{own_api.url}/search", JSON_TEMPLATE, responseTemplate=JSON_MAPPING,
                       maxRequestsPerSecond=RATE, cacheDurationMinutes=0)
    first = esci["queries"][:105]
    second = [f"{text} deluxe" for text in first]
    assert not set(first) & set(second)
    sets = query_set(wb, first), query_set(wb, second)
    own_api.reset()
    started = [start(wb, sets[0], [config_id], esci["judgment"]),
               start(wb, sets[1], [config_id], esci["judgment"])]
    done = [finished(wb, f"/experiments/{e}", 300) for e in started]
    for experiment in done:
        assert experiment["status"] == "COMPLETED", str(experiment)[:2000]
        assert experiment["remoteSearchFailureCount"] == 0
    log = own_api.requests()
    assert log["count"] == len(first) + len(second)
    assert sorted(log["queries"]) == sorted(first + second)  # each searched once

    times = sorted(log["times"])
    rate = (len(times) - 1) / (times[-1] - times[0])
    print(f"\n{len(times)} searches of two workers in {times[-1] - times[0]:.2f}s: "
          f"{rate:.2f} per second (limit {RATE})")
    assert times[-1] - times[0] >= 10
    assert RATE / 2 < rate <= RATE * 1.05
    # the two runs searched at the same time: each worker runs one job at a time, so two
    # processes shared the limit
    spans = [[t for t, q in zip(log["times"], log["queries"], strict=True) if q in set(texts)]
             for texts in (first, second)]
    overlap = min(max(s) for s in spans) - max(min(s) for s in spans)
    assert overlap > 0.5 * min(max(s) - min(s) for s in spans), spans


# -- 4. failures ----------------------------------------------------------------------------------

FIRST, SECOND = "kindle", "lamp"


@pytest.fixture
def faulty(wb: RecordingApi, own_api: JsonApi) -> Iterator[tuple[str, str]]:
    """A configuration on the module's own JSON API that searches one query at a time (so the
    first query meets the fault), nothing cached; and a query set [FIRST, SECOND]."""
    config_id = remote(wb, f"{own_api.url}/search", JSON_TEMPLATE, responseTemplate=JSON_MAPPING,
                       maxConcurrentRequests=1, cacheDurationMinutes=0)
    own_api.reset()
    yield config_id, query_set(wb, [FIRST, SECOND])
    own_api.reset()


def url_of(own_api: JsonApi, text: str) -> str:
    return f"GET {own_api.url}/search?q={text}&limit={K}"


def checked_failure(done: dict[str, Any], config_id: str, direct: OpenSearch,
                    own_api: JsonApi) -> str:
    """The run completed with FIRST failed and SECOND evaluated; FIRST's reason."""
    assert done["status"] == "COMPLETED", str(done)[:2000]
    assert done["remoteSearchFailureCount"] == 1
    (failure,) = done["remoteSearchFailures"]
    assert (failure["searchConfigurationId"], failure["queryText"]) == (config_id, FIRST)
    evaluations = by_experiment(direct, EVALUATIONS, done["id"])
    assert [(e["searchText"], e["documentIds"]) for e in evaluations] == [
        (SECOND, json_search(own_api.url, SECOND))]
    return str(failure["reason"])


def test_a_429_with_retry_after_is_waited_for(wb: RecordingApi, esci: dict[str, Any],
                                              own_api: JsonApi, faulty: tuple[str, str],
                                              direct: OpenSearch) -> None:
    config_id, texts = faulty
    own_api.fault(status=429, retryAfter=1)
    done = run(wb, texts, [config_id], esci["judgment"])
    assert done["status"] == "COMPLETED", str(done)[:2000]
    assert (done["remoteSearchFailures"], done["remoteSearchFailureCount"]) == ([], 0)
    log = own_api.requests()
    assert log["queries"] == [FIRST, FIRST, SECOND]
    assert log["times"][1] - log["times"][0] >= 1.0  # the Retry-After, then the attempt
    evaluations = {e["searchText"]: e["documentIds"]
                   for e in by_experiment(direct, EVALUATIONS, done["id"])}
    assert evaluations == {text: json_search(own_api.url, text) for text in (FIRST, SECOND)}


def test_a_503_every_attempt_fails_the_query_only(wb: RecordingApi, esci: dict[str, Any],
                                                  own_api: JsonApi, faulty: tuple[str, str],
                                                  direct: OpenSearch) -> None:
    config_id, texts = faulty
    own_api.fault(status=503, body='{"error": "overloaded"}', count=ATTEMPTS)
    done = run(wb, texts, [config_id], esci["judgment"])
    assert own_api.requests()["queries"] == [FIRST] * ATTEMPTS + [SECOND]
    assert checked_failure(done, config_id, direct, own_api) == (
        f"remote search configuration [{config_id}]: HTTP 503 from {url_of(own_api, FIRST)}: "
        '{"error": "overloaded"}')


def test_an_answer_slower_than_the_timeout_fails_the_query(
        wb: RecordingApi, esci: dict[str, Any], own_api: JsonApi, faulty: tuple[str, str],
        direct: OpenSearch) -> None:
    config_id, texts = faulty
    own_api.fault(delayMs=(REMOTE_TIMEOUT + 2) * 1000, count=ATTEMPTS)
    done = run(wb, texts, [config_id], esci["judgment"])
    assert own_api.requests()["queries"] == [FIRST] * ATTEMPTS + [SECOND]
    assert checked_failure(done, config_id, direct, own_api) == (
        f"remote search configuration [{config_id}]: no answer from "
        f"{url_of(own_api, FIRST)} within {REMOTE_TIMEOUT}s")


def test_an_answer_that_does_not_map_fails_the_query(
        wb: RecordingApi, esci: dict[str, Any], own_api: JsonApi, faulty: tuple[str, str],
        direct: OpenSearch) -> None:
    config_id, texts = faulty
    own_api.fault(status=200, body='{"items": []}')
    done = run(wb, texts, [config_id], esci["judgment"])
    assert own_api.requests()["queries"] == [FIRST, SECOND]  # not tried again
    assert checked_failure(done, config_id, direct, own_api) == (
        f"remote search configuration [{config_id}]: the answer does not map: the hits path "
        "[$.results] matches nothing in the answer")


def test_a_remote_that_went_down_ends_the_run_error(wb: RecordingApi,
                                                    esci: dict[str, Any]) -> None:
    gone = JsonApi()
    try:
        config_id = remote(wb, f"{gone.url}/search", JSON_TEMPLATE,
                           responseTemplate=JSON_MAPPING, cacheDurationMinutes=0)
    finally:
        gone.stop()
    done = run(wb, query_set(wb, [FIRST, SECOND]), [config_id], esci["judgment"])
    assert done["status"] == "ERROR"
    (error,) = done["results"]
    assert error["error"] == (
        f"every search with remote search configuration [{config_id}] failed: "
        f"remote search configuration [{config_id}]: could not reach "
        f"{url_of(gone, FIRST)}: the connection was refused or not made")
    assert done["remoteSearchFailureCount"] == 2
    assert [f["queryText"] for f in done["remoteSearchFailures"]] == [FIRST, SECOND]


# -- 5. the passwords -----------------------------------------------------------------------------

def test_a_refused_password_in_no_answer_document_or_log(
        wb: RecordingApi, stack: dict[str, Any], esci: dict[str, Any], secured: SecureCluster,
        three: dict[str, Any], direct: OpenSearch, redis_url: str) -> None:
    url = f"{secured.url}/{SECURE_INDEX}/_search"
    wrong = "Not-The-Password-52!"
    refused = wb.srw("PUT", "/remote_search_configurations", {
        "name": "wrong password", "connectionUrl": url, "username": READER, "password": wrong,
        "queryTemplate": TITLE_MATCH})
    assert refused.status == 400
    assert refused.reason.startswith(
        "connectionUrl: the probe search (the text [sample query], size 1) failed: HTTP 401 "
        f"from POST {url}: "), refused.reason

    # a password the node stops taking after the configuration was stored
    rotated = remote(wb, url, TITLE_MATCH, username=ROTATED,
                     password=secured.password(ROTATED), cacheDurationMinutes=0)
    admin_call(secured, "PUT", f"/_plugins/_security/api/internalusers/{ROTATED}",
               {"password": ROTATED_LATER})
    try:
        done = run(wb, query_set(wb, esci["queries"][:3]), [rotated], esci["judgment"])
    finally:
        admin_call(secured, "PUT", f"/_plugins/_security/api/internalusers/{ROTATED}",
                   {"password": secured.password(ROTATED)})
    assert done["status"] == "ERROR"
    prefix = (f"every search with remote search configuration [{rotated}] failed: "
              f"remote search configuration [{rotated}]: HTTP 401 from POST {url}: ")
    assert done["results"][0]["error"].startswith(prefix), done["results"]
    assert done["remoteSearchFailureCount"] == 3

    # across the module: every answer, every stored document, every cached answer, every log
    secrets = [secured.password(READER), secured.password(ROTATED), ROTATED_LATER, wrong]
    secrets += [base64.b64encode(f"{user}:{password}".encode()).decode()
                for user, password in ((READER, secured.password(READER)),
                                       (ROTATED, secured.password(ROTATED)),
                                       (READER, wrong))]
    configs = [three["node"], rotated]
    stored = [direct.get(index=REMOTE_CONFIG_INDEX, id=c)["_source"] for c in configs]
    assert all(s["passwordSet"] is True and s["passwordEncrypted"] for s in stored)
    documents = [*stored]
    for experiment_id in (three["done"]["id"], done["id"]):
        documents.append(direct.get(index=EXPERIMENT_INDEX, id=experiment_id)["_source"])
        documents.extend(by_experiment(direct, EVALUATIONS, experiment_id))
        documents.extend(by_experiment(direct, VARIANTS, experiment_id))
    cache = redis.Redis.from_url(redis_url, decode_responses=True)
    cached = [str(cache.get(key)) for c in configs
              for key in cache.scan_iter(match=remote_cache_pattern(c))]
    assert cached  # the three-engine run's answers were cached
    texts = {
        "answers": b"\n".join(r.data for r in wb.replies).decode("utf-8", "replace"),
        "documents": json.dumps(documents, ensure_ascii=False),
        "cache": "\n".join(cached),
        "server log": stack["server"].log(),
        **{f"worker {n} log": w.log() for n, w in enumerate(stack["workers"])},
    }
    assert refused.data in [r.data for r in wb.replies]
    for where, text in texts.items():
        for secret in secrets:
            assert secret not in text, where
