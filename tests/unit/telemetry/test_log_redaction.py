"""The log filter: credentials masked, long messages cut before redaction, patterns linear.

Timing is left to ``workbench/bench/redaction.py``; here only what each step does.
"""

from __future__ import annotations

import logging

from workbench.telemetry.logs import (
    MAX_MESSAGE_CHARS,
    MAX_TRACEBACK_CHARS,
    RedactingFilter,
    redact,
    truncate,
)

MB = 1_000_000


def _record(msg: str, *args: object, exc_info: object = None) -> logging.LogRecord:
    return logging.LogRecord("t", logging.WARNING, __file__, 1, msg, args or None,
                             exc_info)  # type: ignore[arg-type]


def test_credentials_are_masked_in_every_known_form() -> None:
    assert redact("GET http://admin:hunter2@es:9200/x") == "GET http://****@es:9200/x"
    assert redact("svn+ssh://u:p@h/ and https://a:b@c") == "svn+ssh://****@h/ and https://****@c"
    # a scheme of any length, even right after other text
    assert redact("x" * 100 + "://u:secret@h") == "x" * 100 + "://****@h"
    # a password without a user, as Redis URLs and each entry of a list of sentinels give it
    assert redact("redis://:pw@h:6379/0") == "redis://****@h:6379/0"
    assert redact("sentinel://:pw@h1:26379/0;sentinel://:pw@h2:26379") == \
        "sentinel://****@h1:26379/0;sentinel://****@h2:26379"
    assert redact("http://:8080/a@b") == "http://:8080/a@b"  # no userinfo: a port, then a path
    assert redact("{'Authorization': 'Basic dXNlcjpwYXNz'}") == "{'Authorization': 'Basic ****'}"
    assert redact('authorization="Bearer abc.def-ghi"') == 'authorization="Bearer ****"'
    assert redact("api_key=abcdefgh1234 api-key: 'zyxwvuts'") == \
        "api_key=**** api-key: '****'"
    assert redact("http://es:9200/_search and api_key=short") == \
        "http://es:9200/_search and api_key=short"


def test_worst_case_shapes_of_a_megabyte_are_redacted() -> None:
    """The shapes that made the old URL pattern quadratic (hours at 1 MB; the suite's timeout
    would end this test). Their cost per size is in ``workbench/bench/redaction.py``."""
    assert redact("a" * MB) == "a" * MB
    assert redact("http://u:" + "p" * MB) == "http://u:" + "p" * MB
    assert redact("https://u:p@h/ " * (MB // 15)).count("https://****@h/") == MB // 15
    assert redact("authorization: basic " * (MB // 21)).startswith(
        "authorization: basic ****: basic authorization: basic ****")
    assert redact("api_key=" * (MB // 8)) == "api_key=" * (MB // 8)


def test_a_long_message_is_cut_with_a_marker_before_redaction() -> None:
    text = "a" * MB
    cut = truncate(text)
    assert cut == "a" * MAX_MESSAGE_CHARS + f"... [{MB - MAX_MESSAGE_CHARS} more characters " \
        "truncated]"
    assert truncate("short") == "short"


def test_a_cut_through_url_credentials_masks_what_is_left() -> None:
    text = "x" * (MAX_MESSAGE_CHARS - 20) + " http://admin:hunter2-long-password@es:9200/"
    cut = truncate(text)
    assert "hunter" not in cut and "admin" not in cut
    assert cut.startswith("x" * (MAX_MESSAGE_CHARS - 20) + " http://****... [")
    # a cut Authorization header still matches its own pattern
    header = "x" * (MAX_MESSAGE_CHARS - 30) + " Authorization: Basic dXNlcjpwYXNzd29yZA=="
    assert "dXNlcj" not in redact(truncate(header))


def test_filter_bounds_a_one_megabyte_message() -> None:
    record = _record("HEAD http://u:pw@es:9200/%s [status:400]", "a" * MB)
    RedactingFilter().filter(record)
    message = record.getMessage()
    assert len(message) < MAX_MESSAGE_CHARS + 100
    assert message.startswith("HEAD http://****@es:9200/aaa")
    assert message.endswith("more characters truncated]")


def test_filter_bounds_and_redacts_tracebacks() -> None:
    try:
        raise ValueError("http://u:pw@es/ " + "b" * MB)
    except ValueError as exc:
        record = _record("failed", exc_info=(type(exc), exc, exc.__traceback__))
    RedactingFilter().filter(record)
    assert record.exc_text is not None
    assert len(record.exc_text) < MAX_TRACEBACK_CHARS + 100
    assert "ValueError: http://****@es/ bbb" in record.exc_text
    formatted = logging.Formatter().format(record)
    assert "pw@" not in formatted and len(formatted) < MAX_TRACEBACK_CHARS + 200
