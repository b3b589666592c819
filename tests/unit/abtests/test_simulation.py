"""Proof by simulation that the interleaved verdict (workbench/abtests/) finds the better ranker
at the recommended sample size and keeps its false-positive rate when there is nothing to find.

Relevance comes from the ESCI human judgments (Exact 100, Substitute 10, Complement 1,
Irrelevant 0), mapped to grades g = 3, 2, 1, 0. Simulated users follow a cascade click model
(Craswell, Zoeter, Taylor & Ramsey, "An experimental comparison of click position-bias models",
WSDM 2008) in its dependent form (Guo, Liu & Wang, "Efficient multiple-click models in web
search", WSDM 2009), which lets one user click several documents:

- the user examines the list top-down, starting at rank 1;
- an examined document is clicked with P(click | g) = 0.02 + (2^g - 1) / 2^3, the relevance
  probability of Expected Reciprocal Rank (Chapelle, Metzler, Zhang & Grinspan, CIKM 2009) plus a
  noise floor of 0.02 for clicks on irrelevant results: 0.02, 0.145, 0.395, 0.895;
- after a click the user stops with probability 0.5; after a skipped document the user goes on
  to the next one with probability 0.9.

Ranker A is the ideal order by grade (ties broken by a seeded shuffle). Ranker B is a noisy
version of it, sorting by grade + N(0, 1.1^2) (a fixed seed): a ranker whose scores are only partly
correlated with relevance. The noise was tuned so mean offline NDCG@10 drops by 0.1 (1.0 to 0.90),
a gap the recommended 1,000 impressions detect in about 90 % of tests: less noise (a smaller gap)
needs more impressions, and more noise is found with fewer.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass

import numpy as np
import pytest

from tests.support.data import ESCI
from workbench.abtests.interleaving import A, seed_for, team_draft
from workbench.abtests.verdict import (
    RECOMMENDED_IMPRESSIONS,
    Impression,
    total_clicks_test,
    verdict,
)
from workbench.metrics.pointwise import ndcg

JUDGMENTS = ESCI / "esci_us_judgments.json"  # tests/support/data.py finds the shared data

DEPTH = 10  # results shown per impression, and the depth of NDCG
MIN_JUDGED = 10  # queries with fewer judged documents cannot fill a page
GRADE = {0.0: 0, 1.0: 1, 10.0: 2, 100.0: 3}  # ESCI's I, C, S, E ratings as graded relevance
MAX_GRADE = 3
P_CLICK = 0.02 + (2.0 ** np.arange(MAX_GRADE + 1) - 1) / 2.0**MAX_GRADE
P_STOP_AFTER_CLICK = 0.5
P_CONTINUE_AFTER_SKIP = 0.9
B_NOISE = 1.1  # standard deviation, in grades, of the noise ranker B adds to the true grade

POWER_TESTS = 200
AA_TESTS = 400
ALPHA = 0.05


@dataclass(frozen=True)
class Query:
    text: str
    grades: dict[str, int]  # every judged document of the query
    a: list[str]  # ranker A's top DEPTH
    b: list[str]  # ranker B's top DEPTH


def load_queries() -> list[Query]:
    """Both rankers' top-10 for every ESCI query with at least MIN_JUDGED judged documents."""
    rng = np.random.default_rng(20080101)
    queries = []
    for entry in json.loads(JUDGMENTS.read_text())["judgmentRatings"]:
        docs = [rating["docId"] for rating in entry["ratings"]]
        if len(docs) < MIN_JUDGED:
            continue
        grades = np.array([GRADE[float(rating["rating"])] for rating in entry["ratings"]])
        shuffled = rng.permutation(len(docs))
        ideal = shuffled[np.argsort(-grades[shuffled], kind="stable")]
        noisy = np.argsort(-(grades + rng.normal(0.0, B_NOISE, len(docs))), kind="stable")
        queries.append(Query(
            text=entry["query"],
            grades=dict(zip(docs, (int(g) for g in grades), strict=True)),
            a=[docs[i] for i in ideal[:DEPTH]],
            b=[docs[i] for i in noisy[:DEPTH]],
        ))
    return queries


@pytest.fixture(scope="module")
def queries() -> list[Query]:
    return load_queries()


def mean_ndcg(queries: list[Query], ranker: str) -> float:
    ranked = np.array([[q.grades[d] for d in getattr(q, ranker)] for q in queries])
    ideal = np.array([sorted(q.grades.values(), reverse=True)[:DEPTH] for q in queries])
    return float(np.mean(ndcg(ranked, ideal)))


