"""The pure pieces of the holes benchmark (workbench/bench/holes.py) on hand-worked examples: the
kept ratings of a pool, the pools, NDCG@10 with holes as zeros and condensed, the filled
list's ratings, Kendall's tau of two scorings and its summary."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from workbench.bench.holes import (
    CONFIGURATIONS,
    filled,
    kept_ratings,
    low_pools,
    markdown,
    mean_condensed_ndcg,
    mean_ndcg,
    pools,
    ranking_tau,
    summarise,
    summary,
    wants_llm,
)

RESULTS = {"A": {"q": ["a", "b", "c"], "r": ["d"]},
           "B": {"q": ["u", "x", "a"]}}
RATINGS = {"q": {"a": 3.0, "b": 0.0, "x": 2.0, "z": 1.0}, "r": {"e": 2.0}}


def test_a_pool_keeps_the_ratings_its_configurations_retrieved() -> None:
    assert kept_ratings(RATINGS, RESULTS, ["A"]) == {"q": {"a": 3.0, "b": 0.0}}
    assert kept_ratings(RATINGS, RESULTS, ["B"]) == {"q": {"a": 3.0, "x": 2.0}}
    # the union of the pair's top k; "r" keeps nothing (its rated "e" was not retrieved)
    assert kept_ratings(RATINGS, RESULTS, ["A", "B"]) == {"q": {"a": 3.0, "b": 0.0, "x": 2.0}}


def test_only_the_top_k_counts() -> None:
    results = {"A": {"q": [f"d{i}" for i in range(12)]}}
    ratings = {"q": {"d0": 1.0, "d9": 2.0, "d10": 3.0}}
    assert kept_ratings(ratings, results, ["A"], k=10) == {"q": {"d0": 1.0, "d9": 2.0}}
    assert kept_ratings(ratings, results, ["A"], k=1) == {"q": {"d0": 1.0}}


def test_pools_are_each_configuration_then_each_pair() -> None:
    assert pools(["A", "B", "C"]) == [("A",), ("B",), ("C",), ("A", "B"), ("A", "C"),
                                      ("B", "C")]
    assert len(pools(list(CONFIGURATIONS))) == 9 + 36


def test_holes_count_as_zeros_and_condensing_drops_them() -> None:
    kept = {"q": {"a": 3.0, "x": 2.0}}
    ideal = 7 + 3 / math.log2(3)  # gains 2^3 - 1 and 2^2 - 1 at ranks 1 and 2
    # B retrieves u (a hole), x, a: as zeros the gains sit at ranks 2 and 3
    zeros = mean_ndcg(RESULTS, kept, ["q"])
    assert zeros["B"] == pytest.approx((3 / math.log2(3) + 7 / 2) / ideal)
    # condensed, u is dropped: x and a at ranks 1 and 2
    condensed = mean_condensed_ndcg(RESULTS, kept, ["q"])
    assert condensed["B"] == pytest.approx((3 + 7 / math.log2(3)) / ideal)
    # A retrieves a, b (a hole now), c: a at rank 1 either way
    assert zeros["A"] == pytest.approx(7 / ideal)
    assert condensed["A"] == pytest.approx(7 / ideal)
    # the mean is over the queries named: "r" has no rating (0 for both)
    assert mean_ndcg(RESULTS, kept, ["q", "r"])["A"] == pytest.approx(7 / ideal / 2)
    assert mean_condensed_ndcg(RESULTS, kept, ["q", "r"])["B"] == pytest.approx(
        condensed["B"] / 2)


def test_with_every_document_judged_condensed_is_standard() -> None:
    ratings = {"q": {"a": 3.0, "b": 0.0, "c": 1.0, "u": 0.0, "x": 2.0}}
    assert mean_condensed_ndcg(RESULTS, ratings, ["q"]) == pytest.approx(
        mean_ndcg(RESULTS, ratings, ["q"]))


def test_a_filled_list_keeps_the_human_ratings_and_adds_the_rest() -> None:
    kept = {"q": {"a": 3.0}}
    entries = [{"query": "q", "ratings": [{"docId": "a", "rating": "3", "source": "human"},
                                          {"docId": "b", "rating": "0.5", "source": "llm"}]},
               {"query": "r", "ratings": [{"docId": "c", "rating": "1.0"},
                                          {"docId": "d", "rating": None}]}]
    assert filled(kept, entries) == {"q": {"a": 3.0, "b": 0.5}, "r": {"c": 1.0}}
    assert kept == {"q": {"a": 3.0}}  # not changed in place


def test_tau_of_two_scorings_and_its_summary() -> None:
    truth = {"A": 0.6, "B": 0.4, "C": 0.2}
    assert ranking_tau(truth, {"A": 3, "B": 2, "C": 1}) == pytest.approx(1.0)
    assert ranking_tau(truth, {"A": 1, "B": 2, "C": 3}) == pytest.approx(-1.0)
    assert ranking_tau(truth, {"A": 0.5, "B": 0.1, "C": 0.2}) == pytest.approx(1 / 3)
    assert ranking_tau(truth, {"A": 0.0, "B": 0.0, "C": 0.0}) is None
    assert summary([None, 1.0, 0.5, 0.0]) == {"pools": 4, "defined": 3, "mean": 0.5,
                                              "min": 0.0, "median": 0.5, "max": 1.0}
    assert summary([None]) == {"pools": 1, "defined": 0, "mean": None, "min": None,
                               "median": None, "max": None}


def test_low_pools_are_those_where_zeros_gives_tau_at_most_the_line() -> None:
    taus = {"A": {"zeros": 0.4, "condensed": 0.9}, "B": {"zeros": 0.41},
            "C": {"zeros": None, "condensed": 0.1}, "D": {"zeros": -0.2}}
    assert low_pools(taus) == {"A": {"zeros": 0.4, "condensed": 0.9}, "D": {"zeros": -0.2}}


def test_which_pools_the_llm_fills() -> None:
    assert wants_llm("all", ("A", "B"), 0.9)
    assert wants_llm("single", ("A",), 0.9) and not wants_llm("single", ("A", "B"), 0.1)
    assert wants_llm("low", ("A", "B"), 0.4) and not wants_llm("low", ("A",), 0.41)
    assert not wants_llm("low", ("A",), None)


def test_the_summary_of_a_run() -> None:
    fill = {"pool": {"unrated": 10}, "usage": {"llmCalls": 4, "cachedRatings": 1}, "calls": 4,
            "seconds": 2.0, "calls_within_unrated": True}
    entries = [
        {"pool": ["A"], "tau": {"zeros": 0.2, "condensed": 0.6}, "fills": {"llm": fill},
         "on_llm_queries": {"tau": {"zeros": 0.0, "llm": 1.0}}},
        {"pool": ["B"], "tau": {"zeros": 1.0, "condensed": 1.0}, "fills": {},
         "on_llm_queries": {"tau": {"zeros": 1.0}}},
        {"pool": ["A", "B"], "tau": {"zeros": 0.4, "condensed": None},
         "fills": {"llm": {"error": "ended ERROR"}}, "on_llm_queries": {"tau": {"zeros": 0.5}}},
    ]
    got = summarise(entries)
    block = got["all_queries"]
    assert block["single"]["zeros"] == {"pools": 2, "defined": 2, "mean": 0.6, "min": 0.2,
                                        "median": 0.6, "max": 1.0}
    assert block["pair"]["condensed"]["defined"] == 0
    assert block["low"] == {"count": 2, "pools": {"A": entries[0]["tau"],
                                                  "A + B": entries[2]["tau"]},
                            "mean": {"zeros": 0.3, "condensed": 0.6}}
    # the pools the LLM was asked to fill, its failed fill included (without a tau)
    assert got["llm_queries"]["count"] == 2
    assert got["llm_queries"]["mean"] == {"zeros": 0.25, "llm": 1.0}
    assert got["fills"]["llm"]["fills"] == 1 and got["fills"]["llm"]["calls"] == 4
    assert got["fills"]["llm"]["failed_fills"] == ["A + B"]


def test_the_page_quotes_the_recorded_run() -> None:
    """docs/performance.md holds the tables of scripts/bench/results/holes.json, so its figures
    cannot go stale."""
    repo = Path(__file__).resolve().parents[2]
    report = json.loads((repo / "scripts/bench/results/holes.json").read_text())
    page = (repo / "docs" / "performance.md").read_text()
    for table in markdown(report).split("\n\n"):
        assert table in page
