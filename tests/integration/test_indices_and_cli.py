"""System indices and the CLI commands, against the real cluster."""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from opensearchpy import OpenSearch

from tests.support.data import ESCI, UBI_SAMPLE
from tests.support.processes import REPO


def run_cli(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "workbench.cli", *args], env=env,
                          capture_output=True, text=True, timeout=600, cwd=REPO)


def as_stored(mapping: Any) -> Any:
    """How OpenSearch answers a mapping: ``dynamic`` as "true"/"false", and no ``type: object``
    on an object that lists its properties."""
    if not isinstance(mapping, dict):
        return mapping
    out = {k: (str(v).lower() if k == "dynamic" else as_stored(v)) for k, v in mapping.items()}
    if "properties" in out and out.get("type") == "object":
        del out["type"]
    return out


@pytest.fixture
def prefixed_mappings(tmp_path: Path, direct: OpenSearch):
    """The real mapping files, with index names under a unique test prefix."""
    prefix = f"test-{uuid.uuid4().hex[:8]}-"
    names = []
    for path in sorted((REPO / "index_mappings").glob("*.json")):
        data = json.loads(path.read_text())
        data["index"] = prefix + data["index"].lstrip(".")
        names.append(data["index"])
        (tmp_path / path.name).write_text(json.dumps(data))
    yield tmp_path, names
    direct.indices.delete(index=prefix + "*", ignore=[404])


def test_init_indices_is_idempotent_and_safe_in_parallel(env, prefixed_mappings,
                                                         direct: OpenSearch) -> None:
    folder, names = prefixed_mappings
    run_env = dict(env, WORKBENCH_INDEX_MAPPINGS_DIR=str(folder))
    with ThreadPoolExecutor(4) as pool:
        results = list(pool.map(lambda _: run_cli(run_env, "init-indices"), range(4)))
    assert [r.returncode for r in results] == [0, 0, 0, 0], [r.stderr for r in results]
    created: list[str] = []
    for r in results:
        line = r.stdout.strip().splitlines()[-1]
        if not line.startswith("created: nothing"):
            created += line.removeprefix("created: ").split(", ")
    assert sorted(created) == sorted(names)  # each index created exactly once
    for path in folder.glob("*.json"):
        spec = json.loads(path.read_text())
        mapping = direct.indices.get_mapping(index=spec["index"])[spec["index"]]["mappings"]
        assert mapping["properties"] == as_stored(spec["mappings"]["properties"])
        assert mapping.get("_meta") == spec["mappings"].get("_meta")
    again = run_cli(run_env, "init-indices")
    assert again.stdout.strip() == "created: nothing (all indices exist)"


GENERATED_QUERY_SET_FIELDS = {
    "type": "keyword", "status": "keyword", "numberOfQueryTerms": "integer",
    "modelId": "keyword", "sourceIndex": "keyword", "contextFields": "keyword",
    "categories": "keyword"}


def query_set_types(direct: OpenSearch, index: str) -> dict[str, str | None]:
    properties = direct.indices.get_mapping(index=index)[index]["mappings"]["properties"]
    return {name: properties.get(name, {}).get("type") for name in GENERATED_QUERY_SET_FIELDS}


def test_the_fields_of_generated_query_sets_are_mapped_on_a_new_index(
        env, prefixed_mappings, direct: OpenSearch) -> None:
    """The fields the plugin's generated query sets will write have their declared types
    from the start, so a later plugin mapping never meets a dynamically made ``text``."""
    folder, names = prefixed_mappings
    (query_sets,) = [n for n in names if n.endswith("search-relevance-queryset")]
    result = run_cli(dict(env, WORKBENCH_INDEX_MAPPINGS_DIR=str(folder)), "init-indices")
    assert result.returncode == 0, result.stderr
    assert query_set_types(direct, query_sets) == GENERATED_QUERY_SET_FIELDS


