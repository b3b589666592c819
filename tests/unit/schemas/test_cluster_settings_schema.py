"""The ``PUT /_cluster/settings`` body schema (issue 21): the workbench's
``plugins.search_relevance.*`` keys recognised and parsed with OpenSearch's exact words (those
tests/integration/test_settings_stats_ubi.py, test_bad_input.py and test_fuzz_regressions.py pin
over HTTP), the order a body is checked in, and what the view forwards, without any service."""

from __future__ import annotations

from typing import Any

import pytest

from tests.support.bodies import reason
from workbench.errors import BadRequest
from workbench.schemas.body import load
from workbench.schemas.cluster_settings import (
    DEFINITIONS,
    ClusterSettingsSchema,
    flatten,
    ours,
    reaches_ours,
    time_ms,
)

WB = "plugins.search_relevance."


def loaded(body: dict[str, Any]) -> dict[str, Any]:
    return load(ClusterSettingsSchema(), body)


def refused(body: dict[str, Any], error_type: str = "illegal_argument_exception") -> str:
    """The 400's reason; a section that is no object is OpenSearch's ``settings_exception``."""
    if error_type == "illegal_argument_exception":
        return reason(ClusterSettingsSchema(), body)
    with pytest.raises(BadRequest) as caught:
        loaded(body)
    assert caught.value.status == 400
    assert caught.value.error_type == error_type
    return caught.value.reason


# -- the values, with OpenSearch's words ----------------------------------------------------------

@pytest.mark.parametrize(("key", "value", "reason"), [
    ("workbench_enabled", "maybe",
     "Failed to parse value [maybe] as only [true] or [false] are allowed."),
    ("query_set.maximum", "lots",
     f"Failed to parse value [lots] for setting [{WB}query_set.maximum]"),
    ("query_set.maximum", -1,
     f"Failed to parse value [-1] for setting [{WB}query_set.maximum] must be >= 0"),
    ("query_set.maximum", 2**31,
     f"Failed to parse value [{2**31}] for setting [{WB}query_set.maximum]"),
    ("query_set.maximum", str(10**40),
     f"Failed to parse value [{10**40}] for setting [{WB}query_set.maximum]"),
    ("scheduled_experiments_timeout", "60",
     f"failed to parse setting [{WB}scheduled_experiments_timeout] with value [60] as a time "
     "value: unit is missing or unrecognized"),
    ("scheduled_experiments_timeout", "99999999999999999999d",
     "failed to parse [99999999999999999999d], fractional time values are not supported"),
    ("scheduled_experiments_timeout", "-5s",
     f"failed to parse setting [{WB}scheduled_experiments_timeout] with value [-5s] as a time "
     "value: negative durations are not supported"),
])
@pytest.mark.parametrize("scope", ["persistent", "transient"])
def test_bad_values_are_opensearchs_400(scope: str, key: str, value: Any, reason: str) -> None:
    assert refused({scope: {WB + key: value}}) == reason


@pytest.mark.parametrize("scope", ["persistent", "transient"])
def test_an_unknown_key_of_ours_is_not_recognized_naming_its_scope(scope: str) -> None:
    assert refused({scope: {WB + "no_such_thing": True}}) == \
        f"{scope} setting [{WB}no_such_thing], not recognized"
    assert refused({scope: {"plugins": {"search_relevance": 5}}}) == \
        f"{scope} setting [plugins.search_relevance], not recognized"


def test_a_wildcard_reaching_ours_resets_them_and_takes_no_value() -> None:
    assert loaded({"persistent": {"plugins.*": None}})["changes"]["persistent"] == \
        {WB + "*": None}
    assert loaded({"transient": {"*": None}})["changes"]["transient"] == {WB + "*": None}
    assert refused({"persistent": {"plugins.*": 5}}) == \
        f"persistent setting [{WB}*], not recognized"


def test_values_are_normalised_as_stored_and_null_resets() -> None:
    body = {"persistent": {"plugins": {"search_relevance": {
        "stats_enabled": False, "query_set.maximum": "0050",
        "scheduled_experiments_timeout": " 2h ", "workbench_enabled": None}}}}
    assert loaded(body)["changes"] == {"persistent": {
        WB + "stats_enabled": "false", WB + "query_set.maximum": "50",
        WB + "scheduled_experiments_timeout": "2h", WB + "workbench_enabled": None,
    }, "transient": {}}


