"""A cluster, not a node: the workbench given every node of a real three-node OpenSearch cluster
(``tests/support/os_cluster.py``), behind its HAProxy front, loses the node listed first
(SIGKILL) while an imported judgment, a UBI judgment and a pointwise experiment run and four
clients search, and carries on on the other two (docs/deployment.md, "A cluster of several
nodes").

Checked: every job ends ``COMPLETED`` with the results of the same jobs run before on the whole
cluster, nothing is stored twice, no job is queued again or loses its lease, and the only 5xx
answers are those of requests already in flight to the node when it died.
"""

from __future__ import annotations

import http.client
import json
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlsplit

import pytest
import urllib3
from opensearchpy import OpenSearch

from tests.conftest import load_ubi
from tests.support.api import Api, search_configuration
from tests.support.data import ESCI, UBI_SAMPLE
from tests.support.os_cluster import Cluster
from tests.support.processes import REPO, Server, Worker, base_env
from tests.support.waiting import finished

#: Equal scores are ordered by Lucene's document number, which differs between a shard's
#: primary and its replica (each copy builds its own segments), so without a tie-break a search
#: may rank ties differently on whichever copy answers; the scores themselves are the same on
#: every copy (same documents, no deletes).
TITLE_MATCH = {"query": {"match": {"title": "%SearchText%"}}, "sort": ["_score", {"asin": "asc"}]}


@pytest.fixture(scope="module")
def three(redis_url: str) -> Iterator[dict[str, Any]]:
    cluster = Cluster(3).start()
    env = base_env(cluster.opensearch_url, redis_url,
                   WORKBENCH_QUEUE=f"test-cluster-{uuid.uuid4().hex[:8]}")
    server = worker = None
    try:
        server = Server(env, workers=2, front="haproxy")
        worker = Worker(env)
        api = Api(server.url)
        products = "products"
        loaded = subprocess.run(
            [sys.executable, "-m", "workbench.cli", "load-demo", "--products",
             str(UBI_SAMPLE / "ubi_ecommerce_products.json.gz"), "--products-index", products],
            env=env, capture_output=True, text=True, timeout=600, cwd=REPO)
        assert loaded.returncode == 0, loaded.stderr
        load_ubi(env)
        query_set = api.srw("PUT", "/query_sets", json.loads(
            (ESCI / "esci_us_queryset.json").read_text())).json["query_set_id"]
        config = search_configuration(api, "title", products, json.dumps(TITLE_MATCH))
        esci = import_esci(api)
        assert finished(api, f"/judgments/{esci}", 120)["status"] == "COMPLETED"
        # the test's own view of the cluster, through the nodes that stay
        direct = OpenSearch(cluster.urls[1:], timeout=60)
        direct.cluster.health(wait_for_status="green", params={"timeout": "120s"},
                              request_timeout=130)
        yield {"cluster": cluster, "api": api, "server": server, "worker": worker,
               "direct": direct, "products": products, "querySetId": query_set,
               "config": config, "esci": esci}
    finally:
        for process in (worker, server):
            if process is not None:
                process.stop()
        cluster.stop()


def import_esci(api: Api) -> str:
    imported = json.loads((ESCI / "esci_us_judgments.json").read_text())
    reply = api.srw("PUT", "/judgments", {**imported, "name": f"esci-{uuid.uuid4().hex[:8]}"})
    assert reply.status == 200, reply.data
    return str(reply.json["judgment_id"])


def start_jobs(three: dict[str, Any]) -> dict[str, str]:
    """A UBI judgment, a pointwise experiment over the 150 ESCI queries (on the ESCI judgments
    imported once) and an import of the ESCI judgments, the quickest, last."""
    api = three["api"]
    ids = {"ubi": api.srw("PUT", "/judgments", {
        "name": f"ubi-{uuid.uuid4().hex[:8]}", "type": "UBI_JUDGMENT", "clickModel": "coec",
        "maxRank": 20}).json["judgment_id"]}
    reply = api.srw("PUT", "/experiments", {
        "type": "POINTWISE_EVALUATION", "querySetId": three["querySetId"], "size": 10,
        "searchConfigurationList": [three["config"]], "judgmentList": [three["esci"]]})
    assert reply.status == 200, reply.data
    ids["experiment"] = reply.json["experiment_id"]
    ids["import"] = import_esci(api)
    return ids


