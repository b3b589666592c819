"""The door's framing: request lines get their slash, body bytes never change, at any split."""

from __future__ import annotations

import pytest

from workbench.serving.door import MAX_HEAD, Framer
from workbench.serving.request_target import fix_request_line, origin_form

LOOKALIKE = b"GET _cat/indices HTTP/1.1\r\n\r\n"  # a body that reads like a request


def feed_all(chunks: list[bytes]) -> bytes:
    framer = Framer()
    return b"".join(framer.feed(chunk) for chunk in chunks)


def every_split(stream: bytes) -> list[bytes]:
    """The framer's output for the stream cut at each position (and fed byte by byte)."""
    outs = [feed_all([stream[:i], stream[i:]]) for i in range(len(stream) + 1)]
    outs.append(feed_all([stream[i:i + 1] for i in range(len(stream))]))
    return outs


@pytest.mark.parametrize(("method", "target", "expected"), [
    (b"POST", b"_plugins/_ml/models/_search", b"/_plugins/_ml/models/_search"),
    (b"GET", b"?pretty", b"/?pretty"),
    (b"GET", b"*", b"/*"),
    (b"GET", b"/_cluster/health", b"/_cluster/health"),
    (b"GET", b"http://host:9200/_cat", b"http://host:9200/_cat"),
    (b"CONNECT", b"host:443", b"host:443"),
])
def test_targets_are_read_as_opensearch_reads_them(method: bytes, target: bytes,
                                                   expected: bytes) -> None:
    assert origin_form(method, target) == expected


def test_lines_that_are_not_requests_are_left_alone() -> None:
    for line in (b"GET", b"GET _x", b"GET _x SPDY/3", b""):
        assert fix_request_line(line) is line
    assert fix_request_line(b"GET _x HTTP/1.1") == b"GET /_x HTTP/1.1"


def test_pipelined_requests_with_bodies_at_every_split() -> None:
    body = b'{"q": "' + LOOKALIKE + b'"}'
    chunked_body = b"7\r\n" + LOOKALIKE[:7] + b"\r\n" + \
        b"%x;ext=1\r\n" % (len(LOOKALIKE) - 7) + LOOKALIKE[7:] + b"\r\n0\r\nX-T: 1\r\n\r\n"
    stream = (
        b"\r\nPOST _plugins/_ml/models/_search HTTP/1.1\r\nHost: h\r\n"
        b"Content-Length: %d\r\n\r\n%s" % (len(body), body)
        + b"POST big/_bulk HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n" + chunked_body
        + b"GET /ok HTTP/1.1\nHost: h\n\n"
        + b"GET _cluster/health HTTP/1.1\r\n\r\n"
    )
    expected = stream.replace(b"POST _plugins", b"POST /_plugins", 1) \
        .replace(b"POST big", b"POST /big", 1).replace(b"GET _cluster", b"GET /_cluster", 1)
    assert expected.count(LOOKALIKE) == 1  # the body's copy is untouched
    for out in every_split(stream):
        assert out == expected


def test_what_cannot_be_followed_is_relayed_unchanged() -> None:
    for stream in (
        b"POST _a HTTP/1.1\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\n"
        b"abcGET _b HTTP/1.1\r\n\r\n",
        b"POST _a HTTP/1.1\r\nTransfer-Encoding: gzip\r\n\r\nGET _b HTTP/1.1\r\n\r\n",
        b"POST _a HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nGET _b HTTP/1.1\r\n\r\n",
        b"GET _a HTTP/1.1\r\nUpgrade: websocket\r\n\r\nGET _b HTTP/1.1\r\n\r\n",
        b"GET _a HTTP/1.1\r\n folded\r\n\r\nGET _b HTTP/1.1\r\n\r\n",
    ):
        out = feed_all([stream])
        assert b"GET _b" in out, stream  # from the doubtful point on, bytes pass unchanged
    assert feed_all([b"GET _old\r\n"]) == b"GET _old\r\n"  # HTTP/0.9: relayed at once


def test_an_oversized_head_is_relayed_for_nginx_to_refuse() -> None:
    framer = Framer()
    head = b"GET _x HTTP/1.1\r\nX-Big: " + b"a" * (MAX_HEAD + 10)
    assert framer.feed(head) == head
    assert framer.feed(b"\r\n\r\nGET _y HTTP/1.1\r\n\r\n") == b"\r\n\r\nGET _y HTTP/1.1\r\n\r\n"


def test_a_partial_head_is_held_until_complete() -> None:
    framer = Framer()
    assert framer.feed(b"GET _x HTT") == b""
    assert framer.feed(b"P/1.1\r\nHost: h\r\n") == b""
    assert framer.feed(b"\r\n") == b"GET /_x HTTP/1.1\r\nHost: h\r\n\r\n"
