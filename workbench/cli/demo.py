"""``workbench demo``: a first experiment on the demo data that ships with the package, in one
command, over HTTP against a running workbench (as every daily-loop command).

It indexes the product catalogue through the workbench's pass-through (unless the index already
holds it), creates the ESCI query set and its human judgments, two search configurations (the
title alone, and the title with the bullet points), runs a pointwise experiment and prints its
summary and a one-line verdict. Every entity is created afresh, so a run never depends on an
earlier one; the catalogue index is reused.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Iterator
from typing import Any

from workbench.cli.client import ClientError, WorkbenchClient
from workbench.cli.output import err, out, print_summary, wait_with_progress
from workbench.config import Config
from workbench.demo.load import (
    JUDGMENTS,
    PRODUCTS,
    QUERY_SET,
    product_actions,
    read_json,
    shipped_catalogue_size,
)
from workbench.store.bootstrap import load_spec

METRIC = "NDCG@10"
BATCH = 1000
CONFIGURATIONS = (
    ("title match", {"query": {"match": {"title": "%SearchText%"}}}),
    ("title and bullets", {"query": {"multi_match": {
        "query": "%SearchText%", "fields": ["title^2", "bullet_points"]}}}),
)


def add_command(sub: Any, conn: argparse.ArgumentParser) -> None:
    demo = sub.add_parser("demo", parents=[conn],
                          help="a first experiment on the shipped demo data: load it, compare "
                               "two search configurations, print the verdict")
    demo.add_argument("--index", default="demo-products",
                      help="the catalogue's index (created and filled when it is not complete)")


def run(client: WorkbenchClient, args: argparse.Namespace) -> int:
    _load_products(client, args.index)
    query_set = client.srw("PUT", "/query_sets", dict(read_json(QUERY_SET),
                                                      name="ESCI demo queries"))["query_set_id"]
    err.print(f"query set {query_set}: 150 ESCI queries")
    body = dict(read_json(JUDGMENTS), name="ESCI demo judgments")
    judgments = client.srw("PUT", "/judgments", body)["judgment_id"]
    doc = wait_with_progress(client, "judgments", judgments, "importing judgments",
                             args.timeout)
    if doc.get("status") != "COMPLETED":
        err.print(f"the judgments ended {doc.get('status')}")
        return 1
    err.print(f"judgments {judgments}: 6678 human ratings")
    configs = []
    for name, query in CONFIGURATIONS:
        config = client.srw("PUT", "/search_configurations", {
            "name": name, "index": args.index, "query": json.dumps(query)})
        configs.append(config["search_configuration_id"])
        err.print(f"search configuration {config['search_configuration_id']}: {name}")
    experiment = client.srw("PUT", "/experiments", {
        "type": "POINTWISE_EVALUATION", "querySetId": query_set,
        "searchConfigurationList": configs, "judgmentList": [judgments], "size": 10,
        "description": "workbench demo"})["experiment_id"]
    doc = wait_with_progress(client, "experiments", experiment, "running the experiment",
                             args.timeout)
    if doc.get("status") != "COMPLETED":
        err.print(f"the experiment ended {doc.get('status')}")
        return 1
    summary = client.srw("GET", f"/experiments/{experiment}/_summary",
                         params={"metric": METRIC})
    print_summary(summary, METRIC)
    out.print(verdict(summary), soft_wrap=True, markup=False)
    return 0


def verdict(summary: dict[str, Any]) -> str:
    """One line: did the candidate change the metric, and can the queries tell?"""
    comparison = next(c for c in summary["comparisons"] if c["metric"] == METRIC)
    names = {c["searchConfigurationId"]: c.get("name") for c in summary["configurations"]}
    delta, p = comparison["meanDelta"], comparison["tTest"]["pValue"]
    head = (f"verdict: {names[comparison['candidate']]} vs {names[comparison['baseline']]}, "
            f"{METRIC} {delta:+.4f} over {comparison['n']} queries (wins {comparison['wins']}, "
            f"losses {comparison['losses']}); paired t-test p = {p:.3g}: ")
    if comparison["significant"]:
        return head + ("significantly better" if delta > 0 else "significantly worse")
    return head + f"not significant at alpha {summary['alpha']}, no evidence of a difference"


def _load_products(client: WorkbenchClient, index: str) -> int:
    """Index the shipped catalogue unless ``index`` already holds all of it; its count."""
    expected = shipped_catalogue_size()
    counted = client.call("GET", f"/{index}/_count", ok=(200, 404)) or {}
    if counted.get("count") == expected:  # indexed before: reused
        err.print(f"catalogue: {index} holds the {expected} demo products")
        return expected
    client.call("DELETE", f"/{index}", ok=(200, 404))
    # where this installation keeps its mappings (WORKBENCH_INDEX_MAPPINGS_DIR: an image's)
    spec = load_spec(Config.from_env().index_mappings_dir, "demo/ecommerce.json")
    client.call("PUT", f"/{index}", spec.body)
    batch: list[str] = []
    for doc_id, source in _products():
        batch += [json.dumps({"index": {"_id": doc_id}}), json.dumps(source)]
        if len(batch) >= 2 * BATCH:
            _bulk(client, index, batch)
            batch = []
    if batch:
        _bulk(client, index, batch)
    client.call("POST", f"/{index}/_refresh")
    err.print(f"catalogue: {index} holds the {expected} demo products")
    return expected


def _bulk(client: WorkbenchClient, index: str, lines: list[str]) -> None:
    answer = client.bulk(index, "\n".join(lines) + "\n")
    if answer.get("errors"):
        failed = next(i for i in answer["items"] if next(iter(i.values())).get("error"))
        raise ClientError(f"indexing the catalogue failed: {json.dumps(failed)[:300]}")


def _products() -> Iterator[tuple[str, dict[str, Any]]]:
    for action in product_actions(PRODUCTS, ""):
        yield str(action["_id"]), action["_source"]
