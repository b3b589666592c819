"""Remote search configurations wherever a search configuration is (issue 47): experiments and
judgments over a remote that is the real local cluster reached by HTTP, so that a remote and a
local configuration running the same query on the same index must find the same documents.

A worker and an API server of this module's own trust loopback remotes
(``WORKBENCH_REMOTE_ENDPOINTS``, ``WORKBENCH_REMOTE_PRIVATE_ENDPOINTS``). Checked: a POINTWISE
experiment mixing local and remote (identical documents and metrics per query), a PAIRWISE
one local vs remote, an LLM and a reference judgment over remote results (the remote's ids,
the mapped fields in the prompt), per-query remote failures recorded on the experiment, every
search failing (a deleted index, a remote that stopped answering) ending ERROR, and the 400s of
what stays local only (HYBRID_OPTIMIZER, expandCoverage, A/B tests)."""

from __future__ import annotations

import json
import threading
import uuid
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from opensearchpy import OpenSearch

from tests.conftest import JUDGE_MODEL
from tests.integration.test_experiments import by_experiment
from tests.support.api import Api, search_configuration
from tests.support.processes import TRUST_LOOPBACK, free_port, loopback_node, own_stack
from tests.support.waiting import finished
from workbench.bench import llm_server as fake
from workbench.bench.llm_server import LLMServer

EVALUATIONS = "search-relevance-evaluation-result"
VARIANTS = "search-relevance-experiment-variant"

# (id, title, rank, sku): rank decides the order of equal matches, so result lists are exact;
# sku is the id a mapped remote answers instead of the cluster's _id
DOCS = [
    ("b", "worked red shoes", 1, "SKU-B"),
    ("a", "worked red shoes for trail", 2, "SKU-A"),
    ("y", "worked blue shoes", 3, "SKU-Y"),
    ("c", "green hat", 4, "SKU-C"),
    ("x", "yellow sock red", 5, "SKU-X"),
]
QUERIES = ["worked", "nothing matches this", "red", "shoes"]
TEMPLATE = '{"query":{"match":{"title":"%SearchText%"}},"sort":[{"rank":"asc"}]}'
RATINGS = {"worked": {"a": "3", "b": "1", "c": "0", "x": "2"},
           "red": {"b": "2", "x": "1", "y": "0"}}


@pytest.fixture(scope="module")
def node(opensearch_url: str) -> str:
    return loopback_node(opensearch_url)


@pytest.fixture(scope="module")
def stack(env: dict[str, str]) -> Iterator[Api]:
    """An API server and a worker of their own that trust the loopback remotes (the local
    cluster, and the stand-in the tests start)."""
    with own_stack(env, "test-remote", **TRUST_LOOPBACK) as api:
        yield api


@pytest.fixture(scope="module")
def world(stack: Api, direct: OpenSearch, node: str) -> Iterator[dict[str, Any]]:
    api = stack
    index = f"test-remote-exp-{uuid.uuid4().hex[:6]}"
    direct.indices.create(index=index, body={"mappings": {"properties": {
        "title": {"type": "text"}, "rank": {"type": "integer"}, "sku": {"type": "keyword"}}}})
    for doc_id, title, rank, sku in DOCS:
        direct.index(index=index, id=doc_id, body={"title": title, "rank": rank, "sku": sku})
    direct.indices.refresh(index=index)
    url = f"{node}/{index}/_search"
    local = search_configuration(api, f"local-{uuid.uuid4().hex[:6]}", index, TEMPLATE)
    remote = remote_configuration(api, url, TEMPLATE)
    query_set = api.srw("PUT", "/query_sets", {"name": "remote set", "querySetQueries": [
        {"queryText": q} for q in QUERIES]}).json["query_set_id"]
    judgment = api.srw("PUT", "/judgments", {
        "name": "remote ratings", "type": "IMPORT_JUDGMENT", "judgmentRatings": [
            {"query": q, "ratings": [{"docId": d, "rating": r} for d, r in ratings.items()]}
            for q, ratings in RATINGS.items()]}).json["judgment_id"]
    finished(api, f"/judgments/{judgment}", 120)
    yield {"index": index, "url": url, "local": local, "remote": remote,
           "querySetId": query_set, "judgment": judgment}
    direct.indices.delete(index=index, ignore=[404])


