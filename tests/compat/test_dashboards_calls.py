"""Replays what OpenSearch Dashboards' search-relevance plugin sends (docs/contract.md,
"Dashboards"), with the bodies it builds) and asserts every field its views read (docs/contract.md,
"Dashboards"), including the evaluation result and variant documents it searches directly."""

from __future__ import annotations

import time
import uuid
from typing import Any

import pytest
from opensearchpy import OpenSearch

from tests.conftest import JUDGE_MODEL
from tests.support import raw_http
from tests.support.api import Api
from tests.support.processes import FRONTS, Server, Worker
from workbench.bench.llm_server import LLMServer

SRW = "/_plugins/_search_relevance"
TYPES = ("PAIRWISE_COMPARISON", "POINTWISE_EVALUATION", "HYBRID_OPTIMIZER")
HEADERS = {"x-opensearch-product-origin": "opensearch-dashboards",
           "user-agent": "opensearch-js/3.0.0"}


def osd(api: Api, method: str, path: str, body: Any = None,
        params: dict[str, str] | None = None) -> Any:
    """One call as the plugin's server side makes it; OSD turns any success into a 200."""
    reply = api.call(method, path, body, params=params, headers=HEADERS)
    assert 200 <= reply.status < 300, (method, path, reply.status, reply.data[:300])
    return reply.json


def osd_slashless(base: str, method: str, target: str, body: Any = None) -> Any:
    """A call the plugin's server builds without a leading slash (``_plugins/_ml/...``), sent
    with exactly that request line."""
    assert not target.startswith("/")
    reply = raw_http.send(base, method, target, body, headers=HEADERS)
    assert 200 <= reply.status < 300, (method, target, reply.status, reply.body[:300])
    return reply.json


def llm_form_models(base: str) -> list[str]:
    """The LLM judgment form's model picker: the ids it offers."""
    models = osd_slashless(base, "POST", "_plugins/_ml/models/_search",
                           {"query": {"match_all": {}}, "size": 1000})["hits"]["hits"]
    return [h["_id"] for h in models if h["_source"]["algorithm"] == "REMOTE"
            and h["_source"]["model_state"] == "DEPLOYED"]


def validate_prompt(base: str, model_id: str) -> str:
    """The form's Validate button: the filled template sent to the model's _predict; the UI
    joins each output item's ``result`` (or ``response``)."""
    answer = osd_slashless(base, "POST", f"_plugins/_ml/models/{model_id}/_predict", {
        "parameters": {"messages": [{"role": "user", "content":
                                     "SearchText: red shoes; Hits: [P0: red running shoes]"}]}})
    output = answer["inference_results"][0]["output"]
    return "".join(item.get("result") or item.get("response") or "" for item in output)


def single_hit(envelope: dict[str, Any]) -> dict[str, Any]:
    """Get-by-id (docs/contract.md, "Get by id"): is a search envelope with exactly one hit whose
    _source.id equals _id."""
    assert {"took", "timed_out", "_shards", "hits"} <= set(envelope)
    (hit,) = envelope["hits"]["hits"]
    assert hit["_id"] == hit["_source"]["id"]
    return hit["_source"]  # type: ignore[no-any-return]


def to_experiment(source: dict[str, Any]) -> None:
    """The UI's strict ``toExperiment`` parsing: one bad document breaks the whole list."""
    for field in ("id", "timestamp", "querySetId", "size", "searchConfigurationList"):
        assert source.get(field) is not None, (field, source)
    assert source["type"] in TYPES
    minimum = 2 if source["type"] == "PAIRWISE_COMPARISON" else 1
    assert len(source["searchConfigurationList"]) >= minimum
    if source["type"] != "PAIRWISE_COMPARISON":
        assert source.get("judgmentList"), source
    if source.get("status") == "COMPLETED":
        assert "results" in source
    if "isScheduled" in source:
        assert isinstance(source["isScheduled"], bool)


def wait(api: Api, path: str, timeout: float = 180) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        source = single_hit(osd(api, "GET", path))
        if source["status"] not in ("PROCESSING", "RETRYING"):
            return source
        time.sleep(0.3)
    raise AssertionError(f"{path} still running")


