"""Checks of exact per-query values and of the judge-aware summary on the ESCI experiments of
test_esci_end_to_end.

* The exact-vs-rounded table (docs/significance.md): title ``match`` against a ``multi_match``
  on title^2 and bullet_points, NDCG@10 over the 150 queries, from the exact values the run
  stores, then from the rounded ones alone (as results written before exact values were kept).
* The judge-aware summary: ``token_overlap`` (a reference judge that agrees poorly with people)
  judges every query; people (ESCI's labels) rate the pool of a 30-query ``_label_sample``,
  imported with the command line; every interval is checked against ``ppi-python`` on values
  recomputed here by hand from the stored rankings; the gate decides on the PPI interval.
"""

from __future__ import annotations

import csv
import io
import json
import math
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from opensearchpy import OpenSearch
from ppi_py import ppi_mean_ci

from tests.integration.test_cli_loop import cli, ok
from tests.integration.test_experiments import EVALUATIONS, by_experiment, create, wait
from tests.support.api import Api
from tests.support.processes import REPO, Server

K = 10
NDCG = f"NDCG@{K}"


def reference_ndcg(doc_ids: list[str], ratings: dict[str, float]) -> float:
    """NDCG@10 with exponential gain and log2 discount, by hand."""
    dcg = sum((2 ** ratings.get(d, 0.0) - 1) / math.log2(i + 2) for i, d in enumerate(doc_ids[:K]))
    ideal = sorted(ratings.values(), reverse=True)[:K]
    idcg = sum((2 ** r - 1) / math.log2(i + 2) for i, r in enumerate(ideal))
    return dcg / idcg if idcg > 0 else 0.0


def _comparison(summary: dict[str, Any], candidate: str, metric: str = NDCG) -> dict[str, Any]:
    return next(c for c in summary["comparisons"]
                if c["candidate"] == candidate and c["metric"] == metric)


# MAP@10's t-test p and whether it is significant, from the exact and from the rounded values
# (docs/significance.md says them below its table).
EXACT_MAP = (0.0358, True)
ROUNDED_MAP = (0.0851, False)


def _row(ndcg: dict[str, Any]) -> list[float]:
    """A row of the exact-vs-rounded table: NDCG@10's mean delta, wins, losses, ties, t-test p
    and Wilcoxon p, as the page rounds them."""
    return [round(ndcg["meanDelta"], 5), ndcg["wins"], ndcg["losses"], ndcg["ties"],
            round(ndcg["tTest"]["pValue"], 4), round(ndcg["wilcoxon"]["pValue"], 4)]


def _map(comparison: dict[str, Any]) -> tuple[float, bool]:
    return round(comparison["tTest"]["pValue"], 4), comparison["significant"]


def documented_rounding_table() -> dict[str, list[float]]:
    """docs/significance.md's exact-vs-rounded table: first cell -> the numbers of the row."""
    text = (REPO / "docs" / "significance.md").read_text()
    rows = re.findall(r"^\| (exact per-query values|rounded to two decimals) \|(.*)\|$", text,
                      flags=re.M)
    return {label: [float(x) for x in re.findall(r"[-+]?\d+\.?\d*", cells)]
            for label, cells in rows}