def remote_configuration(api: Api, url: str, template: str, **extra: Any) -> str:
    body = {"name": f"remote-{uuid.uuid4().hex[:6]}", "connectionUrl": url,
            "queryTemplate": template, **extra}
    reply = api.srw("PUT", "/remote_search_configurations", body)
    assert reply.status == 200, reply.data
    return str(reply.json["remote_search_configuration_id"])


def experiment(api: Api, body: dict[str, Any]) -> dict[str, Any]:
    reply = api.srw("PUT", "/experiments", body)
    assert reply.status == 200, reply.data
    return finished(api, f"/experiments/{reply.json['experiment_id']}", 120)



def direct_ids(direct: OpenSearch, index: str, text: str, size: int) -> list[str]:
    body = {**json.loads(TEMPLATE.replace("%SearchText%", text)), "size": size}
    return [h["_id"] for h in direct.search(index=index, body=body)["hits"]["hits"]]


def pointwise(world: dict[str, Any], configs: list[Any], size: int = 3) -> dict[str, Any]:
    return {"type": "POINTWISE_EVALUATION", "querySetId": world["querySetId"],
            "searchConfigurationList": configs, "judgmentList": [world["judgment"]],
            "size": size}


# -- experiments ---------------------------------------------------------------------------------

def test_pointwise_mixing_local_and_remote_finds_the_same(
        stack: Api, world: dict[str, Any], direct: OpenSearch) -> None:
    local, remote = world["local"], world["remote"]
    done = experiment(stack, pointwise(world, [local, {"type": "remote", "id": remote}]))
    assert done["status"] == "COMPLETED", done["results"]
    assert done["searchConfigurationList"] == [local, remote]
    assert done["remoteSearchConfigurationIds"] == [remote]
    assert (done["remoteSearchFailures"], done["remoteSearchFailureCount"]) == ([], 0)
    results = done["results"]
    # query order, then configuration order; no hits: no evaluation (as for a local one)
    assert [(r["queryText"], r.get("searchConfigurationId")) for r in results] == [
        ("worked", local), ("worked", remote), ("nothing matches this", None),
        ("nothing matches this", None), ("red", local), ("red", remote),
        ("shoes", local), ("shoes", remote)]

    evaluations = {(e["searchText"], e["searchConfigurationId"]): e
                   for e in by_experiment(direct, EVALUATIONS, done["id"])}
    assert len(evaluations) == 6
    for text in ("worked", "red", "shoes"):
        mine, theirs = evaluations[text, local], evaluations[text, remote]
        assert mine["documentIds"] == theirs["documentIds"] == direct_ids(
            direct, world["index"], text, 3)
        for key in ("metrics", "exactMetrics", "condensedMetrics", "judgmentIds"):
            assert mine[key] == theirs[key], (text, key)
        assert "took" in mine and "took" not in theirs  # a remote has no engine's took
    # docs/algorithms.md's worked example: J = {a: 3, b: 1, c: 0, x: 2}, docIds [b, a, y]
    assert evaluations["worked", remote]["documentIds"] == ["b", "a", "y"]
    assert {m["metric"]: m["value"] for m in evaluations["worked", remote]["metrics"]}[
        "Precision@3"] == 0.33

    variants = by_experiment(direct, VARIANTS, done["id"])
    assert sorted(v["parameters"]["searchConfigId"] for v in variants) == sorted(
        [local, remote] * 4)
    empty = [v["results"] for v in variants if v["parameters"]["searchConfigId"] == remote
             and v["results"]["evaluationResultId"] is None]
    assert empty == [{"evaluationResultId": None, "details": "no search hits found"}]

    check = stack.srw("GET", f"/experiments/{done['id']}/validate")
    assert check.json == {"status": "VALID", "drifted_inputs": [],
                          "message": "Experiment inputs match the stored execution "
                                     "fingerprint."}


