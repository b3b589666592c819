"""Evret's rules in the workbench: token_overlap's minTokens and queryBoost (hand-worked),
metrics with a known number of relevant documents, expected ids, the one-to-one crediting of
several reference answers, and reading a context sufficiency answer."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import pytest

from workbench.evaluation.metrics import list_metrics
from workbench.evaluation.request import Request
from workbench.evaluation.run import evaluate, one_to_one
from workbench.judges import registry
from workbench.judges.base import Hit, Judged, OptionError, Query, Setup, Usage, Verdict
from workbench.judges.context import parse
from workbench.judges.token_overlap import token_overlap_score

# --- token_overlap: minTokens -----------------------------------------------------------------


def test_min_tokens_zeroes_a_score_with_too_few_shared_tokens():
    # "blue running shoes" holds 2 of {red, running, shoes}: 2/3, kept while 2 tokens suffice.
    assert token_overlap_score("red running shoes", "blue running shoes") == pytest.approx(2 / 3)
    assert token_overlap_score("red running shoes", "blue running shoes",
                               min_tokens=2) == pytest.approx(2 / 3)
    assert token_overlap_score("red running shoes", "blue running shoes", min_tokens=3) == 0.0


def test_min_tokens_counts_distinct_tokens_and_substring_matches():
    # Reference tokens {shoes, red}: "shoes" twice is one token; only "shoes" is found.
    assert token_overlap_score("shoes shoes red", "shoes", min_tokens=2) == 0.0
    # "earbud" is found in "earbuds" (substring rule): 2 found tokens of {wireless, earbud}.
    assert token_overlap_score("wireless earbud", "earbuds wireless", min_tokens=2) == 1.0


def test_min_tokens_does_not_apply_to_a_reference_found_whole():
    # The whole phrase in the document scores 1.0 before the minimum (Evret's containment).
    assert token_overlap_score("usb c", "usb cable", min_tokens=5) == 1.0


def test_min_tokens_one_is_todays_score():
    cases = [("red running shoes", "blue running shoes"), ("wireless earbuds", "a knife"),
             ("shoes shoes red", "shoes"), ("the hat", "the scarf")]
    for reference, document in cases:
        assert token_overlap_score(reference, document, min_tokens=1) == \
            token_overlap_score(reference, document)


# --- token_overlap: queryBoost ----------------------------------------------------------------


def test_query_boost_adds_a_tenth_once_when_a_shared_token_is_in_the_query():
    # Shared {running, shoes} = 2/3; "running" (and "shoes") are in the query: +0.1 once.
    assert token_overlap_score("red running shoes", "blue running shoes",
                               query="running shoes") == pytest.approx(2 / 3 + 0.1)
    # "red" is in the query but not shared: no boost.
    assert token_overlap_score("red running shoes", "blue running shoes",
                               query="red hat") == pytest.approx(2 / 3)


def test_query_boost_is_capped_at_one_and_needs_a_score():
    # All three tokens found, not as a phrase: 1.0, and the boost cannot lift it further.
    assert token_overlap_score("shoes red running", "red running shoes",
                               query="shoes") == 1.0
    # Nothing shared: nothing to boost.
    assert token_overlap_score("leather wallet", "red hat", query="leather") == 0.0
    # A score the minimum zeroed is not boosted.
    assert token_overlap_score("red running shoes", "blue running shoes", min_tokens=3,
                               query="running") == 0.0


def test_query_boost_can_carry_a_hit_over_the_threshold():
    # {slim, brown, leather, wallet, case}: brown and leather found, 2/5 = 0.4 < 0.5; the query
    # holds "leather": 0.4 + 0.1 = 0.5, relevant at the default threshold.
    hits = [Hit("a", {"title": "brown leather belt"})]
    query = Query("leather", ("slim brown leather wallet case",))
    plain = registry.create("token_overlap", Setup()).judge(query, hits).verdicts[0]
    boosted = registry.create("token_overlap",
                              Setup({"queryBoost": True})).judge(query, hits).verdicts[0]
    assert (plain.score, plain.relevant) == (pytest.approx(0.4), False)
    assert (boosted.score, boosted.relevant) == (pytest.approx(0.5), True)
    strict = registry.create("token_overlap", Setup({"queryBoost": True, "minTokens": 3}))
    assert strict.judge(query, hits).verdicts[0].score == 0.0


@pytest.mark.parametrize("options, option, message", [
    ({"minTokens": 0}, "minTokens", "minTokens must be an integer between 1 and 10000, got: 0"),
    ({"minTokens": 2.5}, "minTokens", "minTokens must be an integer between 1 and 10000"),
    ({"minTokens": True}, "minTokens", "minTokens must be an integer"),
    ({"queryBoost": "yes"}, "queryBoost", "queryBoost must be true or false, got: yes"),
])
def test_bad_token_overlap_options(options: dict[str, Any], option: str, message: str):
    with pytest.raises(OptionError) as caught:
        registry.create("token_overlap", Setup(options))
    assert caught.value.option == option and str(caught.value).startswith(message)


def test_semantic_judge_refuses_token_options():
    with pytest.raises(OptionError):
        registry.create("semantic", Setup({"minTokens": 2}))


# --- metrics ----------------------------------------------------------------------------------


def evret(flags: list[bool], total: int, k: int) -> dict[str, float]:
    """Evret's definitions with plain loops: binary gains, R relevant documents."""
    found = sum(flags[:k])
    dcg = sum(1 / math.log2(i + 2) for i, f in enumerate(flags[:k]) if f)
    idcg = sum(1 / math.log2(i + 2) for i in range(min(total, k)))
    precisions, hits = [], 0
    for i, flag in enumerate(flags[:k], start=1):
        if flag:
            hits += 1
            precisions.append(hits / i)
    first = next((i for i, f in enumerate(flags[:k], start=1) if f), None)
    return {f"NDCG@{k}": dcg / idcg, f"MAP@{k}": sum(precisions) / total,
            "MRR": 1 / first if first else 0.0, f"Precision@{k}": found / k,
            f"HitRate@{k}": 1.0 if found else 0.0, f"Recall@{k}": found / total}