def check_exact_and_rounded_table(api: Api, esci: dict[str, Any], direct: OpenSearch) -> None:
    experiment_id = create(api, {"type": "POINTWISE_EVALUATION", "querySetId": esci["querySetId"],
                                 "searchConfigurationList": [esci["title"], esci["bullets"]],
                                 "judgmentList": [esci["judgment"]], "size": K})
    assert wait(api, f"/experiments/{experiment_id}", timeout=600)["status"] == "COMPLETED"
    stored = by_experiment(direct, EVALUATIONS, experiment_id)
    for doc in stored:  # the plugin's field unchanged, the exact one beside it
        rounded = {m["metric"]: m["value"] for m in doc["metrics"]}
        exact = {m["metric"]: m["value"] for m in doc["exactMetrics"]}
        assert list(rounded) == list(exact)
        assert all(abs(rounded[name] - exact[name]) <= 0.005 + 1e-12
                   and rounded[name] == round(rounded[name], 2) for name in exact), doc
        expected = reference_ndcg(doc["documentIds"], esci["ratings"].get(doc["searchText"], {}))
        assert exact[NDCG] == pytest.approx(expected, abs=1e-12)

    reply = api.srw("GET", f"/experiments/{experiment_id}/_summary")
    assert reply.status == 200, reply.data[:500]
    exact = _comparison(reply.json, esci["bullets"])
    assert [w["code"] for w in reply.json["warnings"] if w["code"] == "rounded_values"] == []
    # The table of docs/significance.md, first row (MAP@10's p beneath it).
    table = documented_rounding_table()
    assert _row(exact) == table["exact per-query values"], _row(exact)
    exact_map = _map(_comparison(reply.json, esci["bullets"], f"MAP@{K}"))
    assert exact_map == EXACT_MAP, exact_map

    # Results written before exact values were kept: the summary falls back, and says so.
    direct.update_by_query(index=EVALUATIONS, refresh=True, body={
        "query": {"term": {"experimentId": experiment_id}},
        "script": {"source": "ctx._source.remove('exactMetrics')", "lang": "painless"}})
    reply = api.srw("GET", f"/experiments/{experiment_id}/_summary")
    rounded = _comparison(reply.json, esci["bullets"])
    assert _row(rounded) == table["rounded to two decimals"], _row(rounded)
    rounded_map = _map(_comparison(reply.json, esci["bullets"], f"MAP@{K}"))
    assert rounded_map == ROUNDED_MAP, rounded_map
    warning = next(w for w in reply.json["warnings"] if w["code"] == "rounded_values")
    assert warning["results"] == len(stored) and warning["level"] == "warning"


def _evaluated(direct: OpenSearch, experiment_id: str, queries: list[str]
               ) -> dict[str, dict[str, tuple[list[str], float]]]:
    """config -> query -> (stored top-k, stored exact NDCG@10); ([], 0) for a query without
    hits."""
    out: dict[str, dict[str, tuple[list[str], float]]] = {}
    for doc in by_experiment(direct, EVALUATIONS, experiment_id):
        exact = {m["metric"]: m["value"] for m in doc["exactMetrics"]}
        out.setdefault(doc["searchConfigurationId"], {})[doc["searchText"]] = (
            doc["documentIds"], exact[NDCG])
    return {c: {q: by_query.get(q, ([], 0.0)) for q in queries} for c, by_query in out.items()}


def documented_example() -> dict[str, list[float]]:
    """The worked example's table in docs/significance.md: label -> its numbers."""
    text = (REPO / "docs" / "significance.md").read_text()
    start = text.index("<!-- worked example -->")
    rows = {}
    for line in text[start:].splitlines()[3:]:
        if not line.startswith("| `"):
            break
        cells = [c.strip() for c in line.strip("|").split("|")]
        numbers = [float(x) for x in re.findall(r"[-+]?\d+\.\d+|[-+]?\d+", " ".join(cells[1:]))]
        rows[cells[0].strip("`")] = numbers
    return rows


def worked_example(section: dict[str, Any], names: dict[str, str]) -> dict[str, list[float]]:
    """The rows of docs/significance.md's worked example: label -> [judge mean, humans mean,
    PPI estimate, CI low, CI high, judge bias (rounded to 3), effective labelled queries
    (rounded to 1)]."""
    rows: dict[str, list[float]] = {}

    def row(figs: dict[str, Any]) -> list[float]:
        return [*(round(v, 3) for v in (
            figs["judge"]["mean"], figs["humans"]["mean"], figs["ppi"]["estimate"],
            figs["ppi"]["ci"][0], figs["ppi"]["ci"][1], figs["bias"])),
            round(figs["effectiveLabelledQueries"], 1)]

    for config in section["configurations"]:
        if config["searchConfigurationId"] in names:
            rows[names[config["searchConfigurationId"]]] = row(config["metrics"][NDCG])
    for comparison in section["comparisons"]:
        if comparison["metric"] == NDCG and comparison["candidate"] in names:
            rows[f"{names[comparison['candidate']]} - {names[comparison['baseline']]}"] = \
                row(comparison)
    return rows


