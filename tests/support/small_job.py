"""A small LLM-judgment job for fault tests: five products, three queries, one configuration.

Killing workers or stopping the cluster needs a job that is still running when the fault comes;
with the stand-in LLM's latency set, this one makes a handful of slow calls.
"""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass

import redis
from opensearchpy import OpenSearch

from tests.conftest import JUDGE_MODEL
from tests.support.api import Api
from workbench.jobs import leases

GENERATE = "workbench.judgments.generate"

TITLES = ["red shoes", "blue shoes", "red hat", "usb cable", "earbuds"]
QUERIES = ["red shoes", "usb cable", "earbuds"]


@dataclass(frozen=True)
class SmallJob:
    index: str
    query_set_id: str
    config_id: str

    def start(self, api: Api, name: str) -> str:
        """PUT an LLM judgment over the world (cache bypassed, so every rating is a call)."""
        reply = api.srw("PUT", "/judgments", {
            "name": name, "type": "LLM_JUDGMENT", "modelId": JUDGE_MODEL,
            "querySetId": self.query_set_id, "searchConfigurationList": [self.config_id],
            "size": 3, "contextFields": ["title"], "overwriteCache": True})
        assert reply.status == 200, reply.data
        return str(reply.json["judgment_id"])


def small_job(client: OpenSearch, api: Api, index: str) -> SmallJob:
    """Create ``index`` with the products, and the query set and configuration over it."""
    client.indices.create(index=index)
    for n, title in enumerate(TITLES):
        client.index(index=index, id=f"p{n}", body={"title": title})
    client.indices.refresh(index=index)
    suffix = uuid.uuid4().hex[:6]
    query_set = api.srw("PUT", "/query_sets", {
        "name": f"small job {suffix}",
        "querySetQueries": [{"queryText": q} for q in QUERIES]}).json["query_set_id"]
    config = api.srw("PUT", "/search_configurations", {
        "name": f"titles-{suffix}", "index": index,
        "query": '{"query":{"match":{"title":"%SearchText%"}}}'}).json["search_configuration_id"]
    return SmallJob(index, str(query_set), str(config))


def wait_lease(r: redis.Redis, judgment_id: str, timeout: float = 60) -> str:
    """The lease of a running generate job once it is taken: its holder (host, pid, token)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = r.get(leases.lease_key(GENERATE, judgment_id))
        if value is not None:
            return value.decode()
        time.sleep(0.05)
    raise AssertionError("the job never took its lease")


def leases_gone(r: redis.Redis, judgment_id: str, timeout: float = 15) -> bool:
    """True once the job's lease and queued marker are both gone. The job releases its lease
    just after writing the final status, so a test that saw that status waits this moment
    before it stops the worker."""
    deadline = time.monotonic() + timeout
    keys = [leases.lease_key(GENERATE, judgment_id), leases.queued_key(GENERATE, judgment_id)]
    while any(r.get(key) is not None for key in keys):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.1)
    return True


def item_catalogue(client: OpenSearch, api: Api, index: str, queries: int,
                   docs: int) -> dict[str, str]:
    """``index`` with ``docs`` documents for each of ``queries`` items (``q<q>-d<d>``: one blue
    hat, the rest red shoes), the query set "item<q> red shoe" and a configuration matching
    titles: a judgment large enough to split. Returns ``querySetId`` and ``config``."""
    client.indices.create(index=index)
    for q in range(queries):
        for d in range(docs):
            client.index(index=index, id=f"q{q}-d{d}",
                         body={"title": f"item{q} {'red shoe' if d else 'blue hat'} {d}"})
    client.indices.refresh(index=index)
    query_set = api.srw("PUT", "/query_sets", {"name": f"items {index}", "querySetQueries": [
        {"queryText": f"item{q} red shoe"} for q in range(queries)]}).json["query_set_id"]
    config = api.srw("PUT", "/search_configurations", {
        "name": f"items {index}", "index": index,
        "query": '{"query":{"match":{"title":"%SearchText%"}}}'}).json["search_configuration_id"]
    return {"querySetId": str(query_set), "config": str(config)}