def test_the_fields_of_generated_query_sets_are_added_to_an_existing_index(
        env, prefixed_mappings, direct: OpenSearch) -> None:
    """An index made by an earlier version (the mapping without them, a query set in it) gets
    the fields by put-mapping at ``init-indices``, before anything writes them; what it had is
    unchanged, and a query set written afterwards keeps the declared types."""
    folder, names = prefixed_mappings
    (query_sets,) = [n for n in names if n.endswith("search-relevance-queryset")]
    spec = json.loads((folder / "queryset.json").read_text())
    earlier = json.loads(json.dumps(spec["mappings"]))
    for name in GENERATED_QUERY_SET_FIELDS:
        del earlier["properties"][name]
    direct.indices.create(index=query_sets, body={"settings": spec["settings"],
                                                  "mappings": earlier})
    direct.index(index=query_sets, id="old", refresh=True, body={
        "id": "old", "name": "old", "sampling": "manual",
        "querySetQueries": [{"queryText": "shoes"}]})
    assert set(query_set_types(direct, query_sets).values()) == {None}

    result = run_cli(dict(env, WORKBENCH_INDEX_MAPPINGS_DIR=str(folder)), "init-indices")
    assert result.returncode == 0, result.stderr
    assert query_sets not in result.stdout  # it existed: not created again
    assert query_set_types(direct, query_sets) == GENERATED_QUERY_SET_FIELDS
    mapping = direct.indices.get_mapping(index=query_sets)[query_sets]["mappings"]
    assert mapping["properties"] == as_stored(spec["mappings"]["properties"])
    assert direct.get(index=query_sets, id="old")["_source"]["name"] == "old"

    direct.index(index=query_sets, id="generated", refresh=True, body={
        "id": "generated", "name": "generated", "sampling": "llm_random",
        "type": "llm_query_set", "status": "PROCESSING", "numberOfQueryTerms": 5,
        "modelId": "m1", "sourceIndex": "products", "contextFields": ["title"],
        "categories": ["shoes", "hats"], "querySetQueries": []})
    assert query_set_types(direct, query_sets) == GENERATED_QUERY_SET_FIELDS
    again = run_cli(dict(env, WORKBENCH_INDEX_MAPPINGS_DIR=str(folder)), "init-indices")
    assert again.stdout.strip() == "created: nothing (all indices exist)"


def test_server_start_creates_the_system_indices(server, direct: OpenSearch) -> None:
    for path in sorted((REPO / "index_mappings").glob("*.json")):
        name = json.loads(path.read_text())["index"]
        assert direct.indices.exists(index=name), name


def test_load_demo_indexes_products_and_ubi(env, direct: OpenSearch) -> None:
    products = f"test-{uuid.uuid4().hex[:8]}-products"
    try:
        result = run_cli(
            env, "load-demo",
            "--products", str(UBI_SAMPLE / "ubi_ecommerce_products.json.gz"),
            "--products-index", products,
            "--ubi", str(ESCI / "ubi_queries_events.ndjson"),
        )
        assert result.returncode == 0, result.stderr
        assert result.stdout.splitlines() == [
            f"{products}: 6764 documents",
            "ubi_events: 3448 documents",
            "ubi_queries: 473 documents",
        ]
        doc = direct.get(index=products, id="B07CXG6C9W")["_source"]
        assert doc["asin"] == "B07CXG6C9W" and "_id" not in doc
        mapping = direct.indices.get_mapping(index="ubi_queries")["ubi_queries"]["mappings"]
        assert mapping["properties"]["user_query"]["type"] == "keyword"
        hits = direct.search(index=products, body={"query": {"match": {"title": "kindle"}}})
        assert hits["hits"]["total"]["value"] > 0
    finally:
        direct.indices.delete(index=products, ignore=[404])


