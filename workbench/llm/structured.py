"""Structured output that degrades by dialect: the formats a call tries, best first, and what
each model's server was found to accept.

1. ``json_schema`` (OpenAI's structured outputs; vLLM, Ollama and LM Studio accept it too);
2. ``json_object`` with the same schema under ``schema`` (llama.cpp's Python server, which
   refuses ``json_schema`` but constrains its sampling with a grammar made from the schema;
   here the schema also lists the ids of the call's hits, so the grammar cannot invent one);
3. no ``response_format`` at all: the prompt's own JSON instructions (any chat model).

A server that refuses a format (``base.FormatRefused``) costs one quick refused call; the next
rung is tried at once, never the same one again. An unusable answer or any other failure goes
straight to the plain rung, as the plugin falls back (``Steps.to_plain``).

The first rung a model's server accepts is remembered in Redis (``FormatMemory``) for a day, so
every API process and worker starts there, and ``GET /models/{id}`` shows it. While nothing is
remembered, one caller at a time finds out (a short Redis lock); the others wait for what it
learns instead of each making the same refused call.
"""

from __future__ import annotations

import copy
import hashlib
import json
import logging
import time
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

import redis

from workbench.llm import deadline
from workbench.redis_keys import format_key, format_probe_key

log = logging.getLogger(__name__)

Format = dict[str, Any] | None

#: how long what a server accepts is remembered: a server upgraded to a better dialect is used
#: at its best again a day later at the latest; one that stops accepting a format is noticed at
#: the next call (it refuses, and the rung below is remembered instead)
REMEMBER_SECONDS = 24 * 3600
#: how often a caller waiting for another one's probe looks whether it has finished
_PROBE_POLL = 0.05
#: the longest one probe holds the others back: a refusal is remembered at once, so a caller
#: that goes ahead after this starts below every rung refused so far; and a prober that died
#: (a killed worker) blocks nobody for longer
PROBE_HOLD = 15.0
MODES = ("json_schema", "json_object", "plain")
#: the least output bound of a call: room for a short answer with a little prose around it
MIN_ANSWER_TOKENS = 256


def answer_bound(sample_answer: str) -> int:
    """The output-token bound of a call whose usable answer looks like ``sample_answer``: a
    token per character of it, plus 64, and at least ``MIN_ANSWER_TOKENS``. Tokenizers differ
    widely on ids (SmolLM2's spends a token on every 1.7 characters of ``index::B07CXG6C9W``,
    cl100k_base one on every 4 of prose), but none spends more than a token on a character,
    so a usable answer always fits; a model that runs on is cut off there instead of at the
    call's timeout."""
    return max(MIN_ANSWER_TOKENS, len(sample_answer) + 64)


Values = Mapping[str, Sequence[Any]]


def ladder(json_schema: dict[str, Any], ids: Sequence[str] = (),
           values: Values | None = None) -> list[Format]:
    """The formats to try for a ``{"type": "json_schema", "json_schema": {"schema": ...}}``
    request, best first; the last is None (no format). With ``ids`` (the hits a call rates),
    the ``json_object`` rung's schema allows only those ids, each rating once, and only
    ``values`` for the rating's fields they name."""
    schema = (json_schema.get("json_schema") or {}).get("schema")
    rungs: list[Format] = [json_schema]
    if isinstance(schema, dict):
        rungs.append({"type": "json_object", "schema": constrained(schema, ids, values)})
    rungs.append(None)
    return rungs


def constrained(schema: dict[str, Any], ids: Sequence[str],
                values: Values | None = None) -> dict[str, Any]:
    """``schema`` (``{"ratings": [{"id": ...}]}``) with ``id`` limited to ``ids``, as many
    ratings as ids, and each field named in ``values`` limited to those values (a grammar
    made from a schema keeps to an ``enum``; llama.cpp's ignores ``minimum``/``maximum``). Only
    a grammar-constrained server sees it: the ``json_schema`` rung stays the plugin's schema
    exactly."""
    if not ids:
        return schema
    out = copy.deepcopy(schema)
    ratings = out.get("properties", {}).get("ratings")
    item = ratings.get("items") if isinstance(ratings, dict) else None
    if not isinstance(item, dict) or "id" not in item.get("properties", {}):
        return schema
    item["properties"]["id"] = {"type": "string", "enum": list(dict.fromkeys(ids))}
    for name, allowed in (values or {}).items():
        if name in item["properties"]:
            item["properties"][name] = {**item["properties"][name], "enum": list(allowed)}
    ratings["minItems"] = ratings["maxItems"] = len(set(ids))
    return out


def mode(form: Format) -> str:
    """The name of a rung: ``json_schema``, ``json_object`` or ``plain``."""
    return "plain" if form is None else str(form.get("type"))


