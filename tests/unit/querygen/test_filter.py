"""The consistency filter's pure part with the token_overlap judge (no model), and the token
counts of a document's calls."""

from __future__ import annotations

from workbench.judges.token_overlap import TokenOverlapJudge
from workbench.querygen import cost, filter
from workbench.querygen.documents import SourceDocument

SHOES = SourceDocument("p01", {"title": "Nike Air Zoom Pegasus 39 Men's Running Shoes",
                               "brand": "Nike"})


def test_the_query_is_its_own_reference_and_the_document_the_one_hit() -> None:
    judge = filter.build({"judge": "token_overlap"}, None)
    assert isinstance(judge, TokenOverlapJudge)
    query, hit = filter.pair(judge, "nike running shoes", SHOES)
    assert (query.text, query.references) == ("nike running shoes", ("nike running shoes",))
    assert (hit.id, dict(hit.fields)) == ("p01", SHOES.fields)
    assert filter.consistent(judge, "nike running shoes", SHOES)[0] is True
    assert filter.consistent(judge, "wireless headphones", SHOES)[0] is False


def test_the_tally_counts_what_it_drops() -> None:
    judge = filter.build({"judge": "token_overlap", "threshold": 0.9}, None)
    tally = filter.Tally("token_overlap")
    kept = [q for q in ("nike pegasus", "pegasus headphones", "blender") if
            tally.check(judge, q, SHOES)]
    assert kept == ["nike pegasus"]
    assert tally.summary() == {"filter": "token_overlap", "filteredQueries": 2,
                               "unjudgedQueries": 0}
    assert tally.nothing_kept(2) == (
        "no query passed the consistency filter: the token_overlap judge rated 2 of 2 queries "
        "not relevant to their source document")


def test_the_llm_judge_grades_with_the_set_s_model() -> None:
    assert filter.judge_options({"judge": "llm", "scale": "0-1"}, "m1") == {
        "scale": "0-1", "modelId": "m1"}
    assert filter.judge_options({"judge": "token_overlap", "threshold": 0.5}, "m1") == {
        "threshold": 0.5}


def test_a_judge_without_a_model_adds_no_tokens() -> None:
    judge = filter.build({"judge": "token_overlap"}, None)
    assert cost.filter_tokens(judge, "nike", SHOES, len) == (0, 0)
    assert cost.document_tokens(SHOES, "lexical", judge, len) == cost.generation_tokens(
        SHOES, "lexical", len)
    llm = filter.build({"judge": "llm"}, "m1")
    tokens_in, tokens_out = cost.filter_tokens(llm, cost.TYPICAL_QUERY, SHOES, len)
    assert tokens_in > 0 and tokens_out > 0
    assert cost.document_tokens(SHOES, "lexical", llm, len) == tuple(
        a + b for a, b in zip(cost.generation_tokens(SHOES, "lexical", len),
                              (tokens_in, tokens_out), strict=True))