@pytest.fixture(scope="module")
def catalogue(direct: OpenSearch) -> Any:
    index = f"osd-products-{uuid.uuid4().hex[:6]}"
    direct.indices.create(index=index)
    for i, title in enumerate(["red running shoes", "blue running shoes", "red hat",
                               "wireless earbuds", "earbuds case", "running socks"]):
        direct.index(index=index, id=f"P{i}", body={"title": title, "description": title})
    direct.indices.refresh(index=index)
    yield index
    direct.indices.delete(index=index)


def test_the_whole_dashboards_journey(api: Api, worker: Worker, llm: LLMServer,
                                      catalogue: str, direct: OpenSearch,
                                      ubi_data: None) -> None:
    # -- Dashboards: pickers and lookups the forms make through the pass-through ------------------
    rows = osd(api, "GET", "/_cat/indices", params={"format": "json"})
    assert catalogue in {r["index"] for r in rows} and all("uuid" in r for r in rows)
    assert osd(api, "GET", "/_remote/info") == {}
    ubi = api.call("GET", "/_cat/indices/*ubi_queries*", params={"format": "json"})
    assert ubi.status == 200 and {r["index"] for r in ubi.json} >= {"ubi_queries"}
    pipelines = api.call("GET", "/_search/pipeline")
    assert pipelines.status in (200, 404)  # 404 (none) is tolerated by the UI

    # -- 1-5: query sets --------------------------------------------------------------------
    manual = osd(api, "PUT", f"{SRW}/query_sets", {
        "name": "OSD manual", "description": "from the text box", "sampling": "manual",
        "querySetQueries": [{"queryText": "red shoes", "referenceAnswer": ""},
                            {"queryText": "wireless earbuds", "referenceAnswer": "earbuds"}]})
    assert set(manual) == {"query_set_id", "query_set_result"}
    sampled = osd(api, "POST", f"{SRW}/query_sets", {
        "name": "OSD sampled", "sampling": "topn", "querySetSize": 5})
    listed = osd(api, "GET", f"{SRW}/query_sets")["hits"]["hits"]
    mine = next(h["_source"] for h in listed if h["_id"] == manual["query_set_id"])
    assert {"id", "name", "sampling", "description", "timestamp", "querySetQueries"} <= set(mine)
    assert len(mine["querySetQueries"]) == 2
    detail = single_hit(osd(api, "GET", f"{SRW}/query_sets/{manual['query_set_id']}"))
    assert detail["querySetQueries"][1]["customFields"]["referenceAnswer"] == "earbuds"
    osd(api, "DELETE", f"{SRW}/query_sets/{sampled['query_set_id']}")

    # -- 6-9: search configurations ---------------------------------------------------------
    configs = []
    for name, field in (("titles", "title"), ("descriptions", "description")):
        created = osd(api, "PUT", f"{SRW}/search_configurations", {
            "name": name, "description": f"match {field}", "index": catalogue,
            "query": f'{{"query":{{"match":{{"{field}":"%SearchText%"}}}}}}',
            "searchPipeline": ""})
        configs.append(created["search_configuration_id"])
    hybrid_config = osd(api, "PUT", f"{SRW}/search_configurations", {
        "name": "hybrid", "index": catalogue,
        "query": '{"query":{"hybrid":{"queries":[{"match":{"title":"%SearchText%"}},'
                 '{"match":{"description":"%SearchText%"}}]}}}'})["search_configuration_id"]
    for hit in osd(api, "GET", f"{SRW}/search_configurations")["hits"]["hits"]:
        assert {"id", "name", "index", "query", "timestamp"} <= set(hit["_source"])
    config_detail = single_hit(osd(api, "GET", f"{SRW}/search_configurations/{configs[0]}"))
    assert {"id", "name", "description", "index", "query", "searchPipeline",
            "timestamp"} <= set(config_detail)
    # The form's Validate button: a plain search with size in the URL.
    validate = osd(api, "POST", f"/{catalogue}/_search",
                   {"query": {"match": {"title": "red shoes"}}}, params={"size": "5"})
    assert validate["hits"]["hits"] and "_source" in validate["hits"]["hits"][0]
    throwaway = osd(api, "PUT", f"{SRW}/search_configurations", {
        "name": "tmp", "index": catalogue,
        "query": '{"query":{"match":{"title":"%SearchText%"}}}'})["search_configuration_id"]
    osd(api, "DELETE", f"{SRW}/search_configurations/{throwaway}")

    # -- 10-15: judgments -------------------------------------------------------------------
    assert JUDGE_MODEL in llm_form_models(api.base)
    assert validate_prompt(api.base, JUDGE_MODEL)
    llm_judgment = osd(api, "PUT", f"{SRW}/judgments", {
        "name": "OSD LLM", "type": "LLM_JUDGMENT", "querySetId": manual["query_set_id"],
        "searchConfigurationList": configs, "size": 5, "modelId": JUDGE_MODEL,
        "contextFields": ["title"], "promptTemplate": "SearchText: {{searchText}}; Hits: {{hits}}"})
    assert set(llm_judgment) == {"judgment_id"}
    imported = osd(api, "PUT", f"{SRW}/judgments", {
        "name": "OSD import", "type": "IMPORT_JUDGMENT", "judgmentRatings": [
            {"query": "red shoes", "ratings": [{"docId": "P0", "rating": "3"},
                                               {"docId": "P2", "rating": "1"}]},
            {"query": "wireless earbuds", "ratings": [{"docId": "P3", "rating": "3.5"}]}]})
    ubi_judgment = osd(api, "PUT", f"{SRW}/judgments", {
        "name": "OSD clicks", "type": "UBI_JUDGMENT", "clickModel": "coec", "maxRank": 20,
        "startDate": "2000-01-01", "endDate": time.strftime("%Y-%m-%d")})
    for created in (llm_judgment, imported, ubi_judgment):
        source = wait(api, f"{SRW}/judgments/{created['judgment_id']}")
        assert source["status"] == "COMPLETED", source["metadata"]
        assert {"id", "name", "type", "status", "timestamp", "metadata",
                "judgmentRatings"} <= set(source)
    llm_done = single_hit(osd(api, "GET", f"{SRW}/judgments/{llm_judgment['judgment_id']}"))
    assert llm_done["metadata"]["llmJudgmentRatingType"] == "SCORE0_1"
    assert llm_done["metadata"]["failedQueries"] == 0
    for entry in llm_done["judgmentRatings"]:
        assert {"query", "ratings"} <= set(entry)
        assert all(set(r) == {"docId", "rating"} for r in entry["ratings"])
    judgment_list = osd(api, "GET", f"{SRW}/judgments")["hits"]["hits"]
    for hit in judgment_list:
        assert {"id", "name", "type", "status", "timestamp"} <= set(hit["_source"])
    completed = osd(api, "GET", f"{SRW}/judgments", params={"status": "COMPLETED"})
    assert all(h["_source"]["status"] == "COMPLETED" for h in completed["hits"]["hits"])
    picker = [h["_id"] for h in judgment_list if h["_source"]["type"] == "LLM_JUDGMENT"]
    assert llm_judgment["judgment_id"] in picker
    # Edit ratings (string ratings 0-1, as the editor sends them).
    entry = llm_done["judgmentRatings"][0]
    osd(api, "PUT", f"{SRW}/judgments/{llm_judgment['judgment_id']}", {"judgmentRatings": [
        {"query": entry["query"], "ratings": [{"docId": entry["ratings"][0]["docId"],
                                               "rating": "0.7"}]}]})
    retry = api.call("POST", f"{SRW}/judgments/{llm_judgment['judgment_id']}/_retry")
    assert retry.status == 400  # nothing failed; the UI only offers Retry when failedQueries > 0
    doomed = osd(api, "PUT", f"{SRW}/judgments", {
        "name": "doomed", "type": "IMPORT_JUDGMENT", "judgmentRatings": []})
    wait(api, f"{SRW}/judgments/{doomed['judgment_id']}")
    osd(api, "DELETE", f"{SRW}/judgments/{doomed['judgment_id']}")

    # -- 16-20: experiments -----------------------------------------------------------------
    created = {}
    for experiment_type, config_list, judgments in (
        ("PAIRWISE_COMPARISON", configs, None),
        ("POINTWISE_EVALUATION", configs[:1], [imported["judgment_id"]]),
        ("HYBRID_OPTIMIZER", [hybrid_config], [imported["judgment_id"]]),
    ):
        payload: dict[str, Any] = {"type": experiment_type, "querySetId": manual["query_set_id"],
                                   "size": 10, "searchConfigurationList": config_list}
        if judgments:
            payload["judgmentList"] = judgments
        answer = osd(api, "PUT", f"{SRW}/experiments", payload)
        assert answer["experiment_id"]  # the only field the UI reads
        created[experiment_type] = answer["experiment_id"]
    for experiment_id in created.values():
        assert wait(api, f"{SRW}/experiments/{experiment_id}")["status"] == "COMPLETED"
    for hit in osd(api, "GET", f"{SRW}/experiments")["hits"]["hits"]:
        to_experiment(hit["_source"])

    pairwise = single_hit(osd(api, "GET", f"{SRW}/experiments/{created['PAIRWISE_COMPARISON']}"))
    for result in pairwise["results"]:
        assert {m["metric"] for m in result["metrics"]} == {
            "jaccard", "rbo50", "rbo90", "frequencyWeighted"}
        assert [s["searchConfigurationId"] for s in result["snapshots"]] == configs
        for snapshot in result["snapshots"]:  # the view fetches the documents of each list
            if snapshot["docIds"]:
                docs = osd(api, "POST", f"/{catalogue}/_search",
                           {"query": {"terms": {"_id": snapshot["docIds"]}}},
                           params={"size": str(len(snapshot["docIds"]))})
                assert {h["_id"] for h in docs["hits"]["hits"]} == set(snapshot["docIds"])
    assert {r["query_text"] for r in pairwise["results"]} == {"red shoes", "wireless earbuds"}

    pointwise_id = created["POINTWISE_EVALUATION"]
    pointwise = single_hit(osd(api, "GET", f"{SRW}/experiments/{pointwise_id}"))
    assert all("queryText" in r for r in pointwise["results"])
    evaluations = osd(api, "POST", "/search-relevance-evaluation-result/_search",
                      {"query": {"match": {"experimentId": pointwise_id}}},
                      params={"size": str(max(len(pointwise["results"]), 1))})["hits"]["hits"]
    assert evaluations
    for hit in evaluations:
        source = hit["_source"]
        assert source["searchText"] and source["metrics"]
        assert {"id", "timestamp", "experimentId", "searchConfigurationId", "judgmentIds",
                "documentIds"} <= set(source)
        assert {m["metric"] for m in source["metrics"]} >= {"NDCG@10", "Precision@10",
                                                             "MAP@10", "Coverage@10"}
        # The view's columns and summary follow the first result's metrics in order: the
        # plugin's seven as the plugin writes them, then the workbench's HitRate@10. The
        # scripted fields (metric_NDCG, metric_MAP, ...) each find one metric by its prefix.
        names = [m["metric"] for m in source["metrics"]]
        assert names == ["Coverage@10", "Precision@10", "Recall@10", "MAP@10", "MRR",
                         "DCG@10", "NDCG@10", "HitRate@10"]
        for prefix in ("NDCG@", "MAP@", "Precision@", "Coverage@"):
            assert [n for n in names if n.startswith(prefix)] == [prefix + "10"]
        assert all(isinstance(m["value"], float | int) for m in source["metrics"])
    variants = osd(api, "POST", "/search-relevance-experiment-variant/_search",
                   {"query": {"match": {"experimentId": pointwise_id}}},
                   params={"size": "100"})["hits"]["hits"]
    assert len(variants) == len(pointwise["results"])  # matched to queries one to one
    for hit in variants:
        assert {"id", "timestamp", "type", "status", "experimentId", "parameters",
                "results"} <= set(hit["_source"])

    hybrid_id = created["HYBRID_OPTIMIZER"]
    hybrid = single_hit(osd(api, "GET", f"{SRW}/experiments/{hybrid_id}"))
    assert all({"searchConfigurationId", "evaluationResults", "query_text"} <= set(r)
               for r in hybrid["results"])
    page = osd(api, "POST", "/search-relevance-evaluation-result/_search",
               {"query": {"match": {"experimentId": hybrid_id}}, "from": 0},
               params={"size": str(66 * len(hybrid["results"]))})
    assert page["hits"]["total"]["value"] > 66
    first = page["hits"]["hits"][0]["_source"]
    assert first["experimentVariantParameters"].startswith("combination=")
    variant = osd(api, "POST", "/search-relevance-experiment-variant/_search",
                  {"query": {"terms": {"_id": [first["experimentVariantId"]]}}})
    parameters = variant["hits"]["hits"][0]["_source"]["parameters"]
    assert parameters["combination"] in ("arithmetic_mean", "geometric_mean", "harmonic_mean",
                                         "rrf")

    osd(api, "PATCH", f"{SRW}/experiments/{pointwise_id}", {"name": "renamed by OSD"})
    assert single_hit(osd(api, "GET", f"{SRW}/experiments/{pointwise_id}"))["name"] == \
        "renamed by OSD"

    # -- 21-24: schedules (the id is the experiment's) ----------------------------------------
    job = osd(api, "POST", f"{SRW}/experiments/schedule",
              {"experimentId": pointwise_id, "cronExpression": "0 1 * * *"})
    assert job == {"job_id": pointwise_id, "job_result": "CREATED"}
    scheduled = single_hit(osd(api, "GET", f"{SRW}/experiments/schedule/{pointwise_id}"))
    assert scheduled["schedule"]["cron"] == {"expression": "0 1 * * *", "timezone": "UTC"}
    assert isinstance(scheduled["enabledTime"], int)
    assert isinstance(scheduled["lastUpdateTime"], int)
    assert single_hit(osd(api, "GET", f"{SRW}/experiments/{pointwise_id}"))["isScheduled"] is True
    assert pointwise_id in [h["_source"]["id"] for h in
                            osd(api, "GET", f"{SRW}/experiments/schedule")["hits"]["hits"]]
    osd(api, "DELETE", f"{SRW}/experiments/schedule/{pointwise_id}")

    # -- deletes ----------------------------------------------------------------------------
    for experiment_id in created.values():
        osd(api, "DELETE", f"{SRW}/experiments/{experiment_id}")
    assert api.call("GET", f"{SRW}/experiments/{pointwise_id}").status == 404


