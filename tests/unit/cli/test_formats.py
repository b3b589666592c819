"""The command line's file formats: query sets, judgments (CSV, JSON, qrels), TREC exports."""

from __future__ import annotations

import json

import pytest

from workbench.cli.client import authorization
from workbench.cli.formats import (
    FormatError,
    judgments_format,
    merged_ratings,
    parse_judgments,
    parse_queries,
    parse_topics,
    qid_for,
    qrels_lines,
    run_lines,
    topics_text,
)


def test_queries_one_per_line_skip_blank_lines() -> None:
    assert parse_queries("red shoes\n\n  tv  \n#hashtag\n") == [
        {"queryText": "red shoes"}, {"queryText": "tv"}, {"queryText": "#hashtag"}]


def test_queries_json_list_body_and_ndjson_keep_custom_fields() -> None:
    entry = {"queryText": "tv", "referenceAnswer": "a television"}
    assert parse_queries('["red shoes", {"queryText": "tv", "referenceAnswer": "a television"}]'
                         ) == [{"queryText": "red shoes"}, entry]
    assert parse_queries('{"name": "x", "querySetQueries": [{"queryText": "tv", '
                         '"referenceAnswer": "a television"}]}') == [entry]
    ndjson = '{"queryText": "tv", "referenceAnswer": "a television"}\n{"queryText": "b"}\n'
    assert parse_queries(ndjson) == [entry, {"queryText": "b"}]
    assert parse_queries('{"queryText": "only"}') == [{"queryText": "only"}]


def test_a_text_query_that_looks_like_json_stays_text() -> None:
    assert parse_queries("[sale] shoes\n{ brand } tv\n") == [
        {"queryText": "[sale] shoes"}, {"queryText": "{ brand } tv"}]


def test_queries_ndjson_without_query_text_names_the_line() -> None:
    with pytest.raises(FormatError, match="query 2"):
        parse_queries('{"queryText": "a"}\n{"text": "b"}\n', "ndjson")


def test_csv_with_header_quotes_and_repeated_pairs() -> None:
    text = ('query,docid,rating\n"shoes, red",B1,3\n"shoes, red",B2,0\ntv,B9,1.5\n'
            '"shoes, red",B1,2\n')
    assert parse_judgments(text, "csv") == [
        {"query": "shoes, red", "ratings": [{"docId": "B1", "rating": "2"},
                                            {"docId": "B2", "rating": "0"}]},
        {"query": "tv", "ratings": [{"docId": "B9", "rating": "1.5"}]}]


def test_csv_without_header_and_bad_rating() -> None:
    assert parse_judgments("tv,B9,1\n", "csv") == [
        {"query": "tv", "ratings": [{"docId": "B9", "rating": "1"}]}]
    with pytest.raises(FormatError, match="line 2: rating 'good' is not a number"):
        parse_judgments("tv,B9,1\ntv,B8,good\n", "csv")
    with pytest.raises(FormatError, match="line 1: expected query,docid,rating"):
        parse_judgments("tv,B9\n", "csv")


def test_json_api_shape_body_and_flat_list() -> None:
    api_shape = [{"query": "tv", "ratings": [{"docId": "B9", "rating": 1}]}]
    expected = [{"query": "tv", "ratings": [{"docId": "B9", "rating": "1"}]}]
    assert parse_judgments('[{"query": "tv", "ratings": [{"docId": "B9", "rating": 1}]}]',
                           "json") == expected
    body = {"name": "n", "judgmentRatings": api_shape}
    assert parse_judgments(json.dumps(body), "json") == expected
    assert parse_judgments('[{"query": "tv", "docId": "B9", "rating": "1"}]', "json") == expected


def test_qrels_need_topics_or_qid_as_query() -> None:
    qrels = "1 0 B1 3\n1 0 B2 0\n2 Q0 B3 1\n"
    with pytest.raises(FormatError, match="--topics"):
        parse_judgments(qrels, "qrels")
    topics = parse_topics("1\tred shoes\n2\ttv\n")
    assert parse_judgments(qrels, "qrels", topics) == [
        {"query": "red shoes", "ratings": [{"docId": "B1", "rating": "3"},
                                           {"docId": "B2", "rating": "0"}]},
        {"query": "tv", "ratings": [{"docId": "B3", "rating": "1"}]}]
    assert parse_judgments(qrels, "qrels", qid_as_query=True)[1]["query"] == "2"
    with pytest.raises(FormatError, match="query id 3 is not in the topics"):
        parse_judgments("3 0 B1 1\n", "qrels", topics)
    assert parse_topics('{"1": "red shoes"}') == {"1": "red shoes"}


