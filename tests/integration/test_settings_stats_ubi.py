"""Plugin settings through ``_cluster/settings``, the stats API and UBI initialisation."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import pytest
import redis
from opensearchpy import OpenSearch

from tests.support.api import Api
from tests.support.processes import Server
from workbench.telemetry.event_stats import EventStats

WB = "plugins.search_relevance."
DISABLED = "Search Relevance Workbench is disabled"


def put_settings(api: Api, persistent: dict[str, Any] | None = None,
                 transient: dict[str, Any] | None = None, **params: Any) -> Any:
    body: dict[str, Any] = {}
    if persistent is not None:
        body["persistent"] = persistent
    if transient is not None:
        body["transient"] = transient
    return api.call("PUT", "/_cluster/settings", body, params=params or None)


@pytest.fixture
def reset_settings(api: Api, direct: OpenSearch) -> Iterator[None]:
    yield
    put_settings(api, {WB + "*": None}, {WB + "*": None})
    direct.cluster.put_settings(body={"persistent": {"search.default_search_timeout": None}})


def assert_text_403(reply: Any, text: str) -> None:
    assert reply.status == 403
    assert reply.headers["Content-Type"].startswith("text/plain")
    assert reply.text == text


def test_disabling_the_workbench_closes_every_srw_route(api: Api, server: Server,
                                                        reset_settings: None) -> None:
    answer = put_settings(api, {WB + "workbench_enabled": False})
    assert answer.status == 200
    assert answer.json == {"acknowledged": True,
                           "persistent": {"plugins": {"search_relevance": {
                               "workbench_enabled": "false"}}},
                           "transient": {}}
    for method, path in (("GET", "/query_sets"), ("PUT", "/query_sets"),
                         ("POST", "/query_sets"), ("GET", "/search_configurations/x"),
                         ("DELETE", "/query_sets/x"), ("GET", "/stats"),
                         ("POST", "/query_sets/_search"), ("GET", "/x/stats/cluster_version")):
        # Several requests, so that every API process answers at least once.
        for _ in range(3):
            assert_text_403(api.srw(method, path, {"name": "n"}), DISABLED)
    assert api.call("GET", "/").status == 200  # the pass-through stays open
    put_settings(api, {WB + "workbench_enabled": True})
    assert api.srw("GET", "/query_sets").status == 200


def test_settings_persist_across_a_restart(env: dict[str, str], api: Api,
                                           reset_settings: None) -> None:
    put_settings(api, {WB + "query_set.maximum": 2})
    restarted = Server(env, workers=1)
    try:
        other = Api(restarted.url)
        other.srw("PUT", "/query_sets", {"name": "n", "querySetQueries": [
            {"queryText": "a"}, {"queryText": "b"}, {"queryText": "c"}]}).error(
            403, "Query Set Limit Exceeded.")
        ok = other.srw("PUT", "/query_sets", {"name": "n", "querySetQueries": [
            {"queryText": "a"}, {"queryText": "b"}]})
        assert ok.status == 200
        got = other.call("GET", "/_cluster/settings").json
        assert got["persistent"]["plugins"]["search_relevance"]["query_set"] == {"maximum": "2"}
    finally:
        restarted.stop()


def test_mixed_keys_reach_both_and_answers_merge(api: Api, direct: OpenSearch,
                                                 reset_settings: None) -> None:
    answer = put_settings(api, {WB + "stats_enabled": "true",
                                "search.default_search_timeout": "42s"},
                          {WB + "scheduled_experiments_timeout": "30m"})
    assert answer.status == 200
    assert answer.json == {
        "acknowledged": True,
        "persistent": {"search": {"default_search_timeout": "42s"},
                       "plugins": {"search_relevance": {"stats_enabled": "true"}}},
        "transient": {"plugins": {"search_relevance": {"scheduled_experiments_timeout": "30m"}}},
    }
    cluster = direct.cluster.get_settings()
    assert cluster["persistent"]["search"]["default_search_timeout"] == "42s"
    assert "plugins" not in json.dumps(cluster)  # the cluster never saw our keys

    merged = api.call("GET", "/_cluster/settings", params={"flat_settings": "true"}).json
    assert merged["persistent"]["search.default_search_timeout"] == "42s"
    assert merged["persistent"][WB + "stats_enabled"] == "true"
    assert merged["transient"][WB + "scheduled_experiments_timeout"] == "30m"

    defaults = api.call("GET", "/_cluster/settings",
                        params={"include_defaults": "true", "flat_settings": "true"}).json
    assert defaults["defaults"][WB + "workbench_enabled"] == "true"
    assert defaults["defaults"][WB + "query_set.maximum"] == "1000"
    assert WB + "stats_enabled" not in defaults["defaults"]  # explicitly set, so not a default
    assert "cluster.name" in defaults["defaults"]  # the cluster's own defaults are still there

    filtered = api.call("GET", "/_cluster/settings",
                        params={"filter_path": "transient.plugins.**"}).json
    assert filtered == {"transient": {"plugins": {"search_relevance": {
        "scheduled_experiments_timeout": "30m"}}}}
    nothing = api.call("GET", "/_cluster/settings",
                       params={"filter_path": "persistent.cluster.pluggable*"})
    assert nothing.status == 200 and nothing.json == {}


def test_a_reset_returns_a_setting_to_its_default(api: Api, reset_settings: None) -> None:
    put_settings(api, {WB + "query_set.maximum": 5})
    put_settings(api, {WB + "query_set.maximum": None})
    flat = api.call("GET", "/_cluster/settings", params={"flat_settings": "true"}).json
    assert WB + "query_set.maximum" not in flat["persistent"]


def test_only_other_keys_pass_straight_through(api: Api, direct: OpenSearch,
                                               reset_settings: None) -> None:
    via = put_settings(api, {"search.default_search_timeout": "17s"})
    assert via.status == 200
    assert via.json == {"acknowledged": True,
                        "persistent": {"search": {"default_search_timeout": "17s"}},
                        "transient": {}}


@pytest.mark.parametrize("persistent, reason", [
    ({WB + "workbench_enabled": "maybe"},
     "Failed to parse value [maybe] as only [true] or [false] are allowed."),
    ({WB + "query_set.maximum": "lots"},
     f"Failed to parse value [lots] for setting [{WB}query_set.maximum]"),
    ({WB + "query_set.maximum": -1},
     f"Failed to parse value [-1] for setting [{WB}query_set.maximum] must be >= 0"),
    ({WB + "scheduled_experiments_timeout": "60"},
     f"failed to parse setting [{WB}scheduled_experiments_timeout] with value [60] as a time "
     "value: unit is missing or unrecognized"),
    ({WB + "no_such_thing": True}, f"persistent setting [{WB}no_such_thing], not recognized"),
])
def test_bad_setting_values_are_400_and_change_nothing(api: Api, direct: OpenSearch,
                                                       persistent: dict[str, Any],
                                                       reason: str,
                                                       reset_settings: None) -> None:
    put_settings(api, {**persistent, "search.default_search_timeout": "9s"}).error(
        400, reason, "illegal_argument_exception")
    assert "search" not in direct.cluster.get_settings()["persistent"]
    assert api.srw("GET", "/query_sets").status == 200


def test_a_cluster_refusal_applies_nothing_of_ours(api: Api, reset_settings: None) -> None:
    refused = put_settings(api, {WB + "query_set.maximum": 3, "no.such.cluster.setting": 1})
    assert refused.status == 400
    assert "no.such.cluster.setting" in refused.reason
    flat = api.call("GET", "/_cluster/settings", params={"flat_settings": "true"}).json
    assert WB + "query_set.maximum" not in flat["persistent"]


# -- stats ----------------------------------------------------------------------------------------

@pytest.fixture
def counters(redis_url: str) -> EventStats:
    return EventStats(redis.Redis.from_url(redis_url))


def test_stats_report_shared_counters(api: Api, counters: EventStats, direct: OpenSearch,
                                      reset_settings: None) -> None:
    counters.reset()
    if time.time() % 60 > 45:  # the event of "this minute" must still be so when the API reads
        time.sleep(61 - time.time() % 60)
    now = int(time.time() * 1000)
    counters.record("llm_judgment_rating_generations")
    counters.record("llm_judgment_rating_generations", now_ms=now - 120_000)
    counters.record("experiment_executions", now_ms=now - 8 * 60_000)

    body = api.srw("GET", "/stats").json
    assert body["_nodes"] == {"total": 1, "successful": 1, "failed": 0}
    assert body["cluster_name"] == "opensearch"
    assert body["info"] == {"cluster_version": direct.info()["version"]["number"]}
    assert body["all_nodes"] == {
        "judgments": {"import_judgment_rating_generations": 0,
                      "llm_judgment_rating_generations": 2,
                      "ubi_judgment_rating_generations": 0},
        "experiments": {"experiment_executions": 1,
                        "experiment_pairwise_comparison_executions": 0,
                        "experiment_pointwise_evaluation_executions": 0,
                        "experiment_hybrid_optimizer_executions": 0},
    }
    (node_id,) = body["nodes"]
    assert len(node_id) == 22 and body["nodes"][node_id] == body["all_nodes"]

    meta = api.srw("GET", "/stats/llm_judgment_rating_generations,experiment_executions",
                   params={"include_metadata": "true", "flat_stat_paths": "true"}).json
    llm = meta["all_nodes"]["judgments.llm_judgment_rating_generations"]
    assert llm["value"] == 2 and llm["stat_type"] == "timestamped_event_counter"
    # The event of 2 minutes ago counts; the one of this minute does not (the bucket is open).
    assert llm["trailing_interval_value"] == 1
    assert llm["minutes_since_last_event"] == 0
    experiments = meta["all_nodes"]["experiments.experiment_executions"]
    assert experiments["trailing_interval_value"] == 0  # 8 minutes ago: outside the window
    assert experiments["minutes_since_last_event"] in (7, 8, 9)
    assert meta["info"] == {}  # only event stats were asked for
    assert set(meta["nodes"][node_id]) == set(meta["all_nodes"])


def test_stats_filters_and_sections(api: Api) -> None:
    info = api.srw("GET", "/stats/cluster_version",
                   params={"include_metadata": "true"}).json["info"]
    assert info["cluster_version"]["stat_type"] == "info_string"
    assert info["cluster_version"]["value"].count(".") == 2
    sections = api.srw("GET", "/stats", params={
        "include_individual_nodes": "false", "include_all_nodes": "false",
        "include_info": "false"}).json
    assert set(sections) == {"_nodes", "cluster_name"}
    node_id = next(iter(api.srw("GET", "/stats").json["nodes"]))
    mine = api.srw("GET", f"/{node_id}/stats/experiment_executions").json
    assert list(mine["nodes"]) == [node_id]
    other = api.srw("GET", "/AAAAAAAAAAAAAAAAAAAAAA/stats").json
    assert other["nodes"] == {} and other["_nodes"]["total"] == 0
    ignored = api.srw("GET", "/not-a-node-id/stats").json  # malformed ids are ignored
    assert list(ignored["nodes"]) == [node_id]


def test_unknown_stat_names_are_400(api: Api) -> None:
    api.srw("GET", "/stats/llm_judgment_rating_generation").error(
        400, "request [/_plugins/_search_relevance/stats/llm_judgment_rating_generation] contains "
             "unrecognized stat: [llm_judgment_rating_generation] -> did you mean any of "
             "[llm_judgment_rating_generations, ubi_judgment_rating_generations, "
             "import_judgment_rating_generations]?", "illegal_argument_exception")
    api.srw("GET", "/stats/cluster_versio").error(
        400, "request [/_plugins/_search_relevance/stats/cluster_versio] contains "
             "unrecognized stat: [cluster_versio] -> did you mean [cluster_version]?")
    reply = api.srw("GET", "/stats/foo,cluster_version,bar")
    assert reply.status == 400
    assert reply.reason.startswith(
        "request [/_plugins/_search_relevance/stats/foo,cluster_version,bar] contains "
        "unrecognized stats: [foo], [bar]")


def test_switching_stats_off_closes_the_route_and_resets_counters(
    api: Api, counters: EventStats, reset_settings: None
) -> None:
    counters.record("ubi_judgment_rating_generations")
    put_settings(api, {WB + "stats_enabled": False})
    assert_text_403(api.srw("GET", "/stats"), "Search Relevance Workbench stats is disabled")
    put_settings(api, {WB + "stats_enabled": True})
    body = api.srw("GET", "/stats/ubi_judgment_rating_generations").json
    assert body["all_nodes"] == {"judgments": {"ubi_judgment_rating_generations": 0}}


# -- UBI initialisation ---------------------------------------------------------------------------

def test_ubi_initialize_creates_the_indices_on_a_cluster_without_ubi(
    api: Api, direct: OpenSearch, env: dict[str, str]
) -> None:
    from tests.conftest import load_ubi

    direct.indices.delete(index="ubi_queries,ubi_events", ignore=[404])
    try:
        reply = api.call("POST", "/_plugins/ubi/initialize")
        # the UBI plugin's answer exactly: JSON text, sent as text/plain
        assert (reply.status, reply.data) == (200, b'{"message": "UBI indexes created."}')
        assert reply.headers["Content-Type"] == "text/plain; charset=UTF-8"
        queries = direct.indices.get_mapping(index="ubi_queries")["ubi_queries"]["mappings"]
        events = direct.indices.get_mapping(index="ubi_events")["ubi_events"]["mappings"]
        assert queries["properties"]["user_query"]["type"] == "keyword"
        assert queries["properties"]["query_attributes"]["type"] == "flat_object"
        assert events["properties"]["action_name"]["type"] == "keyword"
        position = events["properties"]["event_attributes"]["properties"]["position"]
        assert position["properties"]["ordinal"]["type"] == "integer"
        again = api.call("POST", "/_plugins/ubi/initialize")
        assert (again.status, again.data) == (reply.status, reply.data)  # idempotent
        assert again.headers["Content-Type"] == "text/plain; charset=UTF-8"
    finally:
        load_ubi(env)
    assert direct.count(index="ubi_queries")["count"] == 473
    assert direct.count(index="ubi_events")["count"] == 3448