def test_a_generated_query_set_in_the_query_set_views(api: Api, worker: Worker,
                                                     catalogue: str) -> None:
    """A set generated from an index (docs/cold-start.md) as the query-set list, its detail
    view and the experiment form's combo box read it: while it is generated (no queries yet)
    and once it is COMPLETED."""
    created = osd(api, "PUT", f"{SRW}/query_sets", {
        "name": "OSD generated", "sampling": "reference_random", "index": catalogue,
        "numberOfQueryTerms": 4, "contextFields": ["title"]})
    assert set(created) == {"query_set_id", "query_set_result"}
    query_set_id = created["query_set_id"]
    deadline = time.monotonic() + 120
    while True:
        listed = osd(api, "GET", f"{SRW}/query_sets")["hits"]["hits"]
        mine = next(h["_source"] for h in listed if h["_id"] == query_set_id)
        # the list's columns, and Object.keys(querySetQueries).length as the query count
        assert {"id", "name", "sampling", "description", "timestamp",
                "querySetQueries"} <= set(mine)
        assert isinstance(mine["querySetQueries"], list)
        if mine["status"] == "COMPLETED" or time.monotonic() > deadline:
            break
        time.sleep(0.3)
    assert mine["status"] == "COMPLETED" and mine["sampling"] == "reference_random"
    detail = single_hit(osd(api, "GET", f"{SRW}/query_sets/{query_set_id}"))
    assert detail["querySetQueries"] and all(
        isinstance(q["queryText"], str) and q["queryText"] and isinstance(q["customFields"], dict)
        for q in detail["querySetQueries"])
    osd(api, "DELETE", f"{SRW}/query_sets/{query_set_id}")