def test_pairwise_local_against_remote(stack: Api, world: dict[str, Any],
                                       direct: OpenSearch) -> None:
    local, remote = world["local"], world["remote"]
    body = {"type": "PAIRWISE_COMPARISON", "querySetId": world["querySetId"],
            "searchConfigurationList": [local, remote], "size": 2}
    done = experiment(stack, body)
    assert done["status"] == "COMPLETED", done["results"]
    assert done["remoteSearchConfigurationIds"] == [remote]
    assert done["remoteSearchFailureCount"] == 0
    same = experiment(stack, {**body, "searchConfigurationList": [local, local]})
    assert [r["query_text"] for r in done["results"]] == QUERIES
    for mine, reference in zip(done["results"], same["results"], strict=True):
        ids = direct_ids(direct, world["index"], mine["query_text"], 2)
        local_snapshot, remote_snapshot = mine["snapshots"]
        assert local_snapshot["docIds"] == remote_snapshot["docIds"] == ids
        assert set(local_snapshot) == {"searchConfigurationId", "docIds", "took"}
        assert remote_snapshot == {"searchConfigurationId": remote, "docIds": ids}
        # identical lists agree as a configuration agrees with itself
        assert mine["metrics"] == reference["metrics"]
        assert mine["exactMetrics"] == reference["exactMetrics"]
    jaccard = {m["metric"]: m["value"] for m in done["results"][0]["metrics"]}["jaccard"]
    assert jaccard == 1.0  # the same two documents


def test_a_remote_query_that_fails_is_recorded_and_the_rest_completes(
        stack: Api, world: dict[str, Any], direct: OpenSearch) -> None:
    # query_string cannot parse "red (": the remote answers 400 for that query only
    failing = remote_configuration(stack, world["url"],
                                   '{"query":{"query_string":{"query":"%SearchText%",'
                                   '"default_field":"title"}},"sort":[{"rank":"asc"}]}',
                                   cacheDurationMinutes=0)
    query_set = stack.srw("PUT", "/query_sets", {"name": "some fail", "querySetQueries": [
        {"queryText": "worked"}, {"queryText": "red ("}]}).json["query_set_id"]
    done = experiment(stack, {**pointwise(world, [world["local"], failing]),
                              "querySetId": query_set})
    assert done["status"] == "COMPLETED", done["results"]
    assert done["remoteSearchFailureCount"] == 1
    (failure,) = done["remoteSearchFailures"]
    assert set(failure) == {"searchConfigurationId", "queryText", "reason"}
    assert (failure["searchConfigurationId"], failure["queryText"]) == (failing, "red (")
    assert failure["reason"].startswith(f"remote search configuration [{failing}]: HTTP 400 ")
    assert "query_shard_exception" in failure["reason"] or "parse" in failure["reason"]
    assert [(r["queryText"], r.get("searchConfigurationId")) for r in done["results"]] == [
        ("worked", world["local"]), ("worked", failing), ("red (", world["local"])]
    evaluations = by_experiment(direct, EVALUATIONS, done["id"])
    assert sorted((e["searchText"], e["searchConfigurationId"]) for e in evaluations) == sorted(
        [("worked", world["local"]), ("worked", failing), ("red (", world["local"])])
    # nothing is written for the failed pair, no variant either
    variants = by_experiment(direct, VARIANTS, done["id"])
    assert len(variants) == 3


def test_every_search_failing_ends_the_experiment_error(stack: Api, world: dict[str, Any],
                                                        direct: OpenSearch, node: str) -> None:
    gone = f"test-remote-gone-{uuid.uuid4().hex[:6]}"
    direct.indices.create(index=gone)
    remote = remote_configuration(stack, f"{node}/{gone}/_search",
                                  TEMPLATE.replace(',"sort":[{"rank":"asc"}]', ""),
                                  cacheDurationMinutes=0)
    direct.indices.delete(index=gone)
    done = experiment(stack, pointwise(world, [world["local"], remote]))
    assert done["status"] == "ERROR"
    (error,) = done["results"]
    prefix = (f"every search with remote search configuration [{remote}] failed: "
              f"remote search configuration [{remote}]: HTTP 404 ")
    assert error["error"].startswith(prefix), error
    assert "index_not_found_exception" in error["error"]
    assert done["remoteSearchFailureCount"] == len(QUERIES)
    assert [f["queryText"] for f in done["remoteSearchFailures"]] == QUERIES
    assert all(f["reason"].startswith(f"remote search configuration [{remote}]: HTTP 404 ")
               for f in done["remoteSearchFailures"])


class _Answering(BaseHTTPRequestHandler):
    """A remote that answers an empty OpenSearch search (for the create's probe)."""

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        body = json.dumps({"hits": {"hits": []}}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *_: Any) -> None:
        return None


