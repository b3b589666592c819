"""Reading ratings from LLM judge answers (docs/algorithms.md, "Parsing")."""

import pytest

from workbench.judges.ratings import ParseFailure, parse_ratings, read_ratings
from workbench.judgments.llm.prompt import RELEVANT_IRRELEVANT, SCORE0_1

IDS = {"B01", "B02", "B03"}


def score(text: str, allowed=IDS) -> dict[str, str]:
    return parse_ratings(text, SCORE0_1, allowed)


def binary(text: str, allowed=IDS) -> dict[str, str]:
    return parse_ratings(text, RELEVANT_IRRELEVANT, allowed)


# --- accepted shapes ----------------------------------------------------------------------------

@pytest.mark.parametrize("text", [
    '{"ratings": [{"id": "idx::B01", "rating_score": 0.9}, {"id": "idx::B02", "rating_score": 0}]}',
    '[{"id": "idx::B01", "rating_score": 0.9}, {"id": "idx::B02", "rating_score": 0}]',
    '```json\n{"ratings": [{"id": "idx::B01", "rating_score": 0.9},\n'
    '{"id": "idx::B02", "rating_score": 0}]}\n```',
    'Here are the ratings:\n\n```json\n[{"id": "idx::B01", "rating_score": 0.9}, '
    '{"id": "idx::B02", "rating_score": 0}]\n```\nHope this helps [really].',
    '```\n[{"id": "idx::B01", "rating_score": 0.9}, {"id": "idx::B02", "rating_score": 0}]\n```',
    'Sure! I rated [2] hits {see below}: {"ratings": [{"id": "idx::B01", "rating_score": 0.9}, '
    '{"id": "idx::B02", "rating_score": 0}]} Let me know.',
    '`[{"id": "idx::B01", "rating_score": 0.9}, {"id": "idx::B02", "rating_score": 0}]`',
    '{"ratings": [{"id": "idx::B01",\n "rating_score": 0.9}, {"id": "idx::B02", '
    '"rating_score": 0}], "note": "done"}',
    '  \n{"ratings":[{"id":"idx::B01","rating_score":0.9},{"id":"idx::B02","rating_score":0}]}\n',
])
def test_every_accepted_shape_gives_the_same_ratings(text) -> None:
    assert score(text) == {"B01": "0.9", "B02": "0.0"}


def test_a_single_rating_object_is_a_list_of_one() -> None:
    assert score('{"id": "idx::B03", "rating_score": 1}') == {"B03": "1.0"}
    assert score('Rating: {"id": "idx::B03", "rating_score": 0.5} (done)') == {"B03": "0.5"}


def test_a_fenced_block_is_preferred_over_earlier_brackets_in_prose() -> None:
    text = 'Scores [1] and [2]:\n```json\n[{"id": "i::B01", "rating_score": 0.3}]\n```'
    assert score(text) == {"B01": "0.3"}


def test_embedded_json_skips_brackets_that_hold_no_ratings() -> None:
    assert score('Scale [0, 1]. {"ratings": [{"id": "i::B02", "rating_score": 0.4}]}') == {
        "B02": "0.4"}


def test_raw_newlines_inside_strings_are_tolerated() -> None:
    assert score('[{"id": "i::B01", "rating_score": 0.2, "why": "line\nbreak"}]') == {"B01": "0.2"}


# --- empty answers and failures ------------------------------------------------------------------

@pytest.mark.parametrize("text", ['{"ratings": []}', "[]", "```json\n[]\n```",
                                  'Nothing to rate: {"ratings": []}'])
def test_an_empty_ratings_list_is_not_a_failure(text) -> None:
    assert score(text) == {}


@pytest.mark.parametrize("text", [
    "", "   \n ", "I cannot rate these documents.", '{"ratings": [{"id": "i::B01", "rat',
    "42", '"just a string"', '{"error": "rate limited"}', "[1, 2, 3]", "```json\n```",
])
def test_text_without_ratings_json_is_a_parse_failure(text) -> None:
    with pytest.raises(ParseFailure) as caught:
        score(text)
    assert "Could not parse ratings from the model answer" in str(caught.value)
    assert isinstance(caught.value, ValueError)


def test_the_failure_message_shows_the_start_of_the_answer() -> None:
    with pytest.raises(ParseFailure, match="got: I cannot rate"):
        score("I cannot rate these documents.")
    with pytest.raises(ParseFailure) as caught:
        score("x" * 1000)
    assert str(caught.value).endswith("x" * 200 + "...")


# --- ids ----------------------------------------------------------------------------------------

def test_ids_outside_the_chunk_are_dropped() -> None:
    text = '[{"id": "idx::B01", "rating_score": 1}, {"id": "idx::ZZZ", "rating_score": 1}]'
    assert score(text) == {"B01": "1.0"}