def test_judgments_format_by_name_then_content() -> None:
    assert judgments_format("a.CSV", "") == "csv"
    assert judgments_format("a.qrels", "") == "qrels"
    assert judgments_format("a.txt", "1 0 B1 3\n") == "qrels"
    assert judgments_format("a.txt", "tv,B1,3\n") == "csv"
    assert judgments_format("a.txt", "[]") == "json"


def test_run_and_qrels_lines_share_qids() -> None:
    qids = {"red shoes": qid_for("red shoes"), "tv": "7"}
    evaluations = [{"searchText": "tv", "documentIds": ["B9", "B8"]},
                   {"searchText": "red shoes", "documentIds": ["B1"]}]
    run = run_lines(evaluations, qids, "my config").splitlines()
    assert run == ["7 Q0 B9 1 1.000000 my_config", "7 Q0 B8 2 0.500000 my_config",
                   f"{qids['red shoes']} Q0 B1 1 1.000000 my_config"]  # sorted by qid
    ratings = [{"query": "tv", "ratings": [{"docId": "B9", "rating": "100.000"},
                                           {"docId": "B8", "rating": "0.333"}]}]
    assert qrels_lines(ratings, qids) == "7 0 B9 100\n7 0 B8 0.333\n"
    assert topics_text({"a\tb": "q1"}) == "q1\ta b\n"
    assert qid_for("red shoes") == qid_for("red shoes") != qid_for("red shoe")


def test_merged_ratings_later_list_wins() -> None:
    first = [{"query": "tv", "ratings": [{"docId": "B9", "rating": "1"}]}]
    second = [{"query": "tv", "ratings": [{"docId": "B9", "rating": 2},
                                          {"docId": "B8", "rating": "0"}]}]
    assert merged_ratings([first, second]) == [
        {"query": "tv", "ratings": [{"docId": "B9", "rating": "2"},
                                    {"docId": "B8", "rating": "0"}]}]


def test_authorization_from_options_or_environment() -> None:
    assert authorization("admin", "pw", {}) == "Basic YWRtaW46cHc="
    assert authorization(None, None, {"WORKBENCH_USER": "admin", "WORKBENCH_PASSWORD": "pw"}
                         ) == "Basic YWRtaW46cHc="
    assert authorization(None, None, {"WORKBENCH_AUTHORIZATION": "Bearer t"}) == "Bearer t"
    assert authorization(None, None, {}) is None


def test_csv_of_a_label_sample_reads_back() -> None:
    """The file ``workbench experiment label-sample`` writes (columns by header, document fields
    after the rating) imports once people have filled in the ratings; a row left unrated is an
    error naming it."""
    from workbench.experiments.label_sample import as_csv

    rows = [{"query": "tv", "docId": "B9", "fields": {"title": "TV, 55 inch", "brand": None}},
            {"query": "tv", "docId": "B8", "fields": {"title": "Stand", "brand": ["a", "b"]}}]
    text = as_csv(rows, ["title", "brand"])
    assert text == ('query,docId,rating,title,brand\ntv,B9,,"TV, 55 inch",\n'
                    'tv,B8,,Stand,a | b\n')
    with pytest.raises(FormatError, match=r"line 2: no rating for 'tv', document 'B9' \(rate "
                                          "every row, or delete the rows left unrated\\)"):
        parse_judgments(text, "csv")
    filled = text.replace("B9,,", "B9,2,").replace("B8,,", "B8,0,")
    assert parse_judgments(filled, "csv") == [
        {"query": "tv", "ratings": [{"docId": "B9", "rating": "2"},
                                    {"docId": "B8", "rating": "0"}]}]
    # the columns may come in any order under a header that names them
    assert parse_judgments("rating\tnote\tdoc_id\tquery\n1\tok\tB1\ttv\n", "csv") == [
        {"query": "tv", "ratings": [{"docId": "B1", "rating": "1"}]}]
    with pytest.raises(FormatError, match="line 2: expected 4 fields or more, got 2"):
        parse_judgments("rating,note,docId,query\n1,ok\n", "csv")


def test_a_gzipped_file_is_named_by_its_inner_suffix() -> None:
    assert judgments_format("workbench/demo/data/esci_us_judgments.json.gz", "") == "json"
    assert judgments_format("labels.CSV.gz", "") == "csv"
