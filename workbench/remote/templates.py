"""A remote search configuration's ``queryTemplate`` rendered into the one HTTP request it sends.

The query text goes where a placeholder is: ``%SearchText%`` and ``%queryText%`` (the plugin's
and local search configurations'), ``${queryText}`` and ``${searchText}`` (the plugin's proposal,
opensearch-project/search-relevance#267), Mustache ``{{queryText}}`` and ``{{query_string}}``
(as local configurations, ``store/search_render.py``); the size goes where ``${size}`` or
``{{size}}`` is. The custom fields of a query set entry are Mustache parameters too.

Every placeholder is first rewritten to its Mustache tag, then the whole template is rendered
once, so a value is never read again as a template (a query text holding ``{{x}}`` or
``%SearchText%`` stays that text). Values are escaped for where they go:

* a template that is a JSON object (it starts with ``{``) is the body of a ``POST`` to the
  connection URL; values are JSON-escaped, the result must parse as a JSON object, and for the
  OpenSearch and Elasticsearch presets a body without ``size`` gets the size;
* any other template is a query string appended to the connection URL of a ``GET`` (after
  ``&`` when the URL already has a ``?``); values are URL-encoded, and for the Solr preset
  ``rows=<size>`` is added unless the template sets ``rows``, and ``wt=json`` unless it sets
  ``wt``.

Triple Mustache (``{{{queryText}}}``) inserts a value unescaped, as Mustache does: the template
is the operator's to write. Nothing else of the template is evaluated.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qsl, quote

import pystache

from workbench.store.search_render import QUERY_TEXT_NAMES, json_escaped, mustache_error

#: the placeholders of the query text that are not Mustache tags, and of the size
TEXT_PLACEHOLDERS = ("%SearchText%", "%queryText%", "${queryText}", "${searchText}")
SIZE_PLACEHOLDERS = ("${size}",)
MUSTACHE_TEXT = tuple(f"{{{{{name}}}}}" for name in QUERY_TEXT_NAMES)
MISSING_PLACEHOLDER = ("queryTemplate must contain a placeholder for the query text: "
                       "%SearchText%, ${queryText} or {{queryText}}")
#: presets whose JSON body gets ``size`` when it has none; the one whose query string gets rows
SIZED_BODY_PRESETS = ("opensearch", "elasticsearch")
ROWS_PRESETS = ("solr",)

_PLACEHOLDER = re.compile("|".join(re.escape(p) for p in (*TEXT_PLACEHOLDERS,
                                                          *SIZE_PLACEHOLDERS)))
_TEXT_TAG = re.compile(r"\{\{\{?\s*[&]?\s*(" + "|".join(QUERY_TEXT_NAMES) + r")\s*\}?\}\}")


class TemplateError(ValueError):
    """The template cannot be rendered into a request; ``str()`` says why."""


@dataclass(frozen=True)
class RenderedRequest:
    """What to send: ``method`` to ``url`` with ``body`` (JSON bytes, or None for a GET)."""

    method: str
    url: str
    body: bytes | None

    def describe(self) -> str:
        """The request for a reason: method and URL, no body (it may be long)."""
        return f"{self.method} {self.url}"


def is_json_template(template: str) -> bool:
    return template.lstrip().startswith("{")


def has_text_placeholder(template: str) -> bool:
    """Whether the template puts the query text anywhere."""
    return any(p in template for p in TEXT_PLACEHOLDERS) or bool(_TEXT_TAG.search(template))


def check(template: str) -> str | None:
    """Why ``template`` cannot be a queryTemplate, or None."""
    if not has_text_placeholder(template):
        return MISSING_PLACEHOLDER
    error = mustache_error(template)
    if error:
        return "queryTemplate " + error.removeprefix("query ")
    return None


def _mustache_form(template: str) -> str:
    """Every non-Mustache placeholder as its Mustache tag (then rendered in one pass)."""
    def tag(match: re.Match[str]) -> str:
        return "{{size}}" if match.group(0) in SIZE_PLACEHOLDERS else "{{queryText}}"
    return _PLACEHOLDER.sub(tag, template)


def substitute(template: str, query_text: str, size: int,
               custom_fields: dict[str, str] | None, in_url: bool) -> str:
    """The template with every placeholder filled, values URL-encoded (``in_url``) or
    JSON-escaped; a Mustache tag with no value renders empty."""
    error = mustache_error(template)
    if error:
        raise TemplateError("queryTemplate " + error.removeprefix("query "))
    escape = (lambda value: quote(str(value), safe="")) if in_url else json_escaped
    renderer = pystache.Renderer(escape=escape, missing_tags="ignore")
    params: dict[str, Any] = {**(custom_fields or {}), "size": str(size),
                              **dict.fromkeys(QUERY_TEXT_NAMES, query_text)}
    return str(renderer.render(_mustache_form(template), params))


def render(template: str, connection_url: str, query_text: str, size: int,
           custom_fields: dict[str, str] | None = None,
           preset: str | None = None) -> RenderedRequest:
    """The request for one query (``preset``: the response template's preset, which decides
    the size parameter an engine reads)."""
    if is_json_template(template):
        text = substitute(template, query_text, size, custom_fields, in_url=False)
        try:
            body = json.loads(text)
        except json.JSONDecodeError as exc:
            raise TemplateError(f"queryTemplate does not render to JSON: {exc.msg} at "
                                f"character {exc.pos}") from None
        if not isinstance(body, dict):
            raise TemplateError("queryTemplate does not render to a JSON object")
        if preset in SIZED_BODY_PRESETS and "size" not in body:
            body["size"] = size
        data = json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode()
        return RenderedRequest("POST", connection_url, data)
    query = substitute(template.strip().lstrip("?&"), query_text, size, custom_fields,
                       in_url=True)
    names = {name for name, _ in parse_qsl(query, keep_blank_values=True)}
    extra = []
    if preset in ROWS_PRESETS:
        if "rows" not in names:
            extra.append(f"rows={size}")
        if "wt" not in names:
            extra.append("wt=json")
    query = "&".join(part for part in (query, *extra) if part)
    separator = "&" if "?" in connection_url else "?"
    if connection_url.endswith(("?", "&")):
        separator = ""
    return RenderedRequest("GET", connection_url + separator + query if query
                           else connection_url, None)