def test_load_demo_without_paths_loads_the_shipped_data(env, direct) -> None:
    """The demo data ships in the package: the same files as the data set, compressed, but
    the judgments, whose ESCI grades 100/10/1/0 are mapped to 3/2/1/0 and nothing else."""
    import gzip

    from scripts.demo_judgments import shipped_bytes
    from workbench.demo import load

    assert gzip.decompress(load.UBI.read_bytes()) == (ESCI / "ubi_queries_events.ndjson"
                                                      ).read_bytes()
    assert load.PRODUCTS.read_bytes() == (UBI_SAMPLE / "ubi_ecommerce_products.json.gz"
                                          ).read_bytes()
    assert gzip.decompress(load.QUERY_SET.read_bytes()) == (ESCI / "esci_us_queryset.json"
                                                            ).read_bytes()
    sample = json.loads((ESCI / "esci_us_judgments.json").read_text())
    assert load.JUDGMENTS.read_bytes() == shipped_bytes(sample)
    shipped = json.loads(gzip.decompress(load.JUDGMENTS.read_bytes()))
    grades = {("t towels kitchen", "B07NCQWCQS"): "3", ("t towels kitchen", "B07QLRTGVQ"): "2",
              ("t towels kitchen", "B0825VCHDG"): "1", ("t towels kitchen", "B08JZ36B5B"): "0"}
    for (query, doc), grade in grades.items():  # Exact, Substitute, Complement, Irrelevant
        row = next(r for r in shipped["judgmentRatings"] if r["query"] == query)
        assert {"docId": doc, "rating": grade} in row["ratings"]
    assert sum(len(r["ratings"]) for r in shipped["judgmentRatings"]) == 6678
    products = f"test-shipped-{uuid.uuid4().hex[:6]}"
    try:
        result = run_cli(env, "load-demo", "--products-index", products)
        assert result.returncode == 0, result.stderr
        assert result.stdout.splitlines() == [
            f"{products}: 6764 documents", "ubi_events: 3448 documents",
            "ubi_queries: 473 documents"]
        # a second load leaves the complete catalogue as it is: no overwritten versions in
        # the index's statistics, so the demo ranks exactly as after the first load
        again = run_cli(env, "load-demo", "--products-index", products)
        assert again.stdout == result.stdout and again.stderr == "", again.stderr
        docs = direct.indices.stats(index=products)["_all"]["primaries"]["docs"]
        assert docs == {"count": 6764, "deleted": 0}
    finally:
        direct.indices.delete(index=products, ignore=[404])


def test_status_reports_each_service(env, worker) -> None:
    result = run_cli(env, "status")
    assert result.returncode == 0, result.stdout + result.stderr
    lines = dict(line.split(None, 1) for line in result.stdout.splitlines())
    assert lines["opensearch"].startswith("ok")
    assert lines["redis"].startswith("ok")
    assert lines["workers"].startswith("ok") and worker.queue in lines["workers"]


def test_bad_configuration_is_refused_with_the_variable_named(env) -> None:
    result = run_cli(dict(env, WORKBENCH_PORT="not-a-port"), "init-indices")
    assert result.returncode == 2
    assert "WORKBENCH_PORT" in result.stderr


def test_store_client_reuses_connections_under_concurrency(env, caplog) -> None:
    """The one client a process shares keeps a connection per concurrent caller: twelve threads
    never make urllib3 discard a connection ("Connection pool is full"), and afterwards the pool
    holds more than one connection, all reused."""
    import logging

    from workbench.config import Config
    from workbench.store.client import make_client, pool_size

    config = Config.from_env(env)
    assert pool_size(config) >= 12
    client = make_client(config)
    caplog.set_level(logging.WARNING, logger="urllib3.connectionpool")
    with ThreadPoolExecutor(12) as pool:
        list(pool.map(lambda _: client.cluster.health(), range(240)))
    full = [r for r in caplog.records if "Connection pool is full" in r.getMessage()]
    assert full == []
    http_pool = client.transport.connection_pool.connections[0].pool
    assert http_pool.num_connections <= pool_size(config)
    assert http_pool.pool.qsize() == pool_size(config)  # every slot back in the pool
