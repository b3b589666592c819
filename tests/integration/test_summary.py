"""``_summary``, ``_report`` and ``validate``'s judgment check over HTTP, on the small worked
example of test_experiments; the HTML report is opened in headless Chromium."""

from __future__ import annotations

import csv
import io
import uuid
from pathlib import Path
from typing import Any

import pytest
from opensearchpy import OpenSearch

from tests.integration.test_experiments import (  # noqa: F401  (world is a fixture)
    EVALUATIONS,
    EXPERIMENTS,
    by_experiment,
    create,
    pointwise,
    wait,
    world,
)
from tests.support import browser
from tests.support.api import Api


@pytest.fixture(scope="module")
def compared(api: Api, world: dict[str, Any]) -> str:  # noqa: F811
    experiment_id = create(api, pointwise(world, searchConfigurationList=[
        world["by_rank"], world["by_price"]]))
    assert wait(api, f"/experiments/{experiment_id}")["status"] == "COMPLETED"
    return experiment_id


def test_summary_of_two_configurations(api: Api, world: dict[str, Any],  # noqa: F811
                                       compared: str, direct: OpenSearch) -> None:
    reply = api.srw("GET", f"/experiments/{compared}/_summary")
    assert reply.status == 200, reply.data
    summary = reply.json
    assert summary["experimentId"] == compared and summary["status"] == "COMPLETED"
    assert summary["queries"] == {"total": 2}
    assert summary["baseline"] == world["by_rank"] and summary["metric"] == "NDCG@3"
    rank, price = summary["configurations"]
    assert (rank["name"], price["name"]) == ("by rank", "by price desc")
    # "worked" finds b, a, y (by rank) or y, a, b (by price); "nothing matches this" nothing.
    assert rank["queries"] == {"run": 2, "withHits": 1, "judged": 1, "withJudgedHits": 1}
    assert rank["judgmentCoverage"] == {"k": 3, "judgedHits": 2, "hits": 3, "share": 2 / 3}
    stored = {(e["searchConfigurationId"], e["searchText"]): {
        m["metric"]: m["value"] for m in e["exactMetrics"]}
        for e in by_experiment(direct, EVALUATIONS, compared)}
    for row in (rank, price):
        ndcg = stored[(row["searchConfigurationId"], "worked")]["NDCG@3"]
        assert row["metrics"]["NDCG@3"]["mean"] == pytest.approx(ndcg / 2)  # no hits: 0
        assert row["metrics"]["NDCG@3"]["median"] == pytest.approx(ndcg / 2)
        assert row["metrics"]["NDCG@3"]["n"] == 2
        # a (the only relevant document) is second in both lists: a hit for "worked" only.
        assert stored[(row["searchConfigurationId"], "worked")]["HitRate@3"] == 1.0
        assert row["metrics"]["HitRate@3"]["mean"] == 0.5
    # y, unjudged, is first for by price: left out, by price wins NDCG'@3 (its a, b against
    # by rank's b, a), which tests/integration/test_condensed_metrics.py works out.
    assert [w["code"] for w in summary["warnings"]] == ["condensed_disagrees"]
    comparisons = summary["comparisons"]
    assert len(comparisons) == 8 and comparisons[0]["metric"] == "NDCG@3"
    assert comparisons[-1]["metric"] == "HitRate@3"
    first = comparisons[0]
    assert (first["baseline"], first["candidate"]) == (world["by_rank"], world["by_price"])
    assert [p["query"] for p in first["perQuery"]] == ["worked", "nothing matches this"]
    assert first["ties"] >= 1  # the query without hits is 0 for both

    swapped = api.srw("GET", f"/experiments/{compared}/_summary",
                      params={"baseline": world["by_price"], "metric": "MRR", "alpha": "0.1"})
    assert swapped.status == 200
    assert swapped.json["comparisons"][0]["metric"] == "MRR"
    assert swapped.json["comparisons"][0]["baseline"] == world["by_price"]