def verdicts(flags: list[bool]) -> list[Verdict]:
    return [Verdict(1.0 if f else 0.0, f) for f in flags]


def test_evrets_worked_example():
    flags = [False, False, True, False, True]  # d1 d4 d2 d9 d8, relevant {d2, d8, d10}
    metrics = list_metrics(verdicts(flags), 5, total=3)
    assert metrics == pytest.approx(evret(flags, 3, 5))
    assert list(metrics) == ["NDCG@5", "MAP@5", "MRR", "Precision@5", "HitRate@5", "Recall@5"]
    assert metrics["NDCG@5"] == pytest.approx(0.8869 / 2.1309, abs=1e-4)
    assert round(metrics["NDCG@5"], 4) == 0.4162 and round(metrics["MAP@5"], 4) == 0.2444


def test_without_a_total_the_figures_are_todays():
    flags = [False, True, True]
    metrics = list_metrics(verdicts(flags), 3)
    assert metrics == pytest.approx({"NDCG@3": (1 / math.log2(3) + 1 / 2) / (1 + 1 / math.log2(3)),
                                     "MAP@3": (1 / 2 + 2 / 3) / 2, "MRR": 0.5,
                                     "Precision@3": 2 / 3, "HitRate@3": 1.0})
    assert list_metrics(verdicts([False, False]), 3)["HitRate@3"] == 0.0


def test_a_total_below_the_relevant_found_is_raised_to_them():
    metrics = list_metrics(verdicts([True, True, True]), 3, total=2)
    assert metrics["Recall@3"] == 1.0 and metrics["MAP@3"] == 1.0 and metrics["NDCG@3"] == 1.0


def test_graded_ideal_fills_missed_documents_with_the_lowest_relevant_gain():
    # Grades 3, 0, 2 with relevant from 2; R = 3: the missed document counts at grade 2.
    graded = [Verdict(3.0, True), Verdict(0.0, False), Verdict(2.0, True)]
    dcg = 7 + 3 / 2
    ideal = 7 + 3 / math.log2(3) + 3 / 2
    assert list_metrics(graded, 3, total=3)["NDCG@3"] == pytest.approx(dcg / ideal)


# --- expected ids and one-to-one crediting ----------------------------------------------------

REFERENCES = ("solar panels convert sunlight", "wind turbines spin generators",
              "tidal barrages store seawater")
TEXTS = {"d1": "history of coal mining", "d4": "oil prices rose",
         "d2": "solar panels convert sunlight into power", "d9": "gas boilers heat homes",
         "d8": "modern wind turbines spin generators",
         "d2b": "solar panels convert sunlight, again"}


