"""Java's string forms of parsed JSON (workbench/schemas/javafmt.py): ``hash_map_string`` is
``String.valueOf`` of a value OpenSearch's ``XContentParser.map()`` read, as the plugin's A/B
search reads a ``query_params`` value. Each expected text below is what Java 25 prints for the
value parsed by OpenSearch 3.6's x-content library, worked out by hand from ``HashMap``,
``AbstractCollection.toString`` and ``Double.toString``."""

from __future__ import annotations

from typing import Any

import pytest

from workbench.errors import TextError
from workbench.schemas.ab_tests import ABTestSearchSchema
from workbench.schemas.body import load
from workbench.schemas.java_hash_map import hash_map_order
from workbench.schemas.javafmt import double_to_string, hash_map_string


@pytest.mark.parametrize("value, text", [
    ("plain text", "plain text"),
    (None, "null"),
    (True, "true"),
    (False, "false"),
    (["a", "b"], "[a, b]"),
    ({"k": 1}, "{k=1}"),
    ([], "[]"),
    ({}, "{}"),
    ([True, False, None, [], {}], "[true, false, null, [], {}]"),
    # an Integer, a Long, a BigInteger: their digits
    ([1, -7, 2147483648, 9223372036854775808, 12345678901234567890123],
     "[1, -7, 2147483648, 9223372036854775808, 12345678901234567890123]"),
    # a Double: plain between 10^-3 and 10^7, else d.dddE<n>; always a decimal point
    ([1.0, 1.5, -0.0, 0.0, 100.0, 0.001, 9.99e-4, 1e7, 9999999.0, 1.5e20, 0.1, 1e23, 2e-3],
     "[1.0, 1.5, -0.0, 0.0, 100.0, 0.001, 9.99E-4, 1.0E7, 9999999.0, 1.5E20, 0.1, 1.0E23, "
     "0.002]"),
    # nested, each object a HashMap in its own order
    ({"tags": ["a", {"x": None, "on": True}], "n": [[1], [2.5]]},
     "{n=[[1], [2.5]], tags=[a, {x=null, on=true}]}"),
])
def test_hash_map_string_is_java_s(value: Any, text: str) -> None:
    assert hash_map_string(value) == text


@pytest.mark.parametrize("names, order", [
    # by bucket: the low 4 bits of hashCode ^ (hashCode >>> 16): "a" 97 -> 1, "b" 98 -> 2
    (["b", "a"], ["a", "b"]),
    (["SearchText", "size", "from", "filter"], ["filter", "size", "from", "SearchText"]),
    # "Aa" and "BB" share a hash code (2112): one bucket, in the order they came; a name's
    # hash is over UTF-16 units (the emoji is two)
    (["é", "😀", "z", "Aa", "BB"], ["Aa", "BB", "😀", "é", "z"]),
    # the 13th name makes the table 32 buckets (more than 12 = 16 * 3/4)
    ([f"k{i}" for i in range(13)],
     ["k0", "k1", "k2", "k3", "k4", "k5", "k11", "k6", "k10", "k7", "k8", "k12", "k9"]),
    # 8 names in bucket 3 of 16 keep their order; a 9th doubles the table (a bucket may hold
    # 8 while there are fewer than 64), which splits them by the 5th bit of their hash
    (["q12", "q23", "q34", "q45", "q4", "q190", "q1040", "q1051"],
     ["q12", "q23", "q34", "q45", "q4", "q190", "q1040", "q1051"]),
    (["q12", "q23", "q34", "q45", "q4", "q190", "q1040", "q1051", "q1062"],
     ["q4", "q190", "q1040", "q1051", "q1062", "q12", "q23", "q34", "q45"]),
    # 11 names share their 6 low bits (bucket 9 of 16, 32, 64): the 9th and 10th double the
    # table, the 11th makes the bucket a red-black tree, whose root (sQZx) Java moves first
    (["37hu", "sQZx", "iLK", "😀XLo9", "0Cé", "9Hx", "AqSy7", "QFWd", "RP7h", "xwcU", "J漢C6",
      "06eI", "WZplR", "éVW", "k4", "Zj6"],
     ["06eI", "QFWd", "WZplR", "Zj6", "sQZx", "37hu", "iLK", "😀XLo9", "9Hx", "AqSy7", "RP7h",
      "xwcU", "J漢C6", "éVW", "k4", "0Cé"]),
])
def test_hash_map_order_is_java_s(names: list[str], order: list[str]) -> None:
    assert hash_map_order(names) == order


@pytest.mark.parametrize("x, text", [
    # one digit would do, but Java writes the two closest (a subnormal has few bits)
    (5e-324, "4.9E-324"), (1e-323, "9.9E-324"), (1.5e-323, "1.5E-323"), (2e-323, "2.0E-323"),
    (-5e-324, "-4.9E-324"), (2.2250738585072014e-308, "2.2250738585072014E-308"),
])
def test_double_to_string_of_a_subnormal(x: float, text: str) -> None:
    assert double_to_string(x) == text


def search_params(params: dict[str, Any]) -> dict[str, str]:
    return load(ABTestSearchSchema(), {"query_params": params})["query_params"]


def refusal(params: dict[str, Any]) -> str:
    with pytest.raises(TextError) as raised:
        search_params(params)
    assert raised.value.status == 400
    return raised.value.text


def test_query_params_values_are_read_as_the_plugin_reads_them() -> None:
    assert search_params({"SearchText": ["red", "shoe"], "n": 1.0, "m": {"k": 1}, "o": None}) \
        == {"SearchText": "[red, shoe]", "n": "1.0", "m": "{k=1}", "o": "null"}


def test_the_limits_apply_to_java_s_text() -> None:
    too_long = "query_params value exceeds maximum length of 1024 characters"
    assert search_params({"SearchText": ["x" * 1022]}) == {"SearchText": f"[{'x' * 1022}]"}
    assert refusal({"SearchText": ["x" * 1023]}) == too_long
    # Java counts UTF-16 units: 512 emoji are 1024, 513 are 1026
    assert search_params({"SearchText": "😀" * 512})["SearchText"] == "😀" * 512
    assert refusal({"SearchText": "😀" * 513}) == too_long
    assert refusal({"SearchText": "x", "f": {"k": "a\u0001"}}) == (
        "query_params value contains invalid control characters")


def test_the_first_value_refused_is_the_first_in_the_plugin_s_map() -> None:
    # the plugin checks its HashMap's entries in its order: "a" before "b", whatever the body's
    assert refusal({"b": "a\u0001", "a": "x" * 1025}) == (
        "query_params value exceeds maximum length of 1024 characters")
    assert refusal({"a": "a\u0001", "b": "x" * 1025}) == (
        "query_params value contains invalid control characters")
