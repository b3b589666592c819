"""Reference judges (workbench.judges.token_overlap, .semantic): hand-worked token_overlap
cases, the thresholds, several reference answers, and the semantic judge on the bundled
model."""

from __future__ import annotations

import math

import numpy as np
import pytest

from workbench.judges import embedding, registry, semantic
from workbench.judges import token_overlap as overlap
from workbench.judges.base import Hit, OptionError, Query, Setup
from workbench.judges.registry import UnknownJudge
from workbench.judges.semantic import semantic_score
from workbench.judges.token_overlap import normalise_tokens, token_overlap_score

JUDGES = ("token_overlap", "semantic")


def judge(name: str, reference: str | list[str], documents: list[str],
          threshold: float | None = None) -> list[tuple[int, float]]:
    """``(rating, score)`` per document from the registered judge."""
    options = {} if threshold is None else {"threshold": threshold}
    built = registry.create(name, Setup(options))
    refs = tuple(reference) if isinstance(reference, list) else (reference,)
    hits = [Hit(str(i), {"text": d}) for i, d in enumerate(documents)]
    return [(int(v.rating or 0), float(v.score or 0.0))
            for v in built.judge(Query("q", refs), hits).verdicts]

# --- normalise_tokens -------------------------------------------------------------------------


def test_tokens_are_casefolded_and_split_on_punctuation_and_underscore():
    assert normalise_tokens("Hello, WORLD! It's 3.5mm_jack (Wi-Fi)") == [
        "hello", "world", "it", "s", "3", "5mm", "jack", "wi", "fi"]


def test_tokens_are_nfkc_normalised():
    # Full-width letters, the "fi" ligature, a superscript digit; "ß" casefolds to "ss".
    assert normalise_tokens("ＡＢＣ ﬁle x² Straße") == ["abc", "file", "x2", "strasse"]


def test_combining_marks_stay_inside_their_word():
    # Devanagari vowel signs and viramas are combining marks, not letters for Python's \w.
    assert normalise_tokens("हिन्दी भाषा") == ["हिन्दी", "भाषा"]


def test_no_tokens_in_empty_or_punctuation_only_text():
    assert normalise_tokens("") == []
    assert normalise_tokens(" -- !? ") == []


# --- token_overlap_score ----------------------------------------------------------------------


def test_every_reference_token_present_scores_one():
    assert token_overlap_score("red running shoes", "Shoes for running, in red") == 1.0


def test_partial_overlap_is_the_fraction_of_distinct_reference_tokens():
    assert token_overlap_score("red running shoes", "blue running shoes") == pytest.approx(2 / 3)
    # Distinct tokens: "shoes" counts once, so 1 of {"shoes", "red"} is found.
    assert token_overlap_score("shoes shoes red", "shoes") == 0.5


def test_no_overlap_scores_zero():
    assert token_overlap_score("wireless earbuds", "stainless steel kitchen knife") == 0.0


def test_case_and_punctuation_do_not_matter():
    assert token_overlap_score("Noise-Cancelling HEADPHONES", "noise cancelling headphones") == 1.0


def test_substring_matches_count_both_ways():
    assert token_overlap_score("earbud", "wireless earbuds") == 1.0
    assert token_overlap_score("earbuds", "an earbud") == 1.0
    assert token_overlap_score("headphones", "phones") == 1.0


def test_substring_rule_gives_the_same_answer_on_both_lookup_paths():
    # Few document tokens: the document's tokens are scanned; many: the reference token's
    # substrings are looked up. Both must find "earbud" inside "earbuds" and not "earl".
    filler = " ".join(f"filler{i}" for i in range(40))
    for extra in ("", filler):
        assert token_overlap_score("earbuds", f"earbud {extra}") == 1.0
        assert token_overlap_score("earbuds", f"earl {extra}") == 0.0


def test_tokens_shorter_than_three_characters_only_match_exactly():
    # "tv" is inside "atv" but too short for the substring rule; "stand" is inside "stands".
    assert token_overlap_score("tv stand", "atv stands") == 0.5
    assert token_overlap_score("a", "cat") == 0.0
    assert token_overlap_score("headphones", "he") == 0.0
    assert token_overlap_score("tv", "TV") == 1.0


def test_whole_reference_inside_the_document_scores_one():
    # Token by token only "usb" is found ("c" is too short), but the phrase "usb c" is inside
    # "usb cable".
    assert token_overlap_score("USB C", "USB cable") == 1.0
    assert token_overlap_score("USB C", "cable, usb") == 0.5
    # The phrase must start where a document token starts: "dusb cable" does not hold "usb c"
    # ("usb" is still found inside "dusb" by the token rule).
    assert token_overlap_score("USB C", "dusb cable") == 0.5