def test_retry_from_the_judgment_view_of_a_judgment_with_failed_queries(
        api: Api, worker: Worker, llm: LLMServer, catalogue: str) -> None:
    """Dashboards (SRW plugin after 3.8) shows Retry when ``metadata.failedQueries > 0`` and
    the judgment is neither PROCESSING nor RETRYING; its server route then sends ``POST
    .../judgments/{id}/_retry`` with no body through the legacy client. Here the model fails
    on every call, so every query fails; the retry, with the model answering again, rates
    them all."""
    queries = osd(api, "PUT", f"{SRW}/query_sets", {
        "name": f"osd-retry-{uuid.uuid4().hex[:6]}", "sampling": "manual",
        "querySetQueries": [{"queryText": "red shoes"}, {"queryText": "wireless earbuds"}]})
    config = osd(api, "PUT", f"{SRW}/search_configurations", {
        "name": f"osd-retry-{uuid.uuid4().hex[:6]}", "index": catalogue,
        "query": '{"query":{"match":{"title":"%SearchText%"}}}'})
    llm.fail(500, times=100)
    created = osd(api, "PUT", f"{SRW}/judgments", {
        "name": "OSD retry", "type": "LLM_JUDGMENT", "querySetId": queries["query_set_id"],
        "searchConfigurationList": [config["search_configuration_id"]], "size": 3,
        "modelId": JUDGE_MODEL, "contextFields": ["title"], "overwriteCache": True})
    judgment_id = created["judgment_id"]
    failed = wait(api, f"{SRW}/judgments/{judgment_id}")
    assert failed["status"] == "COMPLETED"
    assert failed["metadata"]["failedQueries"] == 2  # what the view reads to show Retry
    assert all(e["failures"] and e["ratings"] == [] for e in failed["judgmentRatings"])
    llm.reset()
    retry = osd(api, "POST", f"{SRW}/judgments/{judgment_id}/_retry")
    assert retry == {"judgment_id": judgment_id, "status": "RETRYING",
                     "message": "Retrying failed documents"}
    done = wait(api, f"{SRW}/judgments/{judgment_id}")
    assert done["status"] == "COMPLETED"
    assert (done["metadata"]["successfulQueries"], done["metadata"]["failedQueries"]) == (2, 0)
    assert all("failures" not in e and e["ratings"] for e in done["judgmentRatings"])


