"""The daily loop on the command line, against the real server and worker, on the ESCI data:
``workbench query-set create``, ``judgments import`` (CSV, JSON, qrels), ``search-config
create``, ``experiment run``, ``export run``/``export qrels`` and ``gate``, each run as a
subprocess of the real entry point (``python -m workbench.cli``).

The exported TREC files are read back by ir_measures, whose nDCG@10 (with the workbench's
exponential gains) must equal the values the workbench stored; the gate must fail a deliberately
worse configuration and pass two equivalent ones.
"""

from __future__ import annotations

import csv
import json
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import ir_measures
import pytest
from opensearchpy import OpenSearch

from tests.support.api import Api
from tests.support.data import ESCI, UBI_SAMPLE
from tests.support.processes import REPO, Server, Worker

K = 10
# ESCI labels on the shipped x100 scale -> graded 0..3 (Exact, Substitute, Complement, Irrelevant)
GRADES = {"100.000": 3, "10.000": 2, "1.000": 1, "0.000": 0}
TITLE = {"query": {"match": {"title": "%SearchText%"}}}
# Matches the query against the product description only: a field that is empty for most of the
# catalogue and barely relates to what is asked, so a real (not an empty) but worse ranking.
WORSE = {"query": {"match": {"description": "%SearchText%"}}}


def cli(server: Server, env: dict[str, str], *args: str, timeout: float = 900
        ) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "workbench.cli", *args],
                          env=dict(env, WORKBENCH_URL=server.url, COLUMNS="160"),
                          capture_output=True, text=True, timeout=timeout, cwd=REPO)