def test_empty_reference_or_document_scores_zero():
    assert token_overlap_score("", "anything at all") == 0.0
    assert token_overlap_score("?!", "anything at all") == 0.0
    assert token_overlap_score("red shoes", "") == 0.0


# --- judge ------------------------------------------------------------------------------------


DOCUMENTS = ["red running shoes", "blue running shoes", "red sandals"]  # 1.0, 2/3, 1/3


def test_token_overlap_ratings_use_the_default_threshold_of_one_half():
    assert overlap.DEFAULT_THRESHOLD == 0.5
    results = judge("token_overlap", "red running shoes", DOCUMENTS)
    assert [rating for rating, _ in results] == [1, 1, 0]
    assert [score for _, score in results] == pytest.approx([1.0, 2 / 3, 1 / 3])


def test_a_given_threshold_replaces_the_default_and_is_inclusive():
    assert [r for r, _ in judge("token_overlap", "red running shoes", DOCUMENTS, 0.7)] == [1, 0, 0]
    assert [r for r, _ in judge("token_overlap", "red running shoes", DOCUMENTS, 2 / 3)] == [
        1, 1, 0]
    assert [r for r, _ in judge("token_overlap", "red running shoes", DOCUMENTS, 0.0)] == [
        1, 1, 1]


def test_unknown_judge_is_refused_with_the_list_of_judges():
    with pytest.raises(UnknownJudge, match=r"Unknown judge \[bm25\]") as info:
        judge("bm25", "ref", ["doc"])
    for name in JUDGES:
        assert name in str(info.value)


def test_non_finite_threshold_is_refused():
    with pytest.raises(OptionError, match="between 0 and 1, got: nan") as info:
        judge("token_overlap", "ref", ["doc"], math.nan)
    assert info.value.option == "threshold"


def test_every_judge_has_a_default_threshold():
    assert overlap.DEFAULT_THRESHOLD == semantic.DEFAULT_THRESHOLD == 0.5


def test_a_hit_takes_the_best_of_several_reference_answers():
    results = judge("token_overlap", ["leather wallet", "red running shoes"], DOCUMENTS)
    assert results == [(1, 1.0), (1, pytest.approx(2 / 3)), (0, pytest.approx(1 / 3))]
    built = registry.create("token_overlap", Setup({}))
    verdicts = built.judge(Query("q", ("red sandals", "red running shoes")),
                           [Hit("a", {"t": "red running shoes"}), Hit("b", {"t": "blue hat"})])
    assert [v.reference for v in verdicts.verdicts] == [1, None]


def test_no_documents_give_no_ratings():
    assert judge("token_overlap", "ref", []) == []
    assert semantic_score("ref", []) == []


# --- semantic ---------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def minilm() -> embedding.MiniLM:
    return embedding.model()


def test_semantic_scores_are_the_cosines_of_the_embeddings(minilm):
    reference = "a cat sits on the mat"
    documents = ["a kitten is sitting on a rug", "stock markets fell sharply"]
    vectors = minilm.encode([reference, *documents])
    expected = [
        float(v @ vectors[0] / (np.linalg.norm(v) * np.linalg.norm(vectors[0])))
        for v in vectors[1:]
    ]
    assert semantic_score(reference, documents) == pytest.approx(expected, abs=1e-5)


def test_semantic_judge_rates_a_paraphrase_relevant_and_an_unrelated_text_not(minilm):
    results = judge("semantic", "wireless noise cancelling earbuds", [
        "Bluetooth in-ear headphones with active noise cancellation",
        "Stainless steel kitchen knife set",
    ])
    assert [rating for rating, _ in results] == [1, 0]
    assert results[0][1] > 0.6 and results[1][1] < 0.2
    # The lexical judge misses the paraphrase: of the reference's four words only "noise" is
    # in the document ("cancelling" and "cancellation" are not inside one another).
    assert judge("token_overlap", "wireless noise cancelling earbuds",
                 ["Bluetooth headphones with active noise cancellation"]) == [(0, 0.25)]


def test_semantic_threshold_applies(minilm):
    [(rating, score)] = judge("semantic", "a cat sits on the mat", ["a kitten on a rug"])
    assert rating == 1
    assert judge("semantic", "a cat sits on the mat", ["a kitten on a rug"], score + 1e-3) == [
        (0, pytest.approx(score, abs=1e-6))]
