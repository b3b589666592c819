"""``workbench.schemas.request_json``: the limits of the JSON clients send, each a 400 naming
its place.

The same bodies go through the real server in ``tests/integration/test_bad_input.py``.
"""

from __future__ import annotations

import pytest

from workbench.errors import BadRequest, WorkbenchError, clip, envelope
from workbench.schemas.numbers import bounded_int
from workbench.schemas.request_json import MAX_DEPTH, MAX_STRING_CHARS, loads, nesting_depth


def _refused(raw: str | bytes, field: str = "") -> WorkbenchError:
    with pytest.raises(WorkbenchError) as caught:
        loads(raw, field)
    return caught.value


def test_plain_json_parses_as_json_does() -> None:
    assert loads('{"a": [1, 2.5, "x", null, true], "b": {"c": -0.0}}') == \
        {"a": [1, 2.5, "x", None, True], "b": {"c": -0.0}}
    assert loads(b'{"t": "caf\xc3\xa9 \\ud83d\\ude00"}') == {"t": "café 😀"}
    assert loads("[]") == []
    with pytest.raises(ValueError):
        loads('{"a": }')  # syntax errors stay json's own, for the caller to word


def test_depth_is_counted_outside_strings_and_bounded_like_opensearch() -> None:
    assert nesting_depth('{"a": [1, {"b": "[[[[{{{{"}]}', 100) == 3
    assert nesting_depth("[" * 10_000, 5) == 6  # stops counting past the limit
    deep = '{"a":' * MAX_DEPTH + "1" + "}" * MAX_DEPTH
    assert loads(deep)["a"]["a"]["a"]
    error = _refused('{"persistent":' + deep + "}")
    assert error.status == 400
    assert error.body() == {
        "error": {
            "root_cause": [{"type": "stream_constraints_exception",
                            "reason": f"Document nesting depth ({MAX_DEPTH + 1}) exceeds the "
                                      f"maximum allowed ({MAX_DEPTH})"}],
            "type": "parse_exception",
            "reason": "Failed to parse content to map",
            "caused_by": {"type": "stream_constraints_exception",
                          "reason": f"Document nesting depth ({MAX_DEPTH + 1}) exceeds the "
                                    f"maximum allowed ({MAX_DEPTH})"},
        },
        "status": 400,
    }
    # arrays count too, and far deeper input costs no recursion
    assert _refused("[" * 100_000 + "]" * 100_000).status == 400


@pytest.mark.parametrize(("raw", "error_type", "reason"), [
    ('{"querySetSize": Infinity}', "json_parse_exception",
     "Non-standard token 'Infinity' in [querySetSize]: numbers must be finite"),
    ('{"a": {"b": [1, -Infinity]}}', "json_parse_exception",
     "Non-standard token '-Infinity' in [a.b[1]]: numbers must be finite"),
    ('{"x": NaN}', "json_parse_exception",
     "Non-standard token 'NaN' in [x]: numbers must be finite"),
    ('{"querySetSize": 1e400}', "input_coercion_exception",
     "Numeric value (1e400) out of range in [querySetSize]: numbers must be finite"),
    ('{"k": -2.5E+999}', "input_coercion_exception",
     "Numeric value (-2.5E+999) out of range in [k]: numbers must be finite"),
])
def test_non_finite_numbers_are_refused_naming_the_field(raw: str, error_type: str,
                                                         reason: str) -> None:
    error = _refused(raw)
    assert (error.status, error.error_type, error.reason) == (400, error_type, reason)


def test_unpaired_surrogates_are_refused_and_the_message_can_be_encoded() -> None:
    raw = '{"querySetQueries": [{"queryText": "a"}, {"queryText": "b"}, {}, ' \
          '{"queryText": "ok \\ud800"}]}'
    error = _refused(raw)
    assert isinstance(error, BadRequest)
    assert error.reason == ("Value of [querySetQueries[3].queryText] holds an unpaired surrogate "
                            "(\\ud800) at character 3, which UTF-8 cannot encode")
    error.reason.encode("utf-8")
    # in a name, and as raw UTF-8 bytes of a surrogate (which json.loads lets through)
    assert _refused('{"a\\udc00b": 1}').reason.startswith("Field name [a\\udc00b] holds")
    assert _refused(b'{"t": "\xed\xa0\x80"}').reason.startswith("Value of [t] holds")
    # a proper pair is one character
    assert loads('{"t": "\\ud83d\\ude00"}') == {"t": "😀"}


def test_strings_and_names_are_bounded() -> None:
    ok = "a" * MAX_STRING_CHARS
    assert loads(f'{{"t": "{ok}"}}') == {"t": ok}
    error = _refused(f'{{"index": "{ok}a"}}')
    assert error.reason == (f"Value of [index] is too long: {MAX_STRING_CHARS + 1} characters, "
                            f"at most {MAX_STRING_CHARS} are allowed")
    # a long name is shown shortened in the path
    error = _refused(f'{{"q": [{{"{ok}b": 1}}]}}')
    assert error.reason.startswith("Field name [q[0]." + "a" * 64 + "...] is too long")


def test_field_prefixes_the_path_of_embedded_json() -> None:
    error = _refused('[{"queryText": "x"}, {"queryText": NaN}]', "querySetQueries")
    assert error.reason == ("Non-standard token 'NaN' in [querySetQueries[1].queryText]: "
                            "numbers must be finite")
    assert _refused('"\\ud800"').reason.startswith("Value of [$] holds")


def test_the_first_problem_in_document_order_is_named() -> None:
    error = _refused('{"a": 1, "b": [NaN, "\\ud800"], "c": Infinity}')
    assert error.reason.startswith("Non-standard token 'NaN' in [b[0]]")


def test_error_reasons_are_clipped() -> None:
    reason = "Index [" + "a" * 1_000_000 + "] does not exist in the cluster"
    body = envelope(400, "illegal_argument_exception", reason)
    shown = body["error"]["reason"]
    assert len(shown) < 2_100 and body["error"]["root_cause"][0]["reason"] == shown
    assert shown.startswith("Index [aaa") and shown.endswith("aaa] does not exist in the cluster")
    assert "characters elided]" in shown
    assert clip("short") == "short"


@pytest.mark.parametrize(("value", "reason"), [
    (0, "size must be a positive integer, got: 0"),
    (True, "size must be a positive integer, got: True"),
    ("10", "size must be a positive integer, got: 10"),
    (2.0, "size must be a positive integer, got: 2.0"),
    (10_001, "size must be at most 10000, got: 10001"),
    (10**40, "size must be at most 10000, got: 10000000000000000000000000000000000000000"),
])
def test_bounded_int_names_the_field(value: object, reason: str) -> None:
    with pytest.raises(BadRequest) as caught:
        bounded_int(value, "size", 1, 10_000)
    assert caught.value.reason == reason


def test_bounded_int_accepts_its_range() -> None:
    assert bounded_int(1, "k", 1, 10_000) == 1
    assert bounded_int(10_000, "k", 1, 10_000) == 10_000
    assert bounded_int(0, "size", 0, 10_000) == 0
    with pytest.raises(BadRequest, match="size must be a non-negative integer, got: -1"):
        bounded_int(-1, "size", 0, 10_000)

