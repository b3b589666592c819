"""``searchConfigurationList`` naming remote search configurations (issue 47): ids (local
first, else remote) and ``{"type", "id"}`` objects, in experiment and judgment bodies; the
exact refusals; HYBRID_OPTIMIZER local only."""

from __future__ import annotations

from typing import Any

import pytest
from marshmallow import ValidationError

from tests.unit.schemas import test_judgment_schemas as judgments
from workbench.errors import BadRequest
from workbench.schemas.body import load
from workbench.schemas.configuration_list import ConfigurationIds, resolve
from workbench.schemas.experiments import Lookups, experiment_schema

LOCAL = {"c1", "both"}
REMOTE = {"r1", "r2", "both"}


class Reads:
    def __init__(self) -> None:
        self.asked: list[tuple[str, str]] = []

    def local(self, config_id: str) -> bool:
        self.asked.append(("local", config_id))
        return config_id in LOCAL

    def remote(self, config_id: str) -> bool:
        self.asked.append(("remote", config_id))
        return config_id in REMOTE


@pytest.mark.parametrize(("entries", "ids", "remote", "asked"), [
    (["c1"], ["c1"], [], [("local", "c1")]),
    (["r1"], ["r1"], ["r1"], [("local", "r1"), ("remote", "r1")]),
    (["both"], ["both"], [], [("local", "both")]),  # a local configuration first
    ([{"type": "remote", "id": "both"}], ["both"], ["both"], [("remote", "both")]),
    ([{"type": "local", "id": "c1"}, {"id": "r2", "type": "remote"}, "r1"],
     ["c1", "r2", "r1"], ["r2", "r1"],
     [("local", "c1"), ("remote", "r2"), ("local", "r1"), ("remote", "r1")]),
])
def test_entries_resolve_to_ids_and_the_remote_ones(entries: list[Any], ids: list[str],
                                                     remote: list[str],
                                                     asked: list[tuple[str, str]]) -> None:
    reads = Reads()
    found = resolve(entries, reads.local, reads.remote)
    assert isinstance(found, ConfigurationIds)
    assert (list(found), found.remote, reads.asked) == (ids, remote, asked)


@pytest.mark.parametrize(("entry", "message"), [
    ("nope", "SearchConfiguration [nope] does not exist"),
    ({"type": "local", "id": "r1"}, "SearchConfiguration [r1] does not exist"),
    ({"type": "remote", "id": "c1"}, "RemoteSearchConfiguration [c1] does not exist"),
    ({"type": "solr", "id": "c1"},
     "searchConfigurationList: an entry's type must be local or remote, got [solr]"),
    ({"id": "c1"}, "searchConfigurationList: an entry's type must be local or remote, got "
                   "[None]"),
    ({"type": "remote", "id": "r1", "name": "x", "b": 1},
     "searchConfigurationList: an entry object takes only type and id, unknown: [b, name]"),
    ({"type": "remote"}, "SearchConfiguration ID cannot be null or empty"),
    ({"type": "remote", "id": " "}, "SearchConfiguration ID cannot be null or empty"),
    (7, "SearchConfiguration ID cannot be null or empty"),
])
def test_a_bad_entry_is_named(entry: Any, message: str) -> None:
    with pytest.raises(ValidationError) as caught:
        resolve(["c1", entry], Reads().local, Reads().remote)
    assert caught.value.messages == [message]


def _lookups() -> Lookups:
    return Lookups(query_set=lambda _: {}, judgment=lambda _: {"status": "COMPLETED"},
                   search_configuration=lambda c: {"index": "i"} if c in LOCAL else None,
                   remote_configuration=lambda c: {"name": c} if c in REMOTE else None)


def _experiment(kind: str, configs: list[Any]) -> dict[str, Any]:
    body = {"type": kind, "querySetId": "qs", "searchConfigurationList": configs,
            "judgmentList": ["j"], "size": 5}
    return load(experiment_schema(body, _lookups()), body)


def test_an_experiment_mixes_local_and_remote() -> None:
    fields = _experiment("POINTWISE_EVALUATION", ["c1", {"type": "remote", "id": "r1"}])
    assert fields["searchConfigurationList"] == ["c1", "r1"]
    assert fields["searchConfigurationList"].remote == ["r1"]
    pairwise = _experiment("PAIRWISE_COMPARISON", ["r1", "c1"])
    assert (pairwise["searchConfigurationList"], pairwise["searchConfigurationList"].remote) \
        == (["r1", "c1"], ["r1"])


def test_without_remote_lookups_an_id_is_local_only() -> None:
    body = {"type": "POINTWISE_EVALUATION", "querySetId": "qs", "searchConfigurationList": ["r1"],
            "judgmentList": ["j"], "size": 5}
    lookups = Lookups(lambda _: {}, lambda _: None, lambda _: {"status": "COMPLETED"})
    with pytest.raises(BadRequest) as caught:
        load(experiment_schema(body, lookups), body)
    assert caught.value.reason == "SearchConfiguration [r1] does not exist"


@pytest.mark.parametrize("configs", [["c1", "r1"], [{"type": "remote", "id": "both"}]])
def test_hybrid_optimizer_refuses_a_remote_configuration(configs: list[Any]) -> None:
    with pytest.raises(BadRequest) as caught:
        _experiment("HYBRID_OPTIMIZER", configs)
    remote = configs[-1] if isinstance(configs[-1], str) else configs[-1]["id"]
    assert (caught.value.status, caught.value.reason) == (
        400, f"HYBRID_OPTIMIZER experiments search local search configurations only: "
             f"[{remote}] is a remote search configuration")


def test_pairwise_still_counts_two() -> None:
    with pytest.raises(BadRequest) as caught:
        _experiment("PAIRWISE_COMPARISON", ["r1"])
    assert caught.value.reason == ("PAIRWISE_COMPARISON requires exactly 2 search "
                                   "configurations, got: 1")


def test_a_judgment_names_remote_configurations() -> None:
    judgments.STORED[("RemoteSearchConfiguration", "r1")] = {"name": "r1"}
    try:
        cluster = judgments.Cluster()
        fields = judgments.judgment(judgments.llm(searchConfigurationList=[
            {"type": "remote", "id": "r1"}, "c1"]), cluster)
        assert (fields["searchConfigurationList"], fields["searchConfigurationList"].remote) \
            == (["r1", "c1"], ["r1"])
        assert [c for c in cluster.calls if c[0] == "entity" and c[2] in ("r1", "c1")] == [
            ("entity", "RemoteSearchConfiguration", "r1"),
            ("entity", "SearchConfiguration", "c1")]
        assert judgments.reason(judgments.llm(searchConfigurationList=[
            {"type": "remote", "id": "c1"}])) == "RemoteSearchConfiguration [c1] does not exist"
        assert judgments.reason(judgments.reference(searchConfigurationList=["nope"])) == \
            "SearchConfiguration [nope] does not exist"
    finally:
        del judgments.STORED[("RemoteSearchConfiguration", "r1")]