def test_bad_parameters_unknown_and_processing(api: Api, compared: str,
                                               direct: OpenSearch) -> None:
    path = f"/experiments/{compared}/_summary"
    reply = api.srw("GET", path, params={"baseline": "nope"})
    assert reply.status == 400 and "baseline [nope]" in reply.reason
    reply = api.srw("GET", path, params={"metric": "NDCG@10"})
    assert reply.status == 400 and "metric [NDCG@10]" in reply.reason
    for alpha in ("0", "1", "x", "nan"):
        reply = api.srw("GET", path, params={"alpha": alpha})
        assert reply.status == 400 and reply.reason.startswith(f"alpha [{alpha}]"), alpha
    reply = api.srw("GET", path, params={"permutations": "0"})
    assert reply.status == 400 and "permutations" in reply.reason
    reply = api.srw("GET", f"/experiments/{compared}/_report", params={"format": "pdf"})
    assert reply.status == 400 and "format [pdf]" in reply.reason
    api.srw("GET", "/experiments/missing-id/_summary").error(
        404, "Experiment not found: missing-id")
    api.srw("GET", "/experiments/missing-id/_report").error(
        404, "Experiment not found: missing-id")

    running = f"running-{uuid.uuid4().hex[:8]}"
    source = direct.get(index=EXPERIMENTS, id=compared)["_source"]
    direct.index(index=EXPERIMENTS, id=running, refresh=True,
                 body={**source, "id": running, "status": "PROCESSING", "results": []})
    try:
        api.srw("GET", f"/experiments/{running}/_summary").error(
            409, f"Experiment [{running}] is PROCESSING; its summary is available once it has "
                 "COMPLETED")
    finally:
        direct.delete(index=EXPERIMENTS, id=running, refresh=True)


def test_no_judgment_matched_is_an_error_of_the_summary(api: Api,
                                                       world: dict[str, Any]) -> None:  # noqa: F811
    judgment = api.srw("PUT", "/judgments", {
        "name": "other queries", "type": "IMPORT_JUDGMENT", "judgmentRatings": [
            {"query": "a query of another set", "ratings": [{"docId": "a", "rating": "3"}]}]}
    ).json["judgment_id"]
    wait(api, f"/judgments/{judgment}")
    experiment_id = create(api, pointwise(world, judgmentList=[judgment]))
    assert wait(api, f"/experiments/{experiment_id}")["status"] == "COMPLETED"
    summary = api.srw("GET", f"/experiments/{experiment_id}/_summary").json
    assert [(w["level"], w["code"]) for w in summary["warnings"]] == [
        ("error", "no_judgments_matched")]
    assert summary["configurations"][0]["metrics"]["NDCG@3"]["mean"] == 0.0
    # validate answers the plugin's question only: the inputs have not changed
    assert api.srw("GET", f"/experiments/{experiment_id}/validate").json == {
        "status": "VALID", "drifted_inputs": [],
        "message": "Experiment inputs match the stored execution fingerprint."}


def test_reports(api: Api, compared: str, tmp_path: Path) -> None:
    md = api.srw("GET", f"/experiments/{compared}/_report", params={"format": "md"})
    assert md.status == 200 and md.headers["Content-Type"].startswith("text/markdown")
    assert "| by rank | 2 | 1 | 1 | 66.7% |" in md.text
    assert "## Against the baseline (alpha 0.05)" in md.text

    rows = api.srw("GET", f"/experiments/{compared}/_report", params={"format": "csv"})
    assert rows.status == 200 and rows.headers["Content-Type"].startswith("text/csv")
    table = list(csv.DictReader(io.StringIO(rows.text)))
    # queries x configurations x metrics (seven, HitRate@3 and the four condensed ones)
    assert len(table) == 2 * 2 * 12
    assert {r["value"] for r in table if r["query"] == "nothing matches this"} == {"0.0"}

    page = api.srw("GET", f"/experiments/{compared}/_report", params={"format": "html"})
    assert page.status == 200 and page.headers["Content-Type"].startswith("text/html")
    assert "<script" not in page.text and "http://" not in page.text  # self-contained
    path = tmp_path / "report.html"
    path.write_bytes(page.data)
    rendered = browser.render(path)
    assert rendered.title.startswith(f"Experiment {compared}")
    assert len(rendered.images) == 2  # per-query deltas, distributions
    for image in rendered.images:
        assert image["complete"] and int(image["naturalWidth"]) > 300, image
        assert int(image["naturalHeight"]) > 100, image
    assert browser.colours(rendered.screenshot) > 50  # not a blank page