def check_judge_aware_summary(api: Api, esci: dict[str, Any], direct: OpenSearch, server: Server,
                              env: dict[str, str], tmp: Path) -> None:
    queries: list[str] = esci["queries"]
    with_refs = api.srw("PUT", "/query_sets", {"name": "esci with reference answers",
                                               "querySetQueries": [
                                                   {"queryText": q, "referenceAnswer": q}
                                                   for q in queries]})
    assert with_refs.status == 200, with_refs.data
    query_set = with_refs.json["query_set_id"]
    configs = [esci["title"], esci["bullets"], esci["title_again"], esci["worse"]]
    reply = api.srw("PUT", "/judgments", {
        "name": "token overlap judge", "type": "REFERENCE_JUDGMENT", "judge": "token_overlap",
        "querySetId": query_set, "searchConfigurationList": configs, "size": K,
        "contextFields": ["title"]})
    assert reply.status == 200, reply.data
    judge = reply.json["judgment_id"]
    assert wait(api, f"/judgments/{judge}", timeout=600)["status"] == "COMPLETED"
    experiment_id = create(api, {"type": "POINTWISE_EVALUATION", "querySetId": query_set,
                                 "searchConfigurationList": configs, "judgmentList": [judge],
                                 "size": K})
    assert wait(api, f"/experiments/{experiment_id}", timeout=600)["status"] == "COMPLETED"
    runs = _evaluated(direct, experiment_id, queries)

    # The sample people label: 30 queries drawn uniformly, each with its pool.
    reply = api.srw("GET", f"/experiments/{experiment_id}/_label_sample",
                    params={"queries": 30, "seed": 24, "fields": "title"})
    assert reply.status == 200, reply.data[:500]
    sample = reply.json
    assert sample["strategy"] == "uniform" and sample["seed"] == 24
    assert sample["queries"] == {"total": 150, "sampled": 30}
    chosen = sample["sampledQueries"]
    assert len(set(chosen)) == 30 and chosen == sorted(chosen, key=queries.index)
    for query in chosen:
        pooled = [r["docId"] for r in sample["rows"] if r["query"] == query]
        union = {d for c in configs for d in runs[c][query][0]}
        assert sorted(pooled) == sorted(union), query
    assert all(r["rating"] is None and isinstance(r["fields"]["title"], str)
               for r in sample["rows"])
    assert sample["documents"] == len(sample["rows"])
    again = api.srw("GET", f"/experiments/{experiment_id}/_label_sample",
                    params={"queries": 30, "seed": 24, "format": "csv"})
    lines = again.data.decode().splitlines()
    assert lines[0] == "query,docId,rating" and len(lines) == 1 + len(sample["rows"])

    # People rate every row (here: ESCI's labels, 0 where ESCI has none) in the CLI's file.
    path = tmp / "labels.csv"
    result = cli(server, env, "experiment", "label-sample", experiment_id, "--queries", "30",
                 "--seed", "24", "--fields", "title", "--out", str(path))
    ok(result)
    message = [line for line in result.stderr.splitlines() if "━" not in line]  # no bar
    said = " ".join(" ".join(message).split()).replace(str(path), "labels.csv")
    assert said.startswith(f"30 of 150 queries, {len(sample['rows'])} documents to rate (seed "
                           "24) -> labels.csv; fill in the rating column"), said
    # docs/significance.md shows this very line
    assert f"{said.split(';')[0]};" in (REPO / "docs" / "significance.md").read_text(), said
    rows = list(csv.reader(io.StringIO(path.read_text())))
    assert rows[0] == ["query", "docId", "rating", "title"]
    human: dict[str, dict[str, float]] = {}
    for row in rows[1:]:
        rating = esci["ratings"].get(row[0], {}).get(row[1], 0.0)
        row[2] = str(rating)
        human.setdefault(row[0], {})[row[1]] = rating
    with path.open("w", newline="") as f:
        csv.writer(f).writerows(rows)
    humans = ok(cli(server, env, "judgments", "import", str(path), "--name", "people")).strip()

    reply = api.srw("GET", f"/experiments/{experiment_id}/_summary",
                    params={"humanJudgments": humans, "interval": "normal"})
    assert reply.status == 200, reply.data[:500]
    section = reply.json["humanJudgments"]
    assert section["interval"] == "normal"
    assert section["queries"] == {"total": 150, "labelled": 30, "unlabelled": 120}
    assert section["judgmentId"] == humans and section["name"] == "people"
    labelled = [queries.index(q) for q in chosen]
    others = [i for i in range(150) if i not in set(labelled)]

    def values(config: str) -> tuple[np.ndarray, np.ndarray]:
        judge = np.array([runs[config][q][1] for q in queries])
        people = np.array([reference_ndcg(runs[config][queries[i]][0], human[queries[i]])
                           for i in labelled])
        return judge, people

    for config in section["configurations"]:
        judge, people = values(config["searchConfigurationId"])
        figs = config["metrics"][NDCG]
        low, high = ppi_mean_ci(people, judge[labelled], judge[others], alpha=0.05)
        assert figs["ppi"]["ci"] == pytest.approx([float(low[0]), float(high[0])], abs=1e-9)
        assert figs["judge"]["mean"] == pytest.approx(judge.mean(), abs=1e-12)
        assert figs["humans"]["mean"] == pytest.approx(people.mean(), abs=1e-12)
        assert figs["bias"] == pytest.approx(people.mean() - judge[labelled].mean(), abs=1e-12)
        assert config["humanCoverage"]["share"] == 1.0  # people rated the whole pool
    base_judge, base_people = values(esci["title"])
    # (the tie, title_again, has no variance at all: ppi-python answers NaN; the summary 0, below)
    for candidate in (esci["bullets"], esci["worse"]):
        judge, people = values(candidate)
        comparison = _comparison(section, candidate)
        delta_judge, delta_people = judge - base_judge, people - base_people
        low, high = ppi_mean_ci(delta_people, delta_judge[labelled], delta_judge[others],
                                alpha=0.05)
        assert comparison["ppi"]["ci"] == pytest.approx([float(low[0]), float(high[0])],
                                                        abs=1e-9)
    # The default interval: the same estimates, sample variances and Student's t (n - 1 = 29).
    default = api.srw("GET", f"/experiments/{experiment_id}/_summary",
                      params={"humanJudgments": humans}).json["humanJudgments"]
    assert default["interval"] == "t"
    for normal, t in zip(section["configurations"], default["configurations"], strict=True):
        a, b = normal["metrics"][NDCG]["ppi"], t["metrics"][NDCG]["ppi"]
        assert (b["estimate"], b["lambda"]) == (a["estimate"], a["lambda"])
        assert b["ci"][1] - b["ci"][0] > a["ci"][1] - a["ci"][0]
    tie = _comparison(section, esci["title_again"])
    assert tie["ppi"]["ci"] == [0.0, 0.0] and tie["significant"] is False
    worse = _comparison(section, esci["worse"])
    assert worse["ppi"]["ci"][1] < 0 and worse["significant"] is True

    # The report carries the corrected figures (Markdown and HTML share its tables).
    for fmt in ("md", "html"):
        report = api.srw("GET", f"/experiments/{experiment_id}/_report",
                         params={"humanJudgments": humans, "format": fmt})
        assert report.status == 200, report.data[:300]
        assert (f"{NDCG} corrected by human labels (PPI++, t intervals): 30 of 150 queries "
                "labelled in people") in report.data.decode()

    # The command line shows the section; the gate decides on the PPI interval.
    shown = ok(cli(server, env, "experiment", "summary", experiment_id, "--human-judgments",
                   humans))
    assert f"{NDCG} corrected by human labels (PPI++): 30 of 150 queries labelled in people" \
        in shown
    failed = cli(server, env, "gate", "--experiment", experiment_id, "--baseline", esci["title"],
                 "--candidate", esci["worse"], "--human-judgments", humans)
    assert failed.returncode == 1, (failed.stdout, failed.stderr[-2000:])
    assert failed.stdout.startswith(f"workbench gate FAIL: {NDCG} dropped by")
    assert "after correcting with human labels" in failed.stdout
    assert "humans     PPI++ delta" in failed.stdout
    passed = cli(server, env, "gate", "--experiment", experiment_id, "--baseline", esci["title"],
                 "--candidate", esci["title_again"], "--human-judgments", humans)
    assert passed.returncode == 0, (passed.stdout, passed.stderr[-2000:])
    assert passed.stdout.startswith(f"workbench gate PASS: {NDCG} did not drop")

    # Bad input: a clear 4xx naming the parameter.
    missing = api.srw("GET", f"/experiments/{experiment_id}/_summary",
                      params={"humanJudgments": "no-such-list"})
    assert missing.status == 400
    assert missing.reason == ("humanJudgments [no-such-list] is not a judgment list (no "
                              "judgment has this id)")
    empty = api.srw("GET", f"/experiments/{experiment_id}/_summary",
                    params={"humanJudgments": " "})
    assert (empty.status, empty.reason) == (
        400, "humanJudgments is empty; it names the judgment list people made")
    wide = api.srw("GET", f"/experiments/{experiment_id}/_summary",
                   params={"humanJudgments": humans, "interval": "wide"})
    assert (wide.status, wide.reason) == (
        400, "interval [wide] is not supported; expected one of [t, normal]")
    elsewhere = api.srw("PUT", "/judgments", {
        "name": "other queries", "type": "IMPORT_JUDGMENT",
        "judgmentRatings": [{"query": "not in the query set",
                             "ratings": [{"docId": "x", "rating": "1"}]}]})
    other = elsewhere.json["judgment_id"]
    wait(api, f"/judgments/{other}")
    none = api.srw("GET", f"/experiments/{experiment_id}/_summary",
                   params={"humanJudgments": other})
    assert none.status == 400
    assert none.reason == (f"humanJudgments [{other}] rates none of the 150 queries of query "
                           f"set [{query_set}]")
    no_budget = api.srw("GET", f"/experiments/{experiment_id}/_label_sample")
    assert no_budget.status == 400
    assert no_budget.reason == "queries is required: how many queries people will label"
    # docs/significance.md's worked example is this run; its last column is the truth: the
    # human-judged mean had people rated the pool of every query (ESCI's labels, 0 without one).
    figures = worked_example(default, names={esci["title"]: "title", esci["worse"]: "description"})
    pooled = {q: {d: esci["ratings"].get(q, {}).get(d, 0.0) for c in configs
                  for d in runs[c][q][0]} for q in queries}
    truth = {c: np.array([reference_ndcg(runs[c][q][0], pooled[q]) for q in queries])
             for c in (esci["title"], esci["worse"])}
    figures["title"].append(round(float(truth[esci["title"]].mean()), 3))
    figures["description"].append(round(float(truth[esci["worse"]].mean()), 3))
    figures["description - title"].append(
        round(float((truth[esci["worse"]] - truth[esci["title"]]).mean()), 3))
    print(json.dumps(figures))
    assert figures == documented_example()