def test_disabled_workbench_message_reaches_the_ui(api: Api) -> None:
    api.call("PUT", "/_cluster/settings",
             {"persistent": {"plugins.search_relevance.workbench_enabled": False}})
    try:
        reply = api.call("GET", f"{SRW}/experiments", headers=HEADERS)
        assert reply.status == 403
        assert "Search Relevance Workbench is disabled" in reply.text
    finally:
        api.call("PUT", "/_cluster/settings",
                 {"persistent": {"plugins.search_relevance.workbench_enabled": None}})


def test_core_health_check_and_saved_objects(api: Api, direct: OpenSearch) -> None:
    nodes = osd(api, "GET", "/_nodes", params={
        "filter_path": "nodes.*.version,nodes.*.http.publish_address,nodes.*.ip"})
    assert all("version" in n for n in nodes["nodes"].values())
    index = f".kibana-test-{uuid.uuid4().hex[:6]}"
    try:
        assert api.call("GET", f"/{index}").status == 404  # "does not exist" is expected
        created = api.call("PUT", f"/{index}/_create/config:3.8.0",
                           {"type": "config", "config": {"buildNum": 1}},
                           params={"refresh": "wait_for"})
        assert created.status == 201
        again = api.call("PUT", f"/{index}/_create/config:3.8.0", {"type": "config"})
        assert again.status == 409
        got = api.call("GET", f"/{index}/_doc/config%3A3.8.0")
        assert got.status == 200 and got.json["_source"]["config"] == {"buildNum": 1}
    finally:
        direct.indices.delete(index=index, ignore=[404])