def test_scheduled_runs_history_flags_a_significant_drop(
        api: Api, direct: OpenSearch, env: dict[str, str], worker: Any) -> None:
    """Two scheduled runs: the second after ten of twelve queries lost their relevant document,
    so NDCG@3 drops from 1.0 to 1/6 and the history flags it."""
    from datetime import timedelta

    from tests.integration.test_schedules import wait_history
    from tests.support.scheduling import scheduled

    index = f"test-sum-sched-{uuid.uuid4().hex[:6]}"
    for i in range(12):
        direct.index(index=index, id=f"good{i}", body={"title": f"term{i}"})
    direct.indices.refresh(index=index)
    config = api.srw("PUT", "/search_configurations", {
        "name": "c", "index": index,
        "query": '{"query":{"match":{"title":"%SearchText%"}}}'}).json["search_configuration_id"]
    query_set = api.srw("PUT", "/query_sets", {"name": "q", "querySetQueries": [
        {"queryText": f"term{i}"} for i in range(12)]}).json["query_set_id"]
    judgment = api.srw("PUT", "/judgments", {"name": "j", "type": "IMPORT_JUDGMENT",
                                             "judgmentRatings": [
        {"query": f"term{i}", "ratings": [{"docId": f"good{i}", "rating": "3"}]}
        for i in range(12)]}).json["judgment_id"]
    wait(api, f"/judgments/{judgment}")
    experiment_id = create(api, {"type": "POINTWISE_EVALUATION", "querySetId": query_set,
                                 "searchConfigurationList": [config],
                                 "judgmentList": [judgment], "size": 3})
    assert wait(api, f"/experiments/{experiment_id}")["status"] == "COMPLETED"
    try:
        scheduler, start = scheduled(api, direct, env, experiment_id, "*/5 * * * *")
        [first] = scheduler.tick(now=start + timedelta(minutes=6))
        assert wait_history(direct, first)["status"] == "COMPLETED"
        for i in range(10):
            direct.delete(index=index, id=f"good{i}")
            direct.index(index=index, id=f"bad{i}", body={"title": f"term{i}"})
        direct.indices.refresh(index=index)
        [second] = scheduler.tick(now=start + timedelta(minutes=16))
        assert wait_history(direct, second)["status"] == "COMPLETED"

        summary = api.srw("GET", f"/experiments/{experiment_id}/_summary").json
        before, after = summary["history"]
        assert (before["scheduledRunId"], after["scheduledRunId"]) == (first, second)
        assert before["metrics"]["NDCG@3"] == {"mean": 1.0, "n": 12}
        assert before["change"] is None
        assert after["metrics"]["NDCG@3"]["mean"] == pytest.approx(2 / 12)
        change = after["change"]
        assert change["metric"] == "NDCG@3" and change["n"] == 12
        assert change["meanDelta"] == pytest.approx(-10 / 12)
        assert change["pValue"] < 0.001 and change["droppedSignificantly"] is True
        # The experiment's own run is still what the configurations summarise.
        assert summary["configurations"][0]["metrics"]["NDCG@3"]["mean"] == 1.0

        page = api.srw("GET", f"/experiments/{experiment_id}/_report",
                       params={"format": "html"}).text
        assert "Scheduled runs: mean NDCG@3 over time" in page
        md = api.srw("GET", f"/experiments/{experiment_id}/_report", params={"format": "md"})
        assert "## Scheduled runs: NDCG@3" in md.text and "| yes |" in md.text
    finally:
        api.srw("DELETE", f"/experiments/schedule/{experiment_id}")
        direct.indices.delete(index=index)