def request(ids: list[str], **changes: Any) -> Request:
    hits = [Hit(i, {"text": TEXTS[i]}) for i in ids]
    base: dict[str, Any] = {"query": Query("renewable energy", REFERENCES), "hits": hits,
                            "source": "hits", "k": 5, "judge": "token_overlap"}
    base.update(changes)
    return Request(**base)


def test_several_references_are_credited_one_to_one():
    done = evaluate(None, request(["d1", "d4", "d2", "d9", "d8"]))  # type: ignore[arg-type]
    assert done.credited == [None, None, 0, None, 1]
    assert done.counted == [False, False, True, False, True]
    assert done.relevant_total == 3
    assert done.metrics == pytest.approx(evret(done.counted, 3, 5))


def test_a_later_hit_matching_a_credited_reference_is_not_counted():
    done = evaluate(None, request(["d2", "d2b", "d8"]))  # type: ignore[arg-type]
    assert [v.relevant for v in done.verdicts] == [True, True, True]  # the judge's calls
    assert done.credited == [0, None, 1] and done.counted == [True, False, True]
    assert done.metrics["Precision@5"] == pytest.approx(2 / 3)
    assert done.metrics["Recall@5"] == pytest.approx(2 / 3)


class WordJudge:
    """A plug-in-like reference judge without ``reference_matches``: a hit is relevant when a
    reference's first word is in it; every call costs one (pretend) LLM call."""

    name = "word"
    needs_reference = True

    def judge(self, query: Query, hits: Sequence[Hit]) -> Judged:
        words = [reference.split()[0] for reference in query.references]
        verdicts = [Verdict(1.0, True) if any(w in hit.text() for w in words)
                    else Verdict(0.0, False) for hit in hits]
        return Judged(verdicts, Usage(calls=1))


def test_one_to_one_asks_a_judge_without_matches_once_per_reference():
    judge = WordJudge()
    query = Query("q", ("solar x", "wind y", "tidal z"))
    hits = [Hit(i, {"text": t}) for i, t in [("a", "solar"), ("b", "solar again"),
                                             ("c", "wind and solar")]]
    usage = Usage()
    credited = one_to_one(judge, query, hits, judge.judge(query, hits).verdicts, usage)
    # b matches only "solar", credited to a; c matches solar (taken) and wind (free).
    assert credited == [0, None, 1]
    assert usage.calls == 3  # one call per reference answer


def test_expected_ids_decide_relevance():
    done = evaluate(None, request(["d1", "d4", "d2", "d9", "d8"],  # type: ignore[arg-type]
                                  expected_ids=["d2", "d8", "d10"], judge="token_overlap"))
    assert done.counted == [False, False, True, False, True] and done.credited is None
    assert done.relevant_total == 3
    assert done.metrics == pytest.approx(evret(done.counted, 3, 5))
    # The ids win over the judge: d1 is expected though no reference matches it.
    other = evaluate(None, request(["d1", "d2"], expected_ids=["d1"]))  # type: ignore[arg-type]
    assert other.counted == [True, False] and other.metrics["Recall@5"] == 1.0


def test_one_reference_is_not_one_to_one():
    done = evaluate(None, request(["d2", "d8"],  # type: ignore[arg-type]
                                  query=Query("q", ("solar panels convert sunlight",))))
    assert done.counted is None and done.credited is None and done.relevant_total is None
    assert "Recall@5" not in done.metrics


def test_expected_count_gives_recall_with_the_judges_verdicts():
    done = evaluate(None, request(["d2", "d1"], expected_count=4,  # type: ignore[arg-type]
                                  query=Query("q", ("solar panels convert sunlight",))))
    assert done.relevant_total == 4
    assert done.metrics["Recall@5"] == pytest.approx(1 / 4)
    assert done.metrics["MAP@5"] == pytest.approx(1 / 4)


# --- context sufficiency answers --------------------------------------------------------------


def test_context_answers_are_read_leniently():
    verdict = parse('Sure: {"sufficient": false, "rationale": "x", "missing": ["y", 3]}')
    assert verdict is not None and verdict.sufficient is False and verdict.missing == ["y", "3"]
    yes = parse('```json\n{"sufficient": "yes", "rationale": "ok"}\n```')
    assert yes is not None and yes.sufficient is True and yes.missing == []
    assert parse('{"ratings": []}') is None and parse("no json") is None
