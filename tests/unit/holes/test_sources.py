"""Where a rating came from, and an experiment's lists merged as its runs read them
(workbench/holes/sources.py), against hand-worked lists."""

from __future__ import annotations

from typing import Any

from workbench.holes.sources import Lists, counts, is_kind, source_of
from workbench.querysets.entries import QueryEntry


def judgment(kind: str, rows: list[dict[str, Any]], **metadata: Any) -> dict[str, Any]:
    return {"type": kind, "metadata": metadata, "judgmentRatings": rows}


def test_the_source_of_each_kind_of_list() -> None:
    assert source_of(judgment("IMPORT_JUDGMENT", [])) == "human"
    assert source_of(judgment("LLM_JUDGMENT", [], modelId="gpt-x")) == "llm:gpt-x"
    assert source_of(judgment("UBI_JUDGMENT", [], clickModel="coec")) == "ubi:coec"
    assert source_of(judgment("REFERENCE_JUDGMENT", [], judge="semantic")) == "reference:semantic"
    assert is_kind("llm:gpt-x", "llm") and is_kind("human", "human")
    assert not is_kind("llmx:a", "llm") and not is_kind("human", "llm")


def test_later_lists_win_and_a_rating_keeps_its_own_source() -> None:
    human = judgment("IMPORT_JUDGMENT", [
        {"query": "shoes", "ratings": [{"docId": "a", "rating": "3"},
                                       {"docId": "b", "rating": "1"}]},
        {"query": "shoes", "ratings": [{"docId": "z", "rating": "2"}]},  # a second row: unread
        {"query": "hat", "ratings": [{"docId": "h", "rating": "2"}]}])
    filled = judgment("FILLED_JUDGMENT", [
        {"query": "shoes", "ratings": [{"docId": "b", "rating": "1.5", "source": "llm:m"},
                                       {"docId": "c", "rating": "0", "source": "reference:t"}]},
        {"query": "scarf", "ratings": [{"docId": "s", "rating": "1", "source": "human"}]}])
    lists = Lists([human, filled])
    name, seen = lists.seen(QueryEntry("shoes"))
    assert name == "shoes"
    assert {d: (r["rating"], r["source"]) for d, r in seen.items()} == {
        "a": ("3", "human"), "b": ("1.5", "llm:m"), "c": ("0", "reference:t")}
    assert lists.seen(QueryEntry("socks")) == ("socks", {})
    others = lists.others({"shoes"})
    assert [(q, sorted(r)) for q, r in others] == [("hat", ["h"]), ("scarf", ["s"])]
    assert lists.top() == 3.0
    assert counts([{"ratings": list(seen.values())}]) == {"human": 1, "llm:m": 1,
                                                          "reference:t": 1}


def test_the_plain_text_is_looked_up_before_the_key_with_custom_fields() -> None:
    entry = QueryEntry("shoes", {"color": "red"})
    keyed = judgment("LLM_JUDGMENT", [{"query": entry.key, "ratings": [
        {"docId": "a", "rating": "0.5"}]}], modelId="m")
    plain = judgment("IMPORT_JUDGMENT", [{"query": "shoes", "ratings": [
        {"docId": "b", "rating": "2"}]}, {"query": entry.key, "ratings": [
            {"docId": "x", "rating": "1"}]}])
    name, seen = Lists([keyed, plain]).seen(entry)
    # the first list names it by its key; the second by its text, whose row is read first
    assert name == entry.key
    assert {d: r["source"] for d, r in seen.items()} == {"a": "llm:m", "b": "human"}
    assert Lists([]).top() == 0.0