def ok(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode == 0, (result.returncode, result.stdout[-3000:],
                                    result.stderr[-3000:])
    return result.stdout


def source(api: Api, collection: str, entity_id: str) -> dict[str, Any]:
    return api.srw("GET", f"/{collection}/{entity_id}").json["hits"]["hits"][0]["_source"]


@pytest.fixture(scope="module")
def loop(server: Server, worker: Worker, env: dict[str, str], api: Api, direct: OpenSearch,
         tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """The ESCI catalogue in a fresh index; the query set and graded judgments created with
    the command line."""
    tmp = tmp_path_factory.mktemp("cli")
    products = f"test-cli-{uuid.uuid4().hex[:6]}"
    ok(subprocess.run(
        [sys.executable, "-m", "workbench.cli", "load-demo", "--products",
         str(UBI_SAMPLE / "ubi_ecommerce_products.json.gz"), "--products-index", products],
        env=env, capture_output=True, text=True, timeout=600, cwd=REPO))

    queries = [q["queryText"] for q in
               json.loads((ESCI / "esci_us_queryset.json").read_text())["querySetQueries"]]
    (tmp / "queries.txt").write_text("\n".join(queries) + "\n")
    query_set = ok(cli(server, env, "query-set", "create", str(tmp / "queries.txt"),
                       "--name", "esci from a text file")).strip()

    judgments = json.loads((ESCI / "esci_us_judgments.json").read_text())["judgmentRatings"]
    graded = {row["query"]: {r["docId"]: GRADES[r["rating"]] for r in row["ratings"]}
              for row in judgments}
    with (tmp / "esci.csv").open("w", newline="") as f:
        writer = csv.writer(f, quoting=csv.QUOTE_NONNUMERIC)
        writer.writerow(["query", "docid", "rating"])
        for query, docs in graded.items():
            writer.writerows([query, doc, grade] for doc, grade in docs.items())
    imported = cli(server, env, "judgments", "import", str(tmp / "esci.csv"),
                   "--name", "esci graded")
    judgment = ok(imported).strip()
    assert "6678 ratings of 150 queries (csv)" in imported.stderr

    def config(name: str, query: dict[str, Any]) -> str:
        return ok(cli(server, env, "search-config", "create", json.dumps(query),
                      "--name", name, "--index", products)).strip()

    yield {"tmp": tmp, "index": products, "querySet": query_set, "judgment": judgment,
           "queries": queries, "graded": graded,
           "title": config("cli title", TITLE), "title_again": config("cli title again", TITLE),
           "worse": config("cli description", WORSE)}
    direct.indices.delete(index=products, ignore=[404])


def test_query_set_from_a_text_file(api: Api, loop: dict[str, Any]) -> None:
    stored = source(api, "query_sets", loop["querySet"])
    assert [q["queryText"] for q in stored["querySetQueries"]] == loop["queries"]


def test_query_set_from_ndjson_keeps_custom_fields(server: Server, env: dict[str, str],
                                                   api: Api, loop: dict[str, Any]) -> None:
    path = loop["tmp"] / "with-answers.ndjson"
    path.write_text('{"queryText": "tv stand", "referenceAnswer": "a low cabinet"}\n'
                    '{"queryText": "red shoes"}\n')
    query_set = ok(cli(server, env, "query-set", "create", str(path), "--name", "ndjson",
                       "--description", "with reference answers")).strip()
    stored = source(api, "query_sets", query_set)
    texts = [q["queryText"] for q in stored["querySetQueries"]]
    assert texts[0].startswith("tv stand") and texts[1] == "red shoes"
    assert "a low cabinet" in json.dumps(stored["querySetQueries"][0])


def test_csv_import_stores_every_rating(api: Api, loop: dict[str, Any]) -> None:
    stored = source(api, "judgments", loop["judgment"])
    assert stored["status"] == "COMPLETED"
    got = {row["query"]: {r["docId"]: float(r["rating"]) for r in row["ratings"]}
           for row in stored["judgmentRatings"]}
    assert got == {q: {d: float(g) for d, g in docs.items()} for q, docs in loop["graded"].items()}


def test_json_and_qrels_imports_match_the_csv(server: Server, env: dict[str, str], api: Api,
                                              loop: dict[str, Any]) -> None:
    tmp: Path = loop["tmp"]
    some = dict(list(loop["graded"].items())[:5])
    flat = [{"query": q, "docId": d, "rating": g} for q, docs in some.items()
            for d, g in docs.items()]
    (tmp / "flat.json").write_text(json.dumps(flat))
    topics = {f"t{n}": q for n, q in enumerate(some)}
    (tmp / "topics.tsv").write_text("".join(f"{qid}\t{q}\n" for qid, q in topics.items()))
    (tmp / "some.qrels").write_text("".join(
        f"{qid} 0 {d} {g}\n" for qid, q in topics.items() for d, g in some[q].items()))
    expected = {q: {d: float(g) for d, g in docs.items()} for q, docs in some.items()}
    for args in (["flat.json"], ["some.qrels", "--topics", str(tmp / "topics.tsv")]):
        result = cli(server, env, "judgments", "import", str(tmp / args[0]), *args[1:],
                     "--name", f"from {args[0]}")
        judgment = ok(result).strip()
        stored = source(api, "judgments", judgment)
        assert {row["query"]: {r["docId"]: float(r["rating"]) for r in row["ratings"]}
                for row in stored["judgmentRatings"]} == expected
    # Exported with the same topics, the qrels come back as they went in.
    ok(cli(server, env, "export", "qrels", "--judgment", judgment, "--topics",
           str(tmp / "topics.tsv"), "--out", str(tmp / "again.qrels")))
    assert sorted((tmp / "again.qrels").read_text().splitlines()) == sorted(
        (tmp / "some.qrels").read_text().splitlines())
    missing = cli(server, env, "judgments", "import", str(tmp / "some.qrels"), "--name", "x")
    assert missing.returncode == 2 and "--topics" in missing.stderr


def test_search_config_from_a_file_with_the_whole_body(server: Server, env: dict[str, str],
                                                       api: Api, loop: dict[str, Any]) -> None:
    path = loop["tmp"] / "config.json"
    path.write_text(json.dumps({"name": "from a file", "index": loop["index"], "query": TITLE}))
    stored = source(api, "search_configurations",
                    ok(cli(server, env, "search-config", "create", str(path))).strip())
    assert stored["name"] == "from a file" and json.loads(stored["query"]) == TITLE
    bad = cli(server, env, "search-config", "create", '{"match_all": {}}', "--name", "x")
    assert bad.returncode == 2 and "missing index" in bad.stderr


def test_experiment_run_prints_the_summary_and_exports_match_ir_measures(
        server: Server, env: dict[str, str], api: Api, loop: dict[str, Any]) -> None:
    result = cli(server, env, "experiment", "run", "--query-set", loop["querySet"],
                 "--config", loop["title"], "--config", loop["worse"],
                 "--judgments", loop["judgment"], "--size", str(K))
    table = ok(result)
    assert "cli title" in table and "cli description" in table and f"NDCG@{K}" in table
    assert f"HitRate@{K}" in table
    experiment_id = result.stderr.split("experiment ", 1)[1].split()[0]
    summary = json.loads(ok(cli(server, env, "experiment", "summary", experiment_id, "--json")))
    assert summary["experimentId"] == experiment_id and summary["status"] == "COMPLETED"

    tmp: Path = loop["tmp"]
    ok(cli(server, env, "export", "run", "--experiment", experiment_id,
           "--out", str(tmp / "{name}.run"), "--topics-out", str(tmp / "run-topics.tsv")))
    ok(cli(server, env, "export", "qrels", "--experiment", experiment_id,
           "--out", str(tmp / "esci.qrels")))
    run_lines = (tmp / "cli_title.run").read_text().splitlines()
    assert run_lines[0].split()[1] == "Q0" and run_lines[0].split()[5] == "cli_title"

    # The workbench's NDCG uses exponential gains 2^g - 1; ir_measures takes them as a gain map.
    ndcg = ir_measures.nDCG(gains={g: 2 ** g - 1 for g in range(4)}) @ K
    qrels = list(ir_measures.read_trec_qrels(str(tmp / "esci.qrels")))
    assert len(qrels) == 6678
    topics = dict(line.split("\t") for line in (tmp / "run-topics.tsv").read_text().splitlines())
    stored = {e["searchText"]: e for e in _evaluations(api, experiment_id)
              if e["searchConfigurationId"] == loop["title"]}
    per_query = {m.query_id: m.value for m in ir_measures.iter_calc(
        [ndcg], qrels, ir_measures.read_trec_run(str(tmp / "cli_title.run")))}
    assert len(stored) > 100
    for qid, value in per_query.items():
        if topics.get(qid) not in stored:  # no hits: no evaluation result, 0 for ir_measures
            assert value == 0.0
            continue
        workbench = next(v["value"] for v in stored[topics[qid]]["metrics"]
                         if v["metric"] == f"NDCG@{K}")
        assert abs(value - workbench) <= 0.005 + 1e-9, (topics[qid], value, workbench)
    title_summary = next(c for c in summary["configurations"]
                         if c["searchConfigurationId"] == loop["title"])
    stats = title_summary["metrics"][f"NDCG@{K}"]
    assert abs(sum(per_query.values()) / stats["n"] - stats["mean"]) <= 0.005


def _evaluations(api: Api, experiment_id: str) -> list[dict[str, Any]]:
    api.call("POST", "/search-relevance-evaluation-result/_refresh")
    reply = api.call("POST", "/search-relevance-evaluation-result/_search", {
        "query": {"term": {"experimentId": experiment_id}}, "size": 10_000})
    return [h["_source"] for h in reply.json["hits"]["hits"]]


def test_gate_fails_a_real_regression(server: Server, env: dict[str, str],
                                      loop: dict[str, Any]) -> None:
    result = cli(server, env, "gate", "--baseline", loop["title"], "--candidate", loop["worse"],
                 "--query-set", loop["querySet"], "--judgments", loop["judgment"],
                 "--metric", "NDCG@10", "--margin", "0.01", "--alpha", "0.05")
    print(result.stdout)
    assert result.returncode == 1, (result.stdout, result.stderr[-2000:])
    assert result.stdout.startswith("workbench gate FAIL: NDCG@10 dropped by")
    assert "worst queries" in result.stdout


def test_gate_passes_a_tie(server: Server, env: dict[str, str], loop: dict[str, Any]) -> None:
    result = cli(server, env, "gate", "--baseline", loop["title"],
                 "--candidate", loop["title_again"], "--query-set", loop["querySet"],
                 "--judgments", loop["judgment"])
    print(result.stdout)
    assert result.returncode == 0, (result.stdout, result.stderr[-2000:])
    assert result.stdout.startswith("workbench gate PASS: NDCG@10 did not drop (delta +0.0000)")
    experiment_id = result.stdout.rsplit("experiment ", 1)[1].split()[0]
    # Reusing the finished experiment gives the same verdict without running anything.
    again = cli(server, env, "gate", "--baseline", loop["title"],
                "--candidate", loop["title_again"], "--experiment", experiment_id)
    assert again.returncode == 0 and again.stdout == result.stdout
    hits = cli(server, env, "gate", "--baseline", loop["title"], "--candidate",
               loop["title_again"], "--experiment", experiment_id, "--metric", "HitRate@10")
    assert hits.returncode == 0, (hits.stdout, hits.stderr[-2000:])
    assert hits.stdout.startswith("workbench gate PASS: HitRate@10 did not drop (delta +0.0000)")


def test_gate_usage_and_infrastructure_errors_exit_2(server: Server, env: dict[str, str],
                                                     loop: dict[str, Any]) -> None:
    no_inputs = cli(server, env, "gate", "--baseline", loop["title"], "--candidate",
                    loop["worse"])
    assert no_inputs.returncode == 2 and "--query-set" in no_inputs.stderr
    bad_metric = cli(server, env, "gate", "--baseline", loop["title"], "--candidate",
                     loop["worse"], "--query-set", loop["querySet"], "--judgments",
                     loop["judgment"], "--metric", "NDCG@7", "--size", "10")
    assert bad_metric.returncode == 2 and "NDCG@7" in bad_metric.stderr.splitlines()[-1]
    down = cli(server, env, "gate", "--baseline", "a", "--candidate", "b", "--query-set", "q",
               "--judgments", "j", "--url", "http://127.0.0.1:9")
    assert down.returncode == 2 and "cannot reach the workbench" in down.stderr
    assert cli(server, env, "gate", "--candidate", "b").returncode == 2  # argparse


def test_gate_without_any_matching_judgment_gives_no_verdict(
        server: Server, env: dict[str, str], loop: dict[str, Any]) -> None:
    path = loop["tmp"] / "elsewhere.csv"
    path.write_text("a query of no query set,B000000000,3\n")
    elsewhere = ok(cli(server, env, "judgments", "import", str(path), "--name", "elsewhere"))
    result = cli(server, env, "gate", "--baseline", loop["title"], "--candidate", loop["worse"],
                 "--query-set", loop["querySet"], "--judgments", elsewhere.strip())
    assert result.returncode == 2, (result.stdout, result.stderr[-2000:])
    assert "no judgment" in result.stderr.splitlines()[-1]


def test_experiment_run_pairwise_and_hybrid(server: Server, env: dict[str, str], api: Api,
                                            loop: dict[str, Any]) -> None:
    pairwise = cli(server, env, "experiment", "run", "--type", "pairwise",
                   "--query-set", loop["querySet"], "--config", loop["title"],
                   "--config", loop["worse"], "--size", str(K))
    table = ok(pairwise)
    print(table)
    assert "PAIRWISE_COMPARISON · COMPLETED" in table and "jaccard" in table

    path = loop["tmp"] / "few.txt"
    path.write_text("\n".join(loop["queries"][:5]) + "\n")
    few = ok(cli(server, env, "query-set", "create", str(path), "--name", "five")).strip()
    hybrid_query = {"query": {"hybrid": {"queries": [{"match": {"title": "%SearchText%"}},
                                                     {"match": {"description": "%SearchText%"}}]}}}
    hybrid = ok(cli(server, env, "search-config", "create", json.dumps(hybrid_query),
                    "--name", "cli hybrid", "--index", loop["index"])).strip()
    result = cli(server, env, "experiment", "run", "--type", "hybrid", "--query-set", few,
                 "--config", hybrid, "--judgments", loop["judgment"], "--size", str(K))
    table = ok(result)
    print(table)
    assert "HYBRID_OPTIMIZER · COMPLETED" in table and "best" in table
    experiment_id = result.stderr.split("experiment ", 1)[1].split()[0]
    refused = cli(server, env, "export", "run", "--experiment", experiment_id,
                  "--out", str(loop["tmp"] / "hybrid.run"))
    assert refused.returncode == 2 and "{variant}" in refused.stderr
    runs = loop["tmp"] / "hybrid-runs"
    runs.mkdir()
    exported = cli(server, env, "export", "run", "--experiment", experiment_id,
                   "--out", str(runs / "{variant}.run"), "--topics-out", str(runs / "topics"))
    assert "82 variant runs of 'cli hybrid'" in ok(exported) + exported.stderr
    files = sorted(runs.glob("*.run"))
    assert len(files) == 82
    # One variant's file holds exactly the rankings stored for that variant.
    topics = dict(line.split("\t") for line in (runs / "topics").read_text().splitlines())
    wanted = "combination=arithmetic_mean, normalization=min_max, weights=0.3;0.7"
    stored = {e["searchText"]: e["documentIds"] for e in _evaluations(api, experiment_id)
              if e.get("experimentVariantParameters") == wanted}
    lines = (runs / "combination_arithmetic_mean_normalization_min_max_weights_0.3_0.7.run"
             ).read_text().splitlines()
    got: dict[str, list[str]] = {}
    for line in lines:
        qid, _, doc_id, rank, _, _ = line.split()
        got.setdefault(topics[qid], []).append(doc_id)
        assert int(rank) == len(got[topics[qid]])
    assert got == stored and len(stored) == 5


def test_a_failed_experiment_exits_1_and_fails_the_gate_with_2(
        server: Server, env: dict[str, str], loop: dict[str, Any]) -> None:
    missing = f"no-such-pipeline-{uuid.uuid4().hex[:6]}"
    broken = ok(cli(server, env, "search-config", "create", json.dumps(TITLE), "--name",
                    "cli broken", "--index", loop["index"], "--pipeline", missing)).strip()
    run = cli(server, env, "experiment", "run", "--query-set", loop["querySet"],
              "--config", broken, "--judgments", loop["judgment"])
    assert run.returncode == 1, (run.stdout, run.stderr[-2000:])
    assert f"ended ERROR: Search pipeline [{missing}]" in run.stderr
    gate = cli(server, env, "gate", "--baseline", loop["title"], "--candidate", broken,
               "--query-set", loop["querySet"], "--judgments", loop["judgment"])
    assert gate.returncode == 2 and "ended ERROR" in gate.stderr


def test_demo_runs_a_first_experiment(server: Server, env: dict[str, str], worker: Worker,
                                      direct: OpenSearch) -> None:
    """`workbench demo`: the shipped catalogue indexed through the pass-through, the ESCI query
    set and judgments, two configurations, a pointwise experiment, its summary and verdict."""
    index = f"test-demo-{uuid.uuid4().hex[:6]}"
    try:
        result = cli(server, env, "demo", "--index", index)
        shown = ok(result)
        assert f"catalogue: {index} holds the 6764 demo products" in result.stderr
        assert "title and bullets vs title match (paired over queries)" in shown
        # the verdict the README shows (its doc test runs the same command on the demo index)
        readme = (REPO / "README.md").read_text().splitlines()
        assert shown.rstrip().splitlines()[-1] == next(
            line for line in readme if line.startswith("verdict: title and bullets"))
        assert direct.count(index=index)["count"] == 6764
        again = cli(server, env, "demo", "--index", index)
        assert ok(again).rstrip().splitlines()[-1] == shown.rstrip().splitlines()[-1]
        assert f"catalogue: {index} holds the 6764 demo products" in again.stderr
        assert again.stderr.count("search configuration") == 2  # created afresh
    finally:
        direct.indices.delete(index=index, ignore=[404])