# -- the order a body is checked in ----------------------------------------------------------------

@pytest.mark.parametrize("section", [[None, None], 5, "x", True])
@pytest.mark.parametrize("scope", ["persistent", "transient"])
def test_a_section_that_is_not_an_object_is_a_settings_exception(scope: str,
                                                                 section: object) -> None:
    """Before any key of ours is read, in either section (tests/integration/
    test_fuzz_regressions.py)."""
    other = "transient" if scope == "persistent" else "persistent"
    for keys in ({WB + "stats_enabled": "maybe"}, {}):
        reason = refused({other: keys, scope: section}, "settings_exception")
        assert reason.startswith("Failed to load settings from [")
    assert refused({scope: [None, None]}, "settings_exception") == \
        "Failed to load settings from [[null, null]]"
    assert refused({scope: "x"}, "settings_exception") == 'Failed to load settings from ["x"]'


def test_persistent_before_transient_and_keys_in_the_order_given() -> None:
    body = {"transient": {WB + "stats_enabled": "maybe"},
            "persistent": {WB + "query_set.maximum": "lots", WB + "nope": 1}}
    assert refused(body) == f"Failed to parse value [lots] for setting [{WB}query_set.maximum]"
    body["persistent"] = {WB + "nope": 1, WB + "query_set.maximum": "lots"}
    assert refused(body) == f"persistent setting [{WB}nope], not recognized"
    body["persistent"] = {}
    assert refused(body) == "Failed to parse value [maybe] as only [true] or [false] are allowed."


# -- what the view forwards ------------------------------------------------------------------------

def test_sections_load_flat_with_every_key_and_changes_only_ours() -> None:
    body = {"persistent": {"search": {"default_search_timeout": "9s"},
                           WB + "query_set.maximum": 3, "plugins.*": None},
            "transient": None}
    result = loaded(body)
    assert result["persistent"] == {"search.default_search_timeout": "9s",
                                    WB + "query_set.maximum": 3, "plugins.*": None}
    assert result["transient"] == {}
    assert result["changes"] == {"persistent": {WB + "query_set.maximum": "3", WB + "*": None},
                                 "transient": {}}


@pytest.mark.parametrize("body", [
    {}, {"persistent": {"search.default_search_timeout": "17s"}},
    {"persistent": None, "transient": {"cluster": {"routing": {"x": "y"}}}},
    {"persistent": {"plugins.security.x": "bad value, the cluster's to judge"}},
])
def test_a_body_with_none_of_our_keys_has_no_changes(body: dict[str, Any]) -> None:
    assert loaded(body)["changes"] == {"persistent": {}, "transient": {}}


# -- the rules -----------------------------------------------------------------------------------

def test_the_rules_of_the_keys() -> None:
    assert ours(WB + "stats_enabled") and ours("plugins.search_relevance")
    assert not ours("plugins.search_relevance_x") and not ours("plugins.*")
    assert reaches_ours("plugins.*") and reaches_ours("*") and reaches_ours(WB + "*")
    assert not reaches_ours("search.*") and not reaches_ours("plugins")
    assert flatten({"a": {"b": 1, "c": {}}, "d.e": None}) == {"a.b": 1, "a.c": {}, "d.e": None}


def test_the_definitions_defaults_and_typed_reads() -> None:
    assert {key: d.default for key, d in DEFINITIONS.items()} == {
        "workbench_enabled": "true", "stats_enabled": "true", "query_set.maximum": "1000",
        "scheduled_experiments_enabled": "true", "scheduled_experiments_timeout": "60m",
        "scheduled_experiments_minimum_interval": "1s"}
    assert DEFINITIONS["stats_enabled"].typed("false") is False
    assert DEFINITIONS["query_set.maximum"].typed("1000") == 1000
    assert time_ms("60m") == 3_600_000 and time_ms("1s") == 1000 and time_ms("5ms") == 5
    with pytest.raises(ValueError):
        time_ms("60")
