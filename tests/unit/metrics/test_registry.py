"""Metric names <-> functions, as ir_measures keeps a measure's name apart from its computation."""

from __future__ import annotations

import pytest

from workbench.metrics import (
    METRICS,
    OPT_IN,
    PAIRWISE,
    POINTWISE,
    dcg,
    evaluate,
    format_name,
    hit_rate,
    jaccard,
    metric_names,
    ndcg,
    pairwise_metrics,
    pairwise_names,
    parse,
    plugin_metric_names,
    pointwise_names,
    reciprocal_rank,
)
from workbench.metrics.registry import function


def test_pointwise_names_in_contract_order() -> None:
    assert pointwise_names(10) == [
        "Coverage@10",
        "Precision@10",
        "Recall@10",
        "MAP@10",
        "MRR",
        "DCG@10",
        "NDCG@10",
        "HitRate@10",  # the workbench's own, after the plugin's seven
    ]
    assert pointwise_names(10) == metric_names(10)
    assert plugin_metric_names(10) == pointwise_names(10)[:7]


def test_pairwise_names_match_pairwise_metrics() -> None:
    assert pairwise_names() == ["jaccard", "rbo50", "rbo90", "frequencyWeighted"]
    assert [name for name, _ in pairwise_metrics(["a"], ["b"])] == pairwise_names()


@pytest.mark.parametrize(
    ("name", "parsed"),
    [
        ("NDCG@10", ("NDCG", 10)),
        ("MRR", ("MRR", None)),
        ("Coverage@3", ("Coverage", 3)),
        ("MAP@0", ("MAP", 0)),
        ("DCG@250", ("DCG", 250)),
        ("rbo90", ("rbo90", None)),
        ("frequencyWeighted", ("frequencyWeighted", None)),
    ],
)
def test_parse(name: str, parsed: tuple[str, int | None]) -> None:
    assert parse(name) == parsed
    assert format_name(*parsed) == name


@pytest.mark.parametrize(
    "name",
    [
        "nDCG@10",
        "NDCG",
        "MRR@10",
        "NDCG@",
        "NDCG@-1",
        "NDCG@01",
        "NDCG@1.5",
        "P@10",
        "",
        "rbo50@5",
        "NDCG@10 ",
        "Jaccard",
    ],
)
def test_parse_rejects_unknown_or_malformed_names(name: str) -> None:
    with pytest.raises(ValueError, match="unknown metric"):
        parse(name)


def test_format_name_checks_the_cutoff() -> None:
    with pytest.raises(ValueError):
        format_name("NDCG")
    with pytest.raises(ValueError):
        format_name("MRR", 10)
    with pytest.raises(ValueError):
        format_name("ERR", 10)


def test_functions_by_name() -> None:
    assert function("NDCG@10") is ndcg
    assert function("NDCG") is ndcg
    assert function("DCG@5") is dcg
    assert function("MRR") is reciprocal_rank
    assert function("HitRate@10") is hit_rate
    assert function("jaccard") is jaccard
    # depth 1: {a} vs {b} -> 0; depth 2: 1 -> (0 + 0.5) * 0.5 / (1 - 0.25)
    assert function("rbo50")(["a", "b"], ["b", "a"]) == pytest.approx(1 / 3)
    with pytest.raises(ValueError):
        function("ERR@10")


def test_every_registered_metric_is_in_one_family() -> None:
    # OPT_IN: pointwise metrics registered by name but outside the default list (test_condensed.py)
    assert set(METRICS) == set(POINTWISE) | set(OPT_IN) | set(PAIRWISE)
    assert len(METRICS) == len(POINTWISE) + len(OPT_IN) + len(PAIRWISE)
    assert not set(POINTWISE) & set(PAIRWISE)
    assert {info.family for info in OPT_IN.values()} == {"pointwise"}
    assert [info.at_k for info in POINTWISE.values()] == [True] * 4 + [False] + [True] * 3
    assert [name for name, _ in evaluate(["a"], {"a": 1.0}, 4)] == pointwise_names(4)
