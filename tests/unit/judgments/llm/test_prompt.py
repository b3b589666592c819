"""Prompt building for LLM judgments (docs/algorithms.md, "Prompt"), hand-worked."""

import json

import pytest

from workbench.judgments.llm.prompt import (
    DEFAULT_TEMPLATE,
    RATING_TYPES,
    RELEVANT_IRRELEVANT,
    SCORE0_1,
    context_string,
    hits_json,
    response_format,
    system_prompt,
    user_content,
    validate_rating_type,
    validate_template,
)
from workbench.llm.base import json_escape, messages_string

HITS_MESSAGE = (
    "Prompt template must include either {{hits}} or {{results}} placeholder to provide "
    "documents for rating. Example: 'Query: {{queryText}}\\n\\nDocuments: {{hits}}'"
)
QUERY_MESSAGE = (
    "Prompt template must include either {{queryText}} or {{searchText}} placeholder to provide "
    "the search query. Example: 'Query: {{queryText}}\\n\\nDocuments: {{hits}}'"
)
LENGTH_MESSAGE = "Prompt template exceeds maximum length of 10000 characters"


def test_constants() -> None:
    assert SCORE0_1 == "SCORE0_1"
    assert RELEVANT_IRRELEVANT == "RELEVANT_IRRELEVANT"
    assert tuple(RATING_TYPES) == ("SCORE0_1", "RELEVANT_IRRELEVANT")
    assert DEFAULT_TEMPLATE == "SearchText: {{searchText}}; Hits: {{hits}}"


# --- system prompts -----------------------------------------------------------------------------

def test_score_prompt_gives_the_five_level_scale() -> None:
    prompt = system_prompt(SCORE0_1)
    assert prompt.startswith("You are an expert search relevance rater.")
    for level in ("- 1.0: ", "- 0.7 to 0.9: ", "- 0.4 to 0.6: ", "- 0.1 to 0.3: ", "- 0.0: "):
        assert level in prompt
    assert "- RELEVANT:" not in prompt


def test_binary_prompt_gives_two_levels() -> None:
    prompt = system_prompt(RELEVANT_IRRELEVANT)
    assert "- RELEVANT: a perfect match, highly relevant\n" in prompt
    assert "- IRRELEVANT: completely irrelevant\n" in prompt
    assert "0.7 to 0.9" not in prompt


def test_both_prompts_share_the_answer_rules() -> None:
    score, binary = system_prompt(SCORE0_1), system_prompt(RELEVANT_IRRELEVANT)
    tail = score[score.index("\nJudge each hit"):]
    assert binary.endswith(tail)
    assert "exact matches, semantic relevance and the overall context" in tail
    assert "SearchText" in tail and "Hits" in tail and "reference" in tail
    assert "EVERY hit" in tail and "ONLY a JSON object" in tail
    assert '{"ratings": [{"id": "<id of the hit>", "rating_score": ' in tail
    assert "no explanation" in tail and "markdown" in tail


def test_unknown_rating_type_is_a_programming_error() -> None:
    with pytest.raises(ValueError, match="Invalid RatingType: 'score0_1'"):
        system_prompt("score0_1")
    with pytest.raises(ValueError):
        response_format("BINARY")


# --- validation ---------------------------------------------------------------------------------

@pytest.mark.parametrize("template", [None, "", "   ", "\n\t ", "\x00\x1f "])
def test_missing_or_blank_template_means_the_default(template) -> None:
    assert validate_template(template) is None


@pytest.mark.parametrize("template, error", [
    ("Query: {{queryText}}\n\nDocuments: {{hits}}", None),
    ("{{searchText}} {{results}}", None),
    ("{{results}}{{queryText}}{{unknown}}", None),
    ("Query: {{queryText}}", HITS_MESSAGE),
    ("Query: {{queryText}} Docs: {{ hits }}", HITS_MESSAGE),  # exact text only
    ("Query: {{queryText}} Docs: {{Hits}}", HITS_MESSAGE),
    ("Documents: {{hits}}", QUERY_MESSAGE),
    ("Q: {{ queryText }} D: {{hits}}", QUERY_MESSAGE),
    ("nothing at all", HITS_MESSAGE),  # the hits check comes first
    ("\u00a0", HITS_MESSAGE),  # Java's trim() keeps U+00A0: not blank
])
def test_template_placeholders(template, error) -> None:
    assert validate_template(template) == error