def simulate(queries: list[Query], tests: int, impressions: int, *, a_vs_a: bool,
             seed: int) -> list[list[Impression]]:
    """``tests`` independent tests of ``impressions`` impressions each.

    Each impression: a query drawn uniformly, a random client id, the team-draft interleaving
    of A's and B's top 10 (or A's against itself) seeded as the server seeds it, and cascade
    clicks, simulated for all impressions at once with numpy.
    """
    rng = np.random.default_rng(seed)
    n = tests * impressions
    drawn = rng.integers(len(queries), size=n)
    clients = rng.integers(2**62, size=n)
    grades = np.zeros((n, DEPTH), dtype=np.int64)
    team_a = np.zeros((n, DEPTH), dtype=bool)
    shown = np.zeros((n, DEPTH), dtype=bool)
    for i in range(n):
        query = queries[drawn[i]]
        other = query.a if a_vs_a else query.b
        picks = team_draft(query.a, other, DEPTH,
                           seed_for("simulation", 1, query.text, f"client-{clients[i]}"))
        for rank, pick in enumerate(picks):
            grades[i, rank] = query.grades[pick.doc_id]
            team_a[i, rank] = pick.team == A
            shown[i, rank] = True

    clicked = shown & (rng.random((n, DEPTH)) < P_CLICK[grades])
    goes_on = np.where(clicked, rng.random((n, DEPTH)) >= P_STOP_AFTER_CLICK,
                       rng.random((n, DEPTH)) < P_CONTINUE_AFTER_SKIP)
    examined = np.ones((n, DEPTH), dtype=bool)
    examined[:, 1:] = np.cumprod(goes_on[:, :-1], axis=1, dtype=bool)
    clicked &= examined
    clicks_a = (clicked & team_a).sum(axis=1)
    clicks_b = (clicked & ~team_a).sum(axis=1)

    return [
        [Impression(queries[drawn[i]].text, int(clicks_a[i]), int(clicks_b[i]))
         for i in range(t * impressions, (t + 1) * impressions)]
        for t in range(tests)
    ]


def rejection_rates(tests: list[list[Impression]]) -> tuple[float, float, float]:
    """Share of tests the verdict calls for A, calls at all, and the total-clicks z-test calls."""
    for_a = called = z_called = 0
    for impressions in tests:
        # Only the sign test's decision is read here, so a small bootstrap will do.
        result = verdict(impressions, alpha=ALPHA, resamples=200)
        for_a += result["winner"] == "A"
        called += result["significant"]
        z = total_clicks_test(sum(i.clicks_a for i in impressions),
                              sum(i.clicks_b for i in impressions))
        z_called += z["significant"]
    return for_a / len(tests), called / len(tests), z_called / len(tests)


def test_ranker_a_is_clearly_better_offline(queries: list[Query]) -> None:
    ndcg_a, ndcg_b = mean_ndcg(queries, "a"), mean_ndcg(queries, "b")
    print(f"\n{len(queries)} ESCI queries: mean NDCG@10 of A = {ndcg_a:.4f}, B = {ndcg_b:.4f}")
    assert len(queries) >= 100
    assert ndcg_a == pytest.approx(1.0)  # A is the ideal order
    assert ndcg_a - ndcg_b >= 0.05


def test_the_verdict_finds_the_better_ranker(queries: list[Query]) -> None:
    start = time.perf_counter()
    tests = simulate(queries, POWER_TESTS, RECOMMENDED_IMPRESSIONS, a_vs_a=False, seed=1)
    power, called, z_power = rejection_rates(tests)
    print(f"\nA vs B, {POWER_TESTS} tests of {RECOMMENDED_IMPRESSIONS} impressions: verdict picks A"
          f" in {power:.1%} (significant in {called:.1%}); total-clicks z-test significant in"
          f" {z_power:.1%} ({time.perf_counter() - start:.1f} s)")
    assert power >= 0.80
    assert called - power <= 0.01  # B is (almost) never called the winner


def test_a_against_itself_is_rarely_called(queries: list[Query]) -> None:
    start = time.perf_counter()
    tests = simulate(queries, AA_TESTS, RECOMMENDED_IMPRESSIONS, a_vs_a=True, seed=2)
    _, rejected, z_rejected = rejection_rates(tests)
    print(f"\nA vs A, {AA_TESTS} tests of {RECOMMENDED_IMPRESSIONS} impressions: verdict rejects"
          f" at alpha = {ALPHA} in {rejected:.1%}; total-clicks z-test in {z_rejected:.1%}"
          f" ({time.perf_counter() - start:.1f} s)")
    assert rejected <= 0.07


def test_every_impression_of_a_against_itself_shows_a_s_list(queries: list[Query]) -> None:
    # With identical lists the interleaving is A's list itself; only the teams are drawn.
    query = queries[0]
    picks = team_draft(query.a, query.a, DEPTH, seed_for("simulation", 1, query.text, "c"))
    assert [p.doc_id for p in picks] == query.a
