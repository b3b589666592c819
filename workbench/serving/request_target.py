"""The request target OpenSearch would route, for request lines written without a leading slash.

OpenSearch accepts ``POST _plugins/_ml/models/_search HTTP/1.1`` and routes it as
``/_plugins/_ml/models/_search`` (any target that is not absolute-form is read as a path from the
root: ``GET _cluster/health``, ``GET ?pretty``, ``GET *``). OpenSearch Dashboards'
search-relevance plugin sends such lines for its model list and prompt validation. gunicorn
refuses them as malformed before any route applies, so ``workbench.serving.gunicorn_app`` rewrites
the target with this one rule; the HAProxy front applies the same rule in its configuration
(``http-request set-uri`` in ``haproxy.cfg.j2``).
"""

from __future__ import annotations

import re

# absolute-form ("http://host/path") is left for the server to read, as is CONNECT's
# authority-form.
_ABSOLUTE = re.compile(rb"[A-Za-z][A-Za-z0-9+.-]*://")


def origin_form(method: bytes, target: bytes) -> bytes:
    """``target`` with the leading slash OpenSearch assumes, or ``target`` itself (the same
    object) when it needs none."""
    if not target or target[:1] == b"/" or method == b"CONNECT" or _ABSOLUTE.match(target):
        return target
    return b"/" + target


def fix_request_line(line: bytes) -> bytes:
    """A whole request line (without its line ending) with the target in origin form; any line
    that is not ``METHOD SP target SP version`` is returned unchanged for the server to judge."""
    method, sep, rest = line.partition(b" ")
    if not sep:
        return line
    target, sep, version = rest.partition(b" ")
    if not sep or not version.startswith(b"HTTP/"):
        return line
    fixed = origin_form(method, target)
    if fixed is target:
        return line
    return b"%s %s %s" % (method, fixed, version)