def test_validation_messages_carry_a_literal_backslash_n() -> None:
    message = validate_template("{{queryText}}")
    assert message is not None
    assert "'Query: {{queryText}}\\n\\nDocuments: {{hits}}'" in message
    assert "\n" not in message


def test_template_length_counts_utf16_units_and_is_checked_first() -> None:
    base = "{{queryText}} {{hits}} "
    assert validate_template(base + "x" * (10000 - len(base))) is None
    assert validate_template(base + "x" * (10001 - len(base))) == LENGTH_MESSAGE
    assert validate_template("x" * 10001) == LENGTH_MESSAGE  # before the placeholder checks
    emoji = base + "😀" * ((10000 - len(base)) // 2)  # 2 units each
    assert len(emoji.encode("utf-16-le")) // 2 <= 10000
    assert validate_template(emoji) is None
    assert validate_template(emoji + "😀") == LENGTH_MESSAGE


@pytest.mark.parametrize("value, error", [
    (None, None),
    ("SCORE0_1", None),
    ("RELEVANT_IRRELEVANT", None),
    ("score0_1", "Invalid RatingType: 'score0_1'. Valid values are: SCORE0_1, RELEVANT_IRRELEVANT"),
    ("", "Invalid RatingType: ''. Valid values are: SCORE0_1, RELEVANT_IRRELEVANT"),
    ("BINARY", "Invalid RatingType: 'BINARY'. Valid values are: SCORE0_1, RELEVANT_IRRELEVANT"),
    (5, "Invalid RatingType: '5'. Valid values are: SCORE0_1, RELEVANT_IRRELEVANT"),
    (True, "Invalid RatingType: 'true'. Valid values are: SCORE0_1, RELEVANT_IRRELEVANT"),
])
def test_rating_type_validation(value, error) -> None:
    assert validate_rating_type(value) == error


# --- escaping and the messages string ------------------------------------------------------------

def test_json_escape_touches_only_five_characters() -> None:
    assert json_escape('a\\b"c\nd\re\tf') == 'a\\\\b\\"c\\nd\\re\\tf'
    untouched = "\b\f\x01/é😀\u2028'<>"
    assert json_escape(untouched) == untouched
    assert json_escape('\\"') == '\\\\\\"'  # backslash first, then the quote


def test_messages_string_is_the_plugin_shell() -> None:
    assert messages_string("Be fair.", 'Say "hi"\n') == (
        '[{"role":"system","content":"Be fair."},'
        '{"role":"user","content":"Say \\"hi\\"\\n"}]'
    )
    system, user = system_prompt(SCORE0_1), "q\t\\ \"x\"\r\n"
    assert json.loads(messages_string(system, user)) == [
        {"role": "system", "content": system}, {"role": "user", "content": user}]


# --- hit contexts and the hits JSON --------------------------------------------------------------

SOURCE = {"title": "Red shoes", "price": 19.5, "stock": 3, "tags": ["a", "b"], "ok": True,
          "none": None, "small": 1e-05, "whole": 2.0, "name": "Ça\u001f"}


def test_context_with_fields_keeps_present_fields_in_the_requested_order() -> None:
    assert context_string(SOURCE, ["stock", "missing", "title"]) == (
        '{"stock":3,"title":"Red shoes"}')
    assert context_string(SOURCE, ["missing"]) == "{}"
    assert context_string(SOURCE, ["title", "title"]) == '{"title":"Red shoes"}'


def test_context_without_fields_is_the_whole_source_as_compact_java_json() -> None:
    assert context_string(SOURCE, []) == (
        '{"title":"Red shoes","price":19.5,"stock":3,"tags":["a","b"],"ok":true,"none":null,'
        '"small":1.0E-5,"whole":2.0,"name":"Ça\\u001F"}'
    )
    assert context_string({"nested": {"a": [1, {"b": "x\"y"}]}}, []) == (
        '{"nested":{"a":[1,{"b":"x\\"y"}]}}')
    assert context_string(None, []) == "{}"


def test_hits_json_holds_the_context_as_a_string() -> None:
    hits = [("idx::1", '{"title":"a"}'), ("idx::2", "line\nbreak")]
    text = hits_json(hits)
    assert text == (
        '[{"id":"idx::1","source":"{\\"title\\":\\"a\\"}"},'
        '{"id":"idx::2","source":"line\\nbreak"}]'
    )
    assert json.loads(text) == [{"id": "idx::1", "source": '{"title":"a"}'},
                                {"id": "idx::2", "source": "line\nbreak"}]
    assert hits_json([]) == "[]"


# --- user content -------------------------------------------------------------------------------

HJ = '[{"id":"i::1","source":"{}"}]'


@pytest.mark.parametrize("template", [None, "", "  \t"])
def test_no_template_without_custom_fields(template) -> None:
    assert user_content(template, "red shoes", {}, HJ) == f"SearchText - red shoes; Hits - {HJ}"


def test_no_template_with_reference_answer() -> None:
    custom = {"category": "shoes", "referenceAnswer": "sneakers"}
    assert user_content(None, "q", custom, HJ) == f"SearchText: q; Reference: sneakers; Hits: {HJ}"


def test_no_template_without_reference_answer_joins_all_custom_values() -> None:
    custom = {"category": "shoes", "color": "red"}
    assert user_content(None, "q", custom, HJ) == (
        f"SearchText: q; Reference: shoes; red; Hits: {HJ}")


def test_default_template() -> None:
    assert user_content(DEFAULT_TEMPLATE, "tv", {"referenceAnswer": "x"}, HJ) == (
        f"SearchText: tv; Hits: {HJ}")


CUSTOM = {"referenceAnswer": "a television", "category": "electronics"}


@pytest.mark.parametrize("template, expected", [
    ("Q={{queryText}} S={{searchText}} H={{hits}} R={{results}}", f"Q=tv S=tv H={HJ} R={HJ}"),
    ("{{reference}}|{{referenceAnswer}}|{{category}}|{{unknown}}|",
     "a television|a television|electronics||"),
    ("{{ hits }} {{hits}}", "{{ hits }} " + HJ),
    *[(t, t) for t in ("{{ queryText}}|{{queryText }}|{{\tqueryText}}", "{{\nhits\n}}")],
    ("{{}} {{{hits}} {hits}", "{{}}  {hits}"),  # "{{{hits}}" is the placeholder "{hits": unknown
    ("no placeholders", "no placeholders"),
    ("{{queryText}}{{queryText}}", "tvtv"),
])
def test_template_substitution(template, expected) -> None:
    assert user_content(template, "tv", CUSTOM, HJ) == expected


def test_reference_placeholder_without_reference_answer_is_empty() -> None:
    assert user_content("[{{reference}}][{{category}}]", "q", {"category": "c"}, HJ) == "[][c]"


def test_inserted_values_are_not_substituted_again() -> None:
    assert user_content("{{queryText}} {{hits}}", "{{hits}}", {}, "[{{queryText}}]") == (
        "{{hits}} [{{queryText}}]")


# --- structured output --------------------------------------------------------------------------

def test_response_format_for_scores_matches_the_plugin_string() -> None:
    expected = (
        '{"type":"json_schema","json_schema":{"name":"rating_response","strict":true,'
        '"schema":{"type":"object","properties":{"ratings":{"type":"array","items":'
        '{"type":"object","properties":{"id":{"type":"string"},"rating_score":{"type":"number"}},'
        '"required":["id","rating_score"],"additionalProperties":false}}},'
        '"required":["ratings"],"additionalProperties":false}}}'
    )
    assert json.dumps(response_format(SCORE0_1), separators=(",", ":")) == expected


def test_response_format_for_binary_ratings_uses_an_enum() -> None:
    fmt = response_format(RELEVANT_IRRELEVANT)
    item = fmt["json_schema"]["schema"]["properties"]["ratings"]["items"]
    assert item == {
        "type": "object",
        "properties": {"id": {"type": "string"},
                       "rating_score": {"type": "string", "enum": ["RELEVANT", "IRRELEVANT"]}},
        "required": ["id", "rating_score"],
        "additionalProperties": False,
    }
    assert fmt["type"] == "json_schema"
    assert fmt["json_schema"]["name"] == "rating_response"
    assert fmt["json_schema"]["strict"] is True
    assert fmt["json_schema"]["schema"]["required"] == ["ratings"]
    assert response_format(SCORE0_1) is not response_format(SCORE0_1)  # callers may mutate
