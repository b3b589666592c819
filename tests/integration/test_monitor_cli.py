"""``workbench monitor`` against the real server and worker: a monitor created from flags,
listed, run twice (the second run rates nothing anew), its runs as a table whose figures are
the runs route's, its report written in the three formats (each equal to the route's answer),
bad input answered with the server's 400 naming the field (exit 2), and a run that ends ERROR
waited for with exit 1 and its reason."""

from __future__ import annotations

import base64
import csv
import io
import json
import re
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from opensearchpy import OpenSearch

from tests.support import browser
from tests.support.api import Api
from tests.support.data import ESCI, UBI_SAMPLE
from tests.support.processes import REPO, Server, Worker
from workbench.store.indices import MONITOR_INDEX

QUERIES = 15


def cli(server: Server, env: dict[str, str], *args: str, cwd: Path = REPO
        ) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "workbench.cli", *args],
                          env=dict(env, WORKBENCH_URL=server.url, COLUMNS="160",
                                   PYTHONPATH=str(REPO)),
                          capture_output=True, text=True, timeout=600, cwd=cwd)


def ok(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode == 0, (result.returncode, result.stdout[-3000:],
                                    result.stderr[-3000:])
    return result.stdout


@pytest.fixture(scope="module")
def setup(server: Server, worker: Worker, env: dict[str, str], api: Api, direct: OpenSearch
          ) -> Iterator[dict[str, str]]:
    """A fresh catalogue index, a panel of 15 ESCI queries each its own reference answer, and
    the title search over it."""
    products = f"test-monitor-cli-{uuid.uuid4().hex[:6]}"
    ok(subprocess.run(
        [sys.executable, "-m", "workbench.cli", "load-demo", "--products",
         str(UBI_SAMPLE / "ubi_ecommerce_products.json.gz"), "--products-index", products],
        env=env, capture_output=True, text=True, timeout=600, cwd=REPO))
    texts = [q["queryText"] for q in json.loads(
        (ESCI / "esci_us_queryset.json").read_text())["querySetQueries"][:QUERIES]]
    query_set = api.srw("PUT", "/query_sets", {
        "name": "monitor cli panel", "description": "d", "sampling": "manual",
        "querySetQueries": [{"queryText": q, "referenceAnswer": q} for q in texts]}
    ).json["query_set_id"]
    config = api.srw("PUT", "/search_configurations", {
        "name": "title", "index": products,
        "query": json.dumps({"query": {"match": {"title": "%SearchText%"}}})}
    ).json["search_configuration_id"]
    yield {"querySet": query_set, "config": config}
    direct.indices.delete(index=products, ignore=[404])


@pytest.fixture(scope="module")
def monitor(server: Server, env: dict[str, str], setup: dict[str, str]) -> str:
    result = cli(server, env, "monitor", "create", "--name", "cli watched",
                 "--search-config", setup["config"], "--query-set", setup["querySet"],
                 "--judge", "token_overlap", "--context-fields", "title",
                 "--alert-drop", "0.05")
    monitor_id = ok(result).strip()
    assert re.fullmatch(r"[0-9a-f-]{36}", monitor_id), monitor_id
    assert result.stderr.strip() == f"monitor 'cli watched' watching {setup['config']}"
    return monitor_id


def test_create_stores_the_body_the_flags_make(api: Api, monitor: str,
                                               setup: dict[str, str]) -> None:
    doc = api.srw("GET", f"/monitors/{monitor}").json["hits"]["hits"][0]["_source"]
    assert doc["name"] == "cli watched"
    assert doc["searchConfigurationId"] == setup["config"]
    assert doc["queries"]["querySetId"] == setup["querySet"]
    assert doc["judge"]["judge"] == "token_overlap"
    assert doc["judge"]["contextFields"] == ["title"]
    assert doc["alerts"][0]["metric"] == "NDCG@10"
    assert doc["alerts"][0]["drop"] == 0.05
    assert doc["alerts"][0]["relative"] is False


def test_list_shows_the_monitor(server: Server, env: dict[str, str], monitor: str,
                                setup: dict[str, str]) -> None:
    row = next(line for line in ok(cli(server, env, "monitor", "list")).splitlines()
               if monitor in line)
    cells = [c.strip() for c in row.strip("│ ").split("│")]
    assert cells == [monitor, "cli watched", setup["config"],
                     "panel", "token_overlap", "on demand"]


def _cells(line: str) -> list[str]:
    line = line.replace("┃", "│").strip().strip("│")
    return [c.strip() for c in line.split("│")]


def test_two_runs_and_the_runs_table(server: Server, env: dict[str, str], api: Api,
                                     monitor: str) -> None:
    first = ok(cli(server, env, "monitor", "run", monitor, "--wait"))
    second = ok(cli(server, env, "monitor", "run", monitor, "--wait"))
    runs = api.srw("GET", f"/monitors/{monitor}/runs").json["runs"]
    assert [r["status"] for r in runs] == ["COMPLETED", "COMPLETED"]
    newest, oldest = runs
    assert oldest["rated"]["new"] == oldest["rated"]["pairs"] > 0
    assert newest["rated"]["new"] == 0  # the same queries found the same, rated documents
    assert newest["state"] == "OK"

    def row(run: dict[str, Any]) -> list[str]:
        ndcg, judged = run["metrics"]["NDCG@10"], run["metrics"]["Judged@10"]
        half = (ndcg["ci95"][1] - ndcg["ci95"][0]) / 2
        return [run["timestamp"].replace("T", " ")[:19], run["state"],
                f"{ndcg['mean']:.3f} ±{half:.3f}", f"{judged['mean']:.0%}", str(ndcg["n"]),
                f"{run['rated']['new']} of {run['rated']['pairs']}", "-"]

    table = [line.rstrip() for line in ok(cli(server, env, "monitor", "runs",
                                              monitor)).splitlines()]
    assert table[0] == "2 runs, newest first"
    assert _cells(table[2]) == ["time", "state", "NDCG@10 ±95%", "judged", "queries",
                                "new pairs", "cost"]
    assert [_cells(line) for line in table[4:6]] == [row(newest), row(oldest)]
    assert [_cells(line) for line in first.splitlines()[4:5]] == [row(oldest)]
    assert [_cells(line) for line in second.splitlines()[4:5]] == [row(newest)]


@pytest.mark.parametrize("fmt", ["csv", "md", "html"])
def test_the_report_file_is_the_routes_answer(server: Server, env: dict[str, str], api: Api,
                                              monitor: str, fmt: str, tmp_path: Path) -> None:
    ok(cli(server, env, "monitor", "run", monitor, "--wait"))
    result = cli(server, env, "monitor", "report", monitor, "--format", fmt, cwd=tmp_path)
    ok(result)
    written = (tmp_path / f"monitor-{monitor}.{fmt}").read_text()
    assert written == api.srw("GET", f"/monitors/{monitor}/_report",
                              params={"format": fmt}).text
    runs = api.srw("GET", f"/monitors/{monitor}/runs").json["runs"]
    if fmt == "csv":
        rows = list(csv.DictReader(io.StringIO(written)))
        ndcg = [r for r in rows if r["metric"] == "NDCG@10"]
        assert [r["runId"] for r in ndcg] == [r["id"] for r in reversed(runs)]
        assert [float(r["mean"]) for r in ndcg] == [r["metrics"]["NDCG@10"]["mean"]
                                                    for r in reversed(runs)]
    elif fmt == "md":
        assert written.startswith("# Monitor cli watched\n")
        assert written.count("\n| 20") == len(runs)
    else:
        images = re.findall(r'src="data:image/png;base64,([A-Za-z0-9+/=]+)"', written)
        assert len(images) == 1
        assert base64.b64decode(images[0])[:8] == b"\x89PNG\r\n\x1a\n"
        assert "<script" not in written and "http://" not in written  # self-contained
        rendered = browser.render(tmp_path / f"monitor-{monitor}.html")
        assert rendered.title == "Monitor cli watched"
        assert len(rendered.images) == 1
        assert rendered.images[0]["complete"], rendered.images
        assert int(rendered.images[0]["naturalWidth"]) > 300, rendered.images
        assert browser.colours(rendered.screenshot) > 20  # drawn, not a blank page


def test_bad_input_is_the_servers_400_naming_the_field(server: Server, env: dict[str, str],
                                                       setup: dict[str, str]) -> None:
    result = cli(server, env, "monitor", "create", "--name", "bad k",
                 "--search-config", setup["config"], "--query-set", setup["querySet"],
                 "--judge", "token_overlap", "--k", "0")
    assert result.returncode == 2
    assert result.stderr.startswith("workbench monitor: PUT /_plugins/_search_relevance/"
                                    "monitors answered 400: "), result.stderr
    assert "k" in result.stderr.split("answered 400: ", 1)[1]


def test_an_unknown_monitor_is_a_404(server: Server, env: dict[str, str]) -> None:
    result = cli(server, env, "monitor", "runs", "no-such-monitor")
    assert result.returncode == 2
    assert "answered 404" in result.stderr, result.stderr


def test_a_run_that_ends_error_exits_1_with_its_reason(
        server: Server, env: dict[str, str], api: Api, direct: OpenSearch,
        setup: dict[str, str]) -> None:
    monitor = ok(cli(server, env, "monitor", "create", "--name", "cli broken",
                     "--search-config", setup["config"], "--query-set", setup["querySet"],
                     "--judge", "token_overlap")).strip()
    direct.update(index=MONITOR_INDEX, id=monitor, refresh=True,
                  body={"doc": {"searchConfigurationId": "gone"}})
    result = cli(server, env, "monitor", "run", monitor, "--wait")
    assert result.returncode == 1, (result.stdout, result.stderr)
    run = api.srw("GET", f"/monitors/{monitor}/runs").json["runs"][0]
    assert run["status"] == "ERROR"
    assert result.stderr.strip().endswith(
        f"run {run['id']} ended ERROR: SearchConfiguration [gone] does not exist")
    assert _cells(result.stdout.splitlines()[4])[1] == "ERROR"
    api.srw("DELETE", f"/monitors/{monitor}")
