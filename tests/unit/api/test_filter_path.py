"""filter_path behaves as OpenSearch's does on the shapes the workbench answers with."""

from workbench.api.filter_path import apply

BODY = {
    "took": 3,
    "hits": {"total": {"value": 2}, "hits": [{"_id": "a", "_source": {"x": 1, "y": 2}},
                                             {"_id": "b", "_source": {"x": 3}}]},
    "persistent": {"plugins": {"search_relevance": {"workbench_enabled": "true"}}},
}


def test_no_filter_keeps_everything() -> None:
    assert apply(BODY, None) is BODY


def test_dotted_paths_and_lists() -> None:
    assert apply(BODY, "hits.hits._id") == {"hits": {"hits": [{"_id": "a"}, {"_id": "b"}]}}
    assert apply(BODY, "hits.total.value,took") == {"took": 3, "hits": {"total": {"value": 2}}}


def test_wildcards() -> None:
    assert apply(BODY, "hits.hits.*.y") == {"hits": {"hits": [{"_source": {"y": 2}}]}}
    assert apply(BODY, "persistent.plugins.search_*") == {"persistent": BODY["persistent"]}
    assert apply(BODY, "**.workbench_enabled") == {"persistent": BODY["persistent"]}


def test_nothing_matches_gives_empty_object() -> None:
    assert apply(BODY, "persistent.cluster.pluggable*") == {}


def test_exclusions() -> None:
    assert apply(BODY, "-hits,-persistent") == {"took": 3}
    assert apply(BODY, "hits.hits,-hits.hits._source") == {
        "hits": {"hits": [{"_id": "a"}, {"_id": "b"}]}}