def test_a_remote_that_stopped_answering_ends_the_experiment_error(
        stack: Api, world: dict[str, Any]) -> None:
    port = free_port()
    remote_server = ThreadingHTTPServer(("127.0.0.1", port), _Answering)
    thread = threading.Thread(target=remote_server.serve_forever, daemon=True)
    thread.start()
    try:
        remote = remote_configuration(stack, f"http://127.0.0.1:{port}/products/_search",
                                      TEMPLATE, cacheDurationMinutes=0)
    finally:
        remote_server.shutdown()
        remote_server.server_close()
    done = experiment(stack, {"type": "PAIRWISE_COMPARISON", "querySetId": world["querySetId"],
                              "searchConfigurationList": [world["local"], remote], "size": 2})
    assert done["status"] == "ERROR"
    (error,) = done["results"]
    assert error["error"].startswith(
        f"every search with remote search configuration [{remote}] failed: "
        f"remote search configuration [{remote}]: "), error
    assert done["remoteSearchFailureCount"] == len(QUERIES)


# -- judgments -----------------------------------------------------------------------------------

SKU_MAPPING = {"preset": "opensearch", "id": "$._source.sku",
               "fields": {"title": "$._source.title"}}


@pytest.fixture(scope="module")
def by_sku(stack: Api, world: dict[str, Any]) -> str:
    """The same search, answered by SKU with the title as the only field."""
    return remote_configuration(stack, world["url"], TEMPLATE, responseTemplate=SKU_MAPPING)


SKU = {doc_id: sku for doc_id, _, _, sku in DOCS}
TITLE = {doc_id: title for doc_id, title, _, _ in DOCS}


def test_an_llm_judgment_rates_the_remote_hits_by_their_mapped_fields(
        stack: Api, world: dict[str, Any], by_sku: str, llm: LLMServer,
        direct: OpenSearch) -> None:
    reply = stack.srw("PUT", "/judgments", {
        "name": f"remote-llm-{uuid.uuid4().hex[:6]}", "type": "LLM_JUDGMENT",
        "modelId": JUDGE_MODEL, "querySetId": world["querySetId"],
        "searchConfigurationList": [{"type": "remote", "id": by_sku}], "size": 3,
        "overwriteCache": True})
    assert reply.status == 200, reply.data
    done = finished(stack, f"/judgments/{reply.json['judgment_id']}", 120)
    assert done["status"] == "COMPLETED", done["metadata"]
    metadata = done["metadata"]
    assert metadata["searchConfigurationList"] == [by_sku]
    assert metadata["remoteSearchConfigurationIds"] == [by_sku]
    assert (metadata["totalQueries"], metadata["failedQueries"]) == (4, 0)
    stored = {e["query"]: {r["docId"]: r["rating"] for r in e["ratings"]}
              for e in done["judgmentRatings"]}
    for text in QUERIES:
        expected = [SKU[d] for d in direct_ids(direct, world["index"], text, 3)]
        assert list(stored[text]) == expected, text  # the remote's ids, in rank order
    assert len(llm.requests) == 3  # "nothing matches this" has no hits to rate
    for request in llm.requests:
        hits = json.loads(request.user.split("Hits: ", 1)[1])
        query = request.user.split("SearchText: ", 1)[1].split(";", 1)[0]
        by_id = {h["id"].split("::", 1)[1]: json.loads(h["source"]) for h in hits}
        assert all(h["id"].startswith(world["url"] + "::") for h in hits)
        assert by_id == {SKU[d]: {"title": TITLE[d]}
                         for d in direct_ids(direct, world["index"], query, 3)}
        answer = {str(r["id"]).split("::", 1)[1]: repr(float(r["rating_score"]))
                  for r in fake.judge(request.system, request.user, request.response_format)}
        assert stored[query] == answer


