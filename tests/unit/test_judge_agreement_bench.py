"""The pure pieces of the judge agreement measurement (workbench/bench/judge_agreement.py), on
hand-made data: which pairs a judge can read, how people's ratings become relevant or not, the
trivial baseline, the threshold sweep, Precision@k and the order of configurations."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import pytest

from workbench.bench.judge_agreement import (
    Pair,
    agreement,
    as_judgment_ratings,
    everything_relevant,
    human_relevant,
    judge_scores,
    mean_precision,
    on_sample_scale,
    order_tau,
    precision_at_k,
    product_titles,
    rated_in_top_k,
    shared_pairs,
    sweep,
)

RATINGS = {"tv": {"a": 100.0, "b": 10.0, "c": 1.0, "d": 0.0},
           "low": {"e": 10.0, "f": 0.0}}


def test_the_shipped_grades_are_read_on_the_samples_scale() -> None:
    """The demo's 3/2/1/0 list means what the sample's 100/10/1/0 does: the same calls."""
    demo = {"tv": {"a": 3.0, "b": 2.0, "c": 1.0, "d": 0.0}, "low": {"e": 2.0, "f": 0.0}}
    assert on_sample_scale(demo) == RATINGS
    assert on_sample_scale(RATINGS) == RATINGS
    for rule in ("exact", "es"):
        assert human_relevant(on_sample_scale(demo), rule) == human_relevant(RATINGS, rule)
    with pytest.raises(ValueError, match=r"not ESCI's grades .*\[0.5, 3.0\]"):
        on_sample_scale({"q": {"a": 3.0, "b": 0.5}})


def test_shared_pairs_keep_rated_products_with_a_title() -> None:
    titles = {"a": "Smart TV", "b": "  ", "c": "TV stand", "e": "Lamp", "x": "Unrated"}
    pairs = shared_pairs(RATINGS, titles)
    assert pairs == [Pair("tv", "a", 100.0, "Smart TV"), Pair("tv", "c", 1.0, "TV stand"),
                     Pair("low", "e", 10.0, "Lamp")]


def test_exact_follows_the_experiments_rule_per_query() -> None:
    exact = human_relevant(RATINGS, "exact")
    # max 100, P90 100: only 100 is relevant; "low" (max 10, P90 10) keeps its 10.
    assert exact == {"tv": {"a": True, "b": False, "c": False, "d": False},
                     "low": {"e": True, "f": False}}
    assert human_relevant({"q": {"a": 0.0}}, "exact") == {"q": {"a": False}}


def test_es_counts_exact_and_substitute() -> None:
    assert human_relevant(RATINGS, "es") == {"tv": {"a": True, "b": True, "c": False,
                                                    "d": False},
                                             "low": {"e": True, "f": False}}
    with pytest.raises(ValueError):
        human_relevant(RATINGS, "graded")


def test_as_judgment_ratings_groups_by_query_in_order() -> None:
    assert as_judgment_ratings([("q", "a", 1.0), ("r", "b", 0.0), ("q", "c", 0.5)]) == [
        {"query": "q", "ratings": [{"docId": "a", "rating": 1.0}, {"docId": "c", "rating": 0.5}]},
        {"query": "r", "ratings": [{"docId": "b", "rating": 0.0}]}]


def test_everything_relevant_has_kappa_zero_and_accuracy_the_relevant_share() -> None:
    figures = everything_relevant([True, True, True, False])
    assert figures["cohen_kappa"] == 0.0
    assert figures["accuracy"] == 0.75 and figures["precision"] == 0.75
    assert figures["recall"] == 1.0


def test_sweep_cuts_scores_at_each_threshold() -> None:
    rows = sweep([True, True, False, False], [0.9, 0.6, 0.4, 0.1], thresholds=(0.5, 0.95))
    assert rows[0] == {"threshold": 0.5, "cohen_kappa": 1.0, "accuracy": 1.0, "f1": 1.0,
                       "predicted_relevant": 0.5}
    assert rows[1]["predicted_relevant"] == 0.0 and rows[1]["accuracy"] == 0.5


def test_agreement_matches_the_cut_scores() -> None:
    pairs = [Pair("tv", d, r, d) for d, r in RATINGS["tv"].items()]
    humans = human_relevant(RATINGS, "es")
    report = agreement(pairs, humans, "es", [0.9, 0.7, 0.2, 0.6], 0.5)
    assert report["pairs"] == 4
    assert report["binary"]["confusion_matrix"] == {
        "true_positive": 2, "false_positive": 1, "true_negative": 1, "false_negative": 0}
    assert report["binary"]["accuracy"] == 0.75


def test_precision_counts_unrated_hits_as_not_relevant() -> None:
    relevant = {"a": True, "b": False}
    assert precision_at_k(["a", "b", "z"], relevant, k=3) == pytest.approx(1 / 3)
    assert precision_at_k(["a"], relevant, k=10) == pytest.approx(0.1)  # short list, no credit
    lists = {"q": ["a", "b"], "r": []}
    assert mean_precision(lists, {"q": relevant}, k=2) == pytest.approx(0.25)


def test_rated_in_top_k_unions_configurations() -> None:
    results = {"one": {"tv": ["a", "x", "b"]}, "two": {"tv": ["c"], "low": ["e", "f"]}}
    assert rated_in_top_k(results, RATINGS, ("one",), k=2) == {("tv", "a")}
    assert rated_in_top_k(results, RATINGS, ("one", "two")) == {
        ("tv", "a"), ("tv", "b"), ("tv", "c"), ("low", "e"), ("low", "f")}


def test_order_tau() -> None:
    people = {"a": 0.5, "b": 0.4, "c": 0.1}
    assert order_tau(people, {"a": 0.9, "b": 0.8, "c": 0.2}) == pytest.approx(1.0)
    assert order_tau(people, {"a": 0.1, "b": 0.8, "c": 0.9}) == pytest.approx(-1.0)
    assert order_tau(people, {"a": 0.3, "b": 0.3, "c": 0.3}) is None  # all tied
    assert order_tau(people, {"a": 0.3, "b": 0.2}) is None  # not the same configurations


def test_product_titles_read_plain_and_gzip(tmp_path: Path) -> None:
    lines = [{"_id": "a", "title": "Smart TV"}, {"asin": "b", "title": None}]
    text = "\n".join(json.dumps(line) for line in lines) + "\n\n"
    plain = tmp_path / "p.json"
    plain.write_text(text)
    packed = tmp_path / "p.json.gz"
    packed.write_bytes(gzip.compress(text.encode()))
    assert product_titles(plain) == product_titles(packed) == {"a": "Smart TV", "b": ""}


def test_judge_scores_use_the_query_as_reference() -> None:
    pairs = [Pair("usb cable", "a", 100.0, "USB cable 2m"), Pair("usb cable", "b", 0.0, "Lamp")]
    scores, calls, threshold = judge_scores("token_overlap", pairs)
    assert scores == [1.0, 0.0] and calls == [True, False] and threshold == 0.5


def test_readme_figures_are_the_recorded_ones() -> None:
    """docs/evaluate.md's agreement table states what the last run wrote to the results file."""
    repo = Path(__file__).resolve().parents[2]
    report = json.loads((repo / "scripts/bench/results/judge_agreement.json").read_text())
    top = report["configurations"]["agreement_on_top_k_pairs_people_rated"]["title+multi_match"]
    assert top["pairs"] == 1311 and report["data"]["pairs"] == 6678

    def cell(figures: dict[str, Any]) -> str:
        kappa = figures["cohen_kappa"]
        return f"{'0' if kappa == 0 else f'{kappa:.3f}'} ({figures['accuracy']:.3f})"

    expected = {"everything relevant (baseline)": [
        cell(report["baseline_everything_relevant"][rule]) for rule in ("exact", "es")] + [
        cell(top[rule]["everything relevant"]) for rule in ("exact", "es")]}
    for judge in ("token_overlap", "semantic"):
        expected[f"`{judge}`"] = [
            cell(report["judges"][judge][rule]["binary"]) for rule in ("exact", "es")] + [
            cell(top[rule][judge]["binary"]) for rule in ("exact", "es")]
    readme = (repo / "docs" / "evaluate.md").read_text()
    start = readme.index("## How far the embedded judges agree with people")
    rows = {}
    for line in readme[start:].splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if line.startswith("| ") and cells[0] in expected:
            rows[cells[0]] = cells[1:]
    assert rows == expected