def test_bare_doc_ids_are_accepted_and_prefixes_stripped() -> None:
    text = ('[{"id": "B01", "rating_score": 0.1}, {"id": "other-index::B02", "rating_score": 0.2},'
            ' {"rating_score": 0.3}, {"id": null, "rating_score": 0.3}, "B03", 7]')
    assert score(text) == {"B01": "0.1", "B02": "0.2"}


def test_doc_ids_containing_the_separator() -> None:
    allowed = {"a::b", "7"}
    text = ('[{"id": "idx::a::b", "rating_score": 0.5}, {"id": "a::b", "rating_score": 0.6},'
            ' {"id": 7, "rating_score": 0.7}]')
    assert score(text, allowed) == {"a::b": "0.6", "7": "0.7"}


def test_the_last_rating_of_a_repeated_id_wins() -> None:
    text = ('[{"id": "i::B01", "rating_score": 0.1}, {"id": "i::B02", "rating_score": 0.5},'
            ' {"id": "B01", "rating_score": 0.8}]')
    assert score(text) == {"B01": "0.8", "B02": "0.5"}


# --- SCORE0_1 values ----------------------------------------------------------------------------

@pytest.mark.parametrize("raw, stored", [
    ("1", "1.0"), ("0", "0.0"), ("0.85", "0.85"), ("1e-5", "1.0E-5"), ("1E-0", "1.0"),
    ("0.001", "0.001"), ("0.0001", "1.0E-4"), ("-0.0", "-0.0"), ("1.00", "1.0"),
])
def test_numbers_are_stored_as_java_double_strings(raw, stored) -> None:
    assert score(f'[{{"id": "i::B01", "rating_score": {raw}}}]') == {"B01": stored}


@pytest.mark.parametrize("raw, reason", [
    ("7", "rating_score 7 is outside the scale 0 to 1"),
    ("1E+2", "rating_score 100.0 is outside the scale 0 to 1"),
    ("-0.5", "rating_score -0.5 is outside the scale 0 to 1"),
    ("1.0000001", "rating_score 1.0000001 is outside the scale 0 to 1"),
    ('"0.5"', 'rating_score "0.5" is not a number'),
    ("NaN", "rating_score NaN is not a number"),
    ("1e999", "rating_score Infinity is not a finite number"),
    ("null", "rating_score null is not a number"),
])
def test_a_score_off_the_scale_is_refused_with_its_reason(raw, reason) -> None:
    """Not the plugin's way (it stores any number): a rating off the scale would be stored
    as a grade no metric expects, so it is a failure of that document (docs/algorithms.md,
    "Parsing")."""
    text = f'[{{"id": "i::B01", "rating_score": {raw}}}, {{"id": "i::B02", "rating_score": 1}}]'
    assert read_ratings(text, SCORE0_1, IDS) == ({"B02": "1.0"}, {"B01": reason})


def test_a_usable_rating_wins_over_a_refused_one_for_the_same_document() -> None:
    text = ('[{"id": "i::B01", "rating_score": 3}, {"id": "i::B01", "rating_score": 0.5},'
            ' {"id": "i::B01", "rating_score": 9}]')
    assert read_ratings(text, SCORE0_1, IDS) == ({"B01": "0.5"}, {})
    assert read_ratings('[{"id": "B02", "rating_score": "MAYBE"}]', RELEVANT_IRRELEVANT,
                        IDS) == ({}, {"B02": 'rating_score "MAYBE" is neither RELEVANT nor '
                                          "IRRELEVANT"})


@pytest.mark.parametrize("raw", ['"0.5"', '"1"', "true", "false", "null", "NaN", "Infinity",
                                 "-Infinity", "1e999", "[0.5]", '{"v": 0.5}', '"RELEVANT"'])
def test_non_numbers_are_rejected_for_scores(raw) -> None:
    text = f'[{{"id": "i::B01", "rating_score": {raw}}}, {{"id": "i::B02", "rating_score": 0.5}}]'
    assert score(text) == {"B02": "0.5"}


# --- RELEVANT_IRRELEVANT values -----------------------------------------------------------------

def test_binary_labels_map_to_one_and_zero() -> None:
    text = ('{"ratings": [{"id": "i::B01", "rating_score": "RELEVANT"},'
            ' {"id": "i::B02", "rating_score": "IRRELEVANT"}]}')
    assert binary(text) == {"B01": "1.0", "B02": "0.0"}


@pytest.mark.parametrize("raw", ['"relevant"', '"Relevant"', '" RELEVANT"', '"PARTIAL"', "1",
                                 "0.0", "true", "null"])
def test_anything_but_the_exact_labels_is_skipped(raw) -> None:
    text = (f'[{{"id": "i::B01", "rating_score": {raw}}},'
            ' {"id": "i::B02", "rating_score": "IRRELEVANT"}]')
    assert binary(text) == {"B02": "0.0"}


def test_an_unknown_rating_type_is_a_programming_error() -> None:
    with pytest.raises(ValueError, match="rating type"):
        parse_ratings("[]", "BINARY", IDS)