def outcome(three: dict[str, Any], ids: dict[str, str]) -> dict[str, Any]:
    """What the jobs wrote, without ids and times: ratings and per-query metrics."""
    api, direct = three["api"], three["direct"]
    out: dict[str, Any] = {}
    for kind in ("import", "ubi"):
        done = finished(api, f"/judgments/{ids[kind]}", 300)
        assert done["status"] == "COMPLETED", done["metadata"]
        out[kind] = done["judgmentRatings"]
    done = finished(api, f"/experiments/{ids['experiment']}", 300)
    assert done["status"] == "COMPLETED", done.get("results")
    direct.indices.refresh(index="search-relevance-evaluation-result")
    hits = direct.search(index="search-relevance-evaluation-result", body={
        "query": {"term": {"experimentId": ids["experiment"]}}, "size": 1000})["hits"]["hits"]
    out["evaluations"] = sorted(
        (h["_source"]["searchText"], json.dumps(h["_source"]["metrics"], sort_keys=True))
        for h in hits)
    return out


class Clients:
    """Four threads searching through the front and reading SRW entities, each answer kept as
    (start, end, status)."""

    def __init__(self, base: str, products: str) -> None:
        self.base, self.products = base, products
        self.answers: list[tuple[float, float, int]] = []
        self.errors: list[str] = []
        self.running = True
        self.threads = [threading.Thread(target=self._run, args=(n,)) for n in range(4)]

    def _run(self, number: int) -> None:
        http = urllib3.PoolManager(retries=False, timeout=60)
        body = json.dumps({"query": {"match": {"title": "running shoes"}}, "size": 5})
        while self.running:
            start = time.monotonic()
            try:
                if number % 2:
                    status = http.request(
                        "GET", f"{self.base}/_plugins/_search_relevance/judgments?size=5").status
                else:
                    status = http.request(
                        "POST", f"{self.base}/{self.products}/_search", body=body,
                        headers={"Content-Type": "application/json"}).status
            except urllib3.exceptions.HTTPError as exc:  # no answer at all
                self.errors.append(f"{'GET judgments' if number % 2 else 'search'}: {exc!r}")
                status = 0
            self.answers.append((start, time.monotonic(), status))

    def __enter__(self) -> Clients:
        for thread in self.threads:
            thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.running = False
        for thread in self.threads:
            thread.join(60)


def statuses(api: Api, ids: dict[str, str]) -> dict[str, str]:
    return {kind: api.srw("GET", f"/{'experiments' if kind == 'experiment' else 'judgments'}"
                                 f"/{entity}").json["hits"]["hits"][0]["_source"]["status"]
            for kind, entity in ids.items()}


class Readers:
    """``count`` threads sending pass-through reads through the front, each on its kept-alive
    connection and without retries of its own, as a client that trusts the front does:
    searches whose body follows their head a few milliseconds later (as over a network, or
    from a client that sends the two apart, as urllib3 does), and counts, in turn. Each
    answer is kept as (start, end, status, what)."""

    def __init__(self, base: str, products: str, count: int = 12) -> None:
        self.address = urlsplit(base)
        self.products = products
        self.answers: list[tuple[float, float, int, str]] = []
        self.running = True
        self.threads = [threading.Thread(target=self._run, args=(n,)) for n in range(count)]

    def _connection(self) -> http.client.HTTPConnection:
        return http.client.HTTPConnection(self.address.hostname or "127.0.0.1",
                                          self.address.port, timeout=60)

    def _run(self, number: int) -> None:
        body = json.dumps({"query": {"match": {"title": "running shoes"}}, "size": 5}).encode()
        requests = [("POST", f"/{self.products}/_search", body),
                    ("POST", f"/{self.products}/_search?size=3", body),
                    ("POST", f"/{self.products}/_search", body),
                    ("GET", f"/{self.products}/_count", None)]
        conn, turn = self._connection(), number
        while self.running:
            method, path, data = requests[turn % len(requests)]
            turn += 1
            start = time.monotonic()
            try:
                conn.putrequest(method, path)
                if data is not None:
                    conn.putheader("Content-Type", "application/json")
                    conn.putheader("Content-Length", str(len(data)))
                conn.endheaders()
                if data is not None:
                    time.sleep(0.005)
                    conn.send(data)
                reply = conn.getresponse()
                status, what = reply.status, reply.read()[:300].decode(errors="replace")
            except (OSError, http.client.HTTPException) as exc:  # no answer at all
                status, what = 0, repr(exc)
                conn.close()
                conn = self._connection()
            self.answers.append((start, time.monotonic(), status, f"{method} {path}: {what}"))
        conn.close()

    def __enter__(self) -> Readers:
        for thread in self.threads:
            thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.running = False
        for thread in self.threads:
            thread.join(60)


