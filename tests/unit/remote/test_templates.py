"""queryTemplate rendering (workbench/remote/templates.py): every placeholder form, JSON
escaping in a body, URL encoding in a query string, the size each preset reads; expected
requests worked out by hand."""

from __future__ import annotations

import json

import pytest

from workbench.remote.templates import (
    MISSING_PLACEHOLDER,
    RenderedRequest,
    TemplateError,
    check,
    render,
)

URL = "http://remote:9200/products/_search"
SOLR = "http://solr:8983/solr/products/select"


@pytest.mark.parametrize("placeholder", ["%SearchText%", "%queryText%", "${queryText}",
                                         "${searchText}", "{{queryText}}", "{{query_string}}"])
def test_every_text_placeholder_in_a_json_body(placeholder: str) -> None:
    template = '{"query": {"match": {"title": "' + placeholder + '"}}}'
    request = render(template, URL, "red shoes", 7, preset="opensearch")
    assert request == RenderedRequest(
        "POST", URL, b'{"query":{"match":{"title":"red shoes"}},"size":7}')


@pytest.mark.parametrize("placeholder", ["%SearchText%", "%queryText%", "${queryText}",
                                         "${searchText}", "{{queryText}}", "{{query_string}}"])
def test_every_text_placeholder_in_a_query_string(placeholder: str) -> None:
    request = render(f"q={placeholder}&limit=3", "http://api:9710/search", "red shoes", 3)
    assert request == RenderedRequest("GET", "http://api:9710/search?q=red%20shoes&limit=3",
                                      None)


@pytest.mark.parametrize("placeholder", ["${size}", "{{size}}"])
def test_both_size_placeholders(placeholder: str) -> None:
    body = '{"q": "%SearchText%", "limit": ' + placeholder + "}"
    assert render(body, URL, "x", 12).body == b'{"q":"x","limit":12}'
    assert render(f"q=%SearchText%&n={placeholder}", URL, "x", 12).url == URL + "?q=x&n=12"


def test_values_are_json_escaped_in_a_body() -> None:
    text = 'say "hi" \\ back\nnow'
    request = render('{"q": "%SearchText%"}', URL, text, 5)
    # the text survives the round trip exactly: quotes, backslash and newline escaped
    assert json.loads(request.body or b"") == {"q": text}
    assert request.body == b'{"q":"say \\"hi\\" \\\\ back\\nnow"}'


def test_values_are_url_encoded_in_a_query_string() -> None:
    request = render("q=title:(%SearchText%)&defType=edismax", SOLR, 'a&b=c "d"/é+', 5,
                     preset="solr")
    assert request.url == (SOLR + "?q=title:(a%26b%3Dc%20%22d%22%2F%C3%A9%2B)&defType=edismax"
                           "&rows=5&wt=json")


def test_a_value_is_never_read_again_as_a_template() -> None:
    text = "{{size}} %SearchText% ${queryText}"
    request = render('{"q": "%SearchText%", "n": {{size}}}', URL, text, 4)
    assert json.loads(request.body or b"") == {"q": text, "n": 4}


def test_custom_fields_are_mustache_parameters_escaped_like_the_text() -> None:
    template = '{"q": "{{queryText}}", "color": "{{color}}", "missing": "{{nothing}}"}'
    request = render(template, URL, "shirt", 5, {"color": 'dark "navy"'})
    assert json.loads(request.body or b"") == {"q": "shirt", "color": 'dark "navy"',
                                               "missing": ""}
    assert render("q=%SearchText%&c={{color}}", URL, "a b", 5, {"color": "x&y"}).url == \
        URL + "?q=a%20b&c=x%26y"


def test_opensearch_presets_add_size_only_when_the_body_has_none() -> None:
    assert render('{"q": "%SearchText%", "size": 3}', URL, "x", 9, preset="elasticsearch") \
        .body == b'{"q":"x","size":3}'
    assert render('{"q": "%SearchText%"}', URL, "x", 9, preset="elasticsearch").body == \
        b'{"q":"x","size":9}'
    assert render('{"q": "%SearchText%"}', URL, "x", 9, preset=None).body == b'{"q":"x"}'
    assert render('{"q": "%SearchText%"}', URL, "x", 9, preset="solr").body == b'{"q":"x"}'


def test_solr_gets_rows_and_wt_unless_the_template_sets_them() -> None:
    assert render("q=%SearchText%&rows=2&wt=xml", SOLR, "x", 9, preset="solr").url == \
        SOLR + "?q=x&rows=2&wt=xml"
    assert render("q=%SearchText%", SOLR, "x", 9, preset="solr").url == \
        SOLR + "?q=x&rows=9&wt=json"
    assert render("q=%SearchText%", SOLR, "x", 9, preset="opensearch").url == SOLR + "?q=x"


def test_a_url_with_a_query_is_continued_with_an_ampersand() -> None:
    assert render("q=%SearchText%", URL + "?pretty=false", "x", 1).url == \
        URL + "?pretty=false&q=x"
    assert render("?q=%SearchText%", URL, "x", 1).url == URL + "?q=x"


def test_a_body_that_does_not_render_to_a_json_object_is_refused() -> None:
    with pytest.raises(TemplateError, match=r"^queryTemplate does not render to JSON: "
                                            r"Expecting ',' delimiter at character 10$"):
        render('{"q": "%SearchText%" "x": 1}', URL, "a", 1)


def test_check_wants_a_text_placeholder() -> None:
    assert check('{"query": {"match_all": {}}, "size": ${size}}') == MISSING_PLACEHOLDER
    assert MISSING_PLACEHOLDER == ("queryTemplate must contain a placeholder for the query "
                                   "text: %SearchText%, ${queryText} or {{queryText}}")
    for good in ("q=%SearchText%", "q=${searchText}", "q={{ queryText }}", "q={{{queryText}}}",
                 '{"q": "{{query_string}}"}'):
        assert check(good) is None, good


def test_check_refuses_an_unclosed_mustache_tag() -> None:
    assert check("q=%SearchText%&x={{oops") == (
        "queryTemplate has a Mustache tag at character 17 that is not closed by }} within "
        "256 characters")


def test_the_request_describes_itself_without_its_body() -> None:
    assert RenderedRequest("POST", URL, b"{}").describe() == f"POST {URL}"