class FormatMemory:
    """The rung one model's server accepts, shared through Redis. Keyed by the model id and a
    digest of where and what it calls (``place``), so a model changed to another endpoint
    starts afresh. Best effort: with Redis unreachable every call starts at the top."""

    def __init__(self, client: redis.Redis, model_id: str, place: str,
                 ttl: int = REMEMBER_SECONDS) -> None:
        digest = hashlib.sha1(place.encode()).hexdigest()[:12]
        self.model_id = model_id
        self.key = format_key(model_id, digest)
        self.probe_key = format_probe_key(model_id, digest)
        self.client = client
        self.ttl = ttl

    def recall(self) -> dict[str, Any] | None:
        """``{"mode", "learnedAt", "expiresInSeconds"}`` or None when nothing is known."""
        try:
            with self.client.pipeline(transaction=False) as pipe:
                pipe.get(self.key)
                pipe.ttl(self.key)
                raw, ttl = pipe.execute()
        except redis.RedisError:
            return None
        try:
            value = json.loads(raw) if raw else None
        except ValueError:
            return None
        if not isinstance(value, dict) or value.get("mode") not in MODES:
            return None
        return {**value, "expiresInSeconds": max(0, int(ttl))}

    def remember(self, name: str) -> None:
        when = datetime.now(UTC).isoformat(timespec="seconds").replace("+00:00", "Z")
        try:
            self.client.set(self.key, json.dumps({"mode": name, "learnedAt": when}),
                            ex=self.ttl)
        except redis.RedisError:
            log.warning("could not remember the structured-output mode of model [%s]",
                        self.model_id)
            return
        log.info("model [%s] accepts structured output as %s (remembered for %ds)",
                 self.model_id, name, self.ttl)

    def probe(self, wait: float, stopped: Callable[[], bool] = lambda: False,
              ) -> tuple[str | None, str | None]:
        """The remembered mode, or the right to find it out: ``(mode, None)`` when known,
        ``(None, token)`` for the one caller that probes (``release(token)`` when done), and
        ``(None, None)`` when waiting ``wait`` seconds for another caller's probe taught
        nothing (that caller failed) or ``stopped()``: go down the whole ladder."""
        token = uuid.uuid4().hex
        deadline = time.monotonic() + wait
        while True:
            known = self.recall()
            if known is not None:
                return str(known["mode"]), None
            try:
                hold = max(1, int(min(wait, PROBE_HOLD) * 1000))
                if self.client.set(self.probe_key, token, nx=True, px=hold):
                    return None, token
            except redis.RedisError:
                return None, None
            if time.monotonic() >= deadline or stopped():
                return None, None
            time.sleep(_PROBE_POLL)

    def release(self, token: str) -> None:
        try:
            if self.client.get(self.probe_key) == token.encode():
                self.client.delete(self.probe_key)
        except redis.RedisError:
            pass


class Steps:
    """One call's way down the ladder: iterating gives each rung to ask, at most once; after a
    refusal the next rung comes, after ``to_plain`` only the plain one (if not asked yet).

    With a ``memory`` the way starts at the best rung the model is not known to refuse;
    ``refused`` (the server refused a rung) moves that start below it at once, and ``accepted``
    (the server answered a rung, usable or not) confirms it. ``close`` ends the call (use the
    Steps as a context manager)."""

    def __init__(self, json_schema: dict[str, Any], memory: FormatMemory | None = None,
                 ids: Sequence[str] = (), wait: float = 0.0,
                 stopped: Callable[[], bool] = lambda: False, values: Values | None = None,
                 ) -> None:
        self.rungs = ladder(json_schema, ids, values)
        self._next = 0
        self._memory = memory
        self._known: str | None = None
        self._token: str | None = None
        self._learnt = False
        self._refused_only = True  # only refusals so far: an answered rung teaches
        if memory is not None:
            self._known, self._token = memory.probe(deadline.bounded(wait), stopped)
            modes = [mode(rung) for rung in self.rungs]
            if self._known in modes:
                self._next = modes.index(self._known)

    def __enter__(self) -> Steps:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def __iter__(self) -> Iterator[Format]:
        while self._next < len(self.rungs):
            self._next += 1
            yield self.rungs[self._next - 1]

    def to_plain(self) -> None:
        """Skip to the plain rung: the failure was not the format's."""
        self._refused_only = False
        self._next = max(self._next, len(self.rungs) - 1)

    def refused(self, form: Format) -> None:
        """The server refused ``form`` (``base.FormatRefused``): the next rung is asked, and is
        where every later call starts."""
        following = self.rungs.index(form) + 1
        if self._memory is not None and following < len(self.rungs):
            self._known = mode(self.rungs[following])
            self._memory.remember(self._known)

    def accepted(self, form: Format) -> None:
        """The server answered ``form``: the first such rung of a call, reached by refusals
        alone, is what it supports."""
        if self._learnt or self._memory is None:
            return
        self._learnt = True
        if self._refused_only and mode(form) != self._known:
            self._memory.remember(mode(form))
        self.close()

    def close(self) -> None:
        """Let waiting callers go (they read what was learnt, or probe themselves)."""
        if self._token is not None and self._memory is not None:
            self._memory.release(self._token)
            self._token = None