def test_a_reference_judgment_over_remote_hits_rates_as_over_local_ones(
        stack: Api, world: dict[str, Any], by_sku: str) -> None:
    query_set = stack.srw("PUT", "/query_sets", {"name": "with answers", "querySetQueries": [
        {"queryText": "worked", "referenceAnswer": "red shoes for trail"},
        {"queryText": "red", "referenceAnswer": "yellow sock"}]}).json["query_set_id"]

    def judge(config: Any) -> dict[str, Any]:
        reply = stack.srw("PUT", "/judgments", {
            "name": f"ref-{uuid.uuid4().hex[:6]}", "type": "REFERENCE_JUDGMENT",
            "judge": "token_overlap", "querySetId": query_set,
            "searchConfigurationList": [config], "size": 3, "contextFields": ["title"]})
        assert reply.status == 200, reply.data
        done = finished(stack, f"/judgments/{reply.json['judgment_id']}", 120)
        assert done["status"] == "COMPLETED", done["metadata"]
        return done

    remote, local = judge(by_sku), judge(world["local"])
    assert remote["metadata"]["remoteSearchConfigurationIds"] == [by_sku]
    assert "remoteSearchConfigurationIds" not in local["metadata"]
    mine = remote["judgmentRatings"]
    theirs = [{**entry, "ratings": [{**r, "docId": SKU[r["docId"]]} for r in entry["ratings"]]}
              for entry in local["judgmentRatings"]]
    assert mine == theirs
    assert [len(e["ratings"]) for e in mine] == [3, 3]
    assert {r["rating"] for e in mine for r in e["ratings"]} != {"0.0"}


# -- what stays local only -------------------------------------------------------------------------

def test_what_searches_local_configurations_only_refuses_a_remote_one(
        stack: Api, world: dict[str, Any]) -> None:
    remote, local = world["remote"], world["local"]
    hybrid = stack.srw("PUT", "/experiments", {
        "type": "HYBRID_OPTIMIZER", "querySetId": world["querySetId"],
        "searchConfigurationList": [{"type": "remote", "id": remote}],
        "judgmentList": [world["judgment"]], "size": 3})
    hybrid.error(400, "HYBRID_OPTIMIZER experiments search local search configurations only: "
                      f"[{remote}] is a remote search configuration", "illegal_argument_exception")
    expand = stack.srw("PUT", "/judgments", {
        "name": "expand", "type": "LLM_JUDGMENT", "modelId": JUDGE_MODEL,
        "querySetId": world["querySetId"], "searchConfigurationList": [remote],
        "expandCoverage": True})
    expand.error(400, "expandCoverage pools the hybrid sub-queries of local search "
                      f"configurations only: [{remote}] is a remote search configuration")
    ab = stack.srw("PUT", f"/ab_tests/t-{uuid.uuid4().hex[:8]}", {
        "search_configuration_a": local, "search_configuration_b": remote})
    ab.error(400, f"A/B tests search local search configurations only: [{remote}] is a remote "
                  "search configuration", "search_relevance_exception")


def test_the_holes_of_a_remote_experiment_are_not_filled(
        stack: Api, world: dict[str, Any]) -> None:
    """Filling reads the pooled documents again by id, which a remote does not offer."""
    done = experiment(stack, pointwise(world, [world["remote"]]))
    assert done["status"] == "COMPLETED", done
    reply = stack.srw("POST", f"/experiments/{done['id']}/_fill", {"modelId": JUDGE_MODEL})
    reply.error(400, f"the holes of experiment [{done['id']}] cannot be filled: it searches "
                     f"remote search configuration [{world['remote']}], whose documents cannot "
                     "be read again by id; fill holes of local configurations only")


def test_entries_naming_nothing_are_refused(stack: Api, world: dict[str, Any]) -> None:
    local = world["local"]
    cases = [
        ({"type": "remote", "id": local}, f"RemoteSearchConfiguration [{local}] does not exist"),
        ({"type": "local", "id": world["remote"]},
         f"SearchConfiguration [{world['remote']}] does not exist"),
        ("no-such-config", "SearchConfiguration [no-such-config] does not exist"),
        ({"type": "other", "id": local},
         "searchConfigurationList: an entry's type must be local or remote, got [other]"),
    ]
    for entry, message in cases:
        reply = stack.srw("PUT", "/experiments", pointwise(world, [entry]))
        reply.error(400, message, "illegal_argument_exception")
        reply = stack.srw("PUT", "/judgments", {
            "name": "bad", "type": "LLM_JUDGMENT", "modelId": JUDGE_MODEL,
            "querySetId": world["querySetId"], "searchConfigurationList": [entry]})
        reply.error(400, message)