@pytest.mark.parametrize("front", FRONTS)
def test_the_llm_judgment_form_through_each_front(env: dict[str, str], worker: Worker,
                                                  llm: LLMServer, catalogue: str,
                                                  front: str) -> None:
    """Create Judgment -> LLM, as the form does it: model list and prompt validation with
    slash-less request lines, then the create call with the form's body."""
    srv = Server(env, front=front, workers=1)
    try:
        api = Api(srv.url)
        assert JUDGE_MODEL in llm_form_models(srv.url)
        assert validate_prompt(srv.url, JUDGE_MODEL)
        query_set = osd(api, "PUT", f"{SRW}/query_sets", {
            "name": f"OSD LLM form {front}", "description": "typed", "sampling": "manual",
            "querySetQueries": [{"queryText": "red shoes", "referenceAnswer": ""}]})
        config = osd(api, "PUT", f"{SRW}/search_configurations", {
            "name": f"form {front} {uuid.uuid4().hex[:6]}", "description": "typed",
            "index": catalogue,
            "query": '{"query":{"match":{"title":"%SearchText%"}}}', "searchPipeline": ""})
        created = osd(api, "PUT", f"{SRW}/judgments", {
            "name": f"OSD LLM form {front}", "type": "LLM_JUDGMENT",
            "querySetId": query_set["query_set_id"],
            "searchConfigurationList": [config["search_configuration_id"]], "size": 5,
            "modelId": JUDGE_MODEL, "promptTemplate": "SearchText: {{searchText}}; Hits: {{hits}}"})
        done = wait(api, f"{SRW}/judgments/{created['judgment_id']}")
        assert done["status"] == "COMPLETED", done["metadata"]
        (entry,) = done["judgmentRatings"]
        # the query keeps its custom fields, as the plugin writes it
        assert entry["query"] == 'red shoes#{"referenceAnswer":""}' and entry["ratings"]
    finally:
        srv.stop()