def test_a_node_that_dies_is_invisible_to_readers(three: dict[str, Any]) -> None:
    """Twelve clients read through the front (searches with a body, counts) while a node is
    killed: a read on its way to the dying node, or sent to it before it is taken out, goes
    to another node, so every answer is a 200 (before the front waited for a read's body, a
    search whose body came after its head and that the node's death cut off was answered
    503, or by closing the connection). The node is started again afterwards, for the other
    test."""
    cluster, server = three["cluster"], three["server"]
    for number in sorted(cluster.killed):  # the other test ran first
        cluster.restart(number)
    with Readers(server.url, three["products"]) as readers:
        time.sleep(1.5)
        cluster.kill(2)
        dead_at = time.monotonic()
        time.sleep(3)
    try:
        answers = readers.answers
        failed = [(round(start - dead_at, 3), round(end - dead_at, 3), status, what)
                  for start, end, status, what in answers if status != 200]
        print(f"{len(answers)} reads, {len(failed)} not 200 (seconds from the node's death):",
              failed)
        assert sum(start >= dead_at - 1 for start, _, _, _ in answers) > 30
        assert failed == []
    finally:
        cluster.restart(2)


def test_losing_the_first_node_changes_nothing_for_the_jobs(three: dict[str, Any]) -> None:
    """The three jobs are started just before the kill (the experiment, the longest, is
    still running when the node dies) and again at once after it, while the cluster elects a
    new manager and promotes replicas; all six end as on the whole cluster."""
    api, cluster, worker = three["api"], three["cluster"], three["worker"]
    reference = outcome(three, start_jobs(three))
    assert len(reference["evaluations"]) > 100 and reference["ubi"]

    log_before = len(worker.log())
    with Clients(three["server"].url, three["products"]) as clients:
        time.sleep(1)
        before = start_jobs(three)
        at_kill = statuses(api, before)
        cluster.kill(1)
        dead_at = time.monotonic()  # SIGKILLed and reaped: its sockets are closed
        after = start_jobs(three)
        outcomes = [outcome(three, before), outcome(three, after)]
        time.sleep(2)
    print("status at the kill:", at_kill)
    assert at_kill["experiment"] == "PROCESSING"

    assert outcomes == [reference, reference]
    # nothing stored twice: one document per judgment
    direct = three["direct"]
    direct.indices.refresh(index="search-relevance-judgment")
    for ids in (before, after):
        for kind in ("import", "ubi"):
            assert direct.count(index="search-relevance-judgment", body={"query": {"ids": {
                "values": [ids[kind]]}}})["count"] == 1

    answers = clients.answers
    failed = [(start - dead_at, end - dead_at, status) for start, end, status in answers
              if status >= 500 or status == 0]
    print(f"{len(answers)} client answers, {len(failed)} of them 5xx or none (seconds from "
          "the node's death):", failed, clients.errors)
    assert len(answers) > 100
    # Reads are sent again to another node when theirs dies before answering (the front's
    # L7 retry, opensearch-py's retry); only an answer cut off mid-way on the dying node
    # could still fail, so only requests under way before it died may.
    assert all(start < 0 for start, _, _ in failed), failed
    assert {status for _, _, status in answers} <= {0, 200, 502}, clients.errors

    new_logs = worker.log()[log_before:]
    assert "queued again" not in new_logs and "lost its" not in new_logs, new_logs[-3000:]
    print("jobs run again in their worker after a lost write:",
          new_logs.count("trying again in"))
