"""The live search server: one asyncio loop answering the interleaved A/B search
(``workbench.livesearch`` says why), started by ``workbench serve`` with the HAProxy front
(``workbench.serving.front``), which sends it ``POST .../ab_tests/{id}/_search`` on a Unix socket.

A search is answered here when every step can be taken without a new answer to compute: the
caller is known to the cluster (asked in a thread the first time, as the gate does), the
generation number was read (one Redis read per search, as the gate's), the settings and the
test's definition are kept under it (read in a thread otherwise), the body passes the route's
own schema, the plugin's checks pass (``abtests.serving.plan``) and the cluster answers both
searches. Anything else goes to gunicorn as received, and its answer back as it is.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
import signal
import time
from email.utils import formatdate
from typing import Any, cast

import httptools
import orjson

from workbench import redis_client
from workbench.abtests import definitions, serving
from workbench.abtests.impressions import ImpressionWriter, impression
from workbench.config import Config
from workbench.errors import ClusterTimeout, TextError, WorkbenchError, timeout_reason
from workbench.livesearch.http import (
    HOP_BY_HOP,
    Pool,
    Request,
    UpstreamError,
    answer,
    tcp_pool,
    unix_pool,
)
from workbench.schemas import request_json
from workbench.schemas.ab_tests import ABTestSearchSchema
from workbench.schemas.body import load
from workbench.services import Services
from workbench.store import generation, identity
from workbench.store.search import msearch_body
from workbench.telemetry import instruments

log = logging.getLogger(__name__)

#: the Flask rule of the route, the label its requests are counted under (api.http_metrics)
ROUTE = "/_plugins/_search_relevance/ab_tests/<test_id>/_search"
_PATH = re.compile(rb"/_plugins/_search_relevance/ab_tests/([^/?%]+)/_search")
_JSON_TYPE = b"application/json; charset=UTF-8"
_CLIENT_ID_HEADER = b"x-client-id"
#: seconds a stopping server waits for the searches in flight
_DRAIN_SECONDS = 20.0


class LiveSearch:
    """What every connection shares: the services, the kept definitions, the impression writer
    and the two pools (the cluster through the front; gunicorn)."""

    def __init__(self, config: Config, cluster: Pool, api: Pool) -> None:
        self.config = config
        self.services = Services(config, for_callers=True)
        self.definitions = definitions.DefinitionCache(self.services.client)
        self.writer = ImpressionWriter(self.services.client, config.index_mappings_dir,
                                       config.ab_flush_seconds, config.ab_queries_index)
        self.cluster = cluster
        self.api = api
        self.schema = ABTestSearchSchema()  # one loop: one load at a time
        self.generation = generation.Reader(redis_client.connect_async(
            config, socket_timeout=generation.TIMEOUT_SECONDS,
            socket_connect_timeout=generation.TIMEOUT_SECONDS))
        self.in_flight = 0
        self._last_number: bytes | None = None  # the generation number read last

    async def respond(self, request: Request) -> bytes:
        """The answer to one request: computed here, or gunicorn's."""
        started = time.monotonic()
        self.in_flight += 1
        try:
            try:
                body = await self._search(request)
            except Exception:  # a fault of this process: gunicorn answers, the log says why
                log.exception("the live A/B search failed; the API answers instead")
                body = None
            if body is None:
                return await self._forward(request)
            instruments.HTTP_REQUESTS.labels("POST", ROUTE, "200").inc()
            instruments.HTTP_DURATION.labels("POST", ROUTE).observe(time.monotonic() - started)
            return body
        finally:
            self.in_flight -= 1

    async def _search(self, request: Request) -> bytes | None:
        """The answer computed here, or None: gunicorn answers this one."""
        if request.method != b"POST":
            return None
        found = _PATH.fullmatch(request.target)
        content_type = request.header(b"content-type") or b""
        if found is None or content_type.split(b";")[0].strip().lower() != b"application/json" \
                or request.header(b"transfer-encoding") is not None or not request.body.strip():
            return None
        test_id = found.group(1).decode("utf-8", "surrogateescape")
        headers = [(k.decode("latin-1"), v.decode("latin-1")) for k, v in request.headers]
        who = identity.caller_identity(headers, self.config)
        svc = self.services
        if (identity.known(who) is None or not svc.indices_ready) \
                and not await _in_thread(self._gate, who):
            return None
        fields = self._fields(request)
        if fields is None:
            return None
        # The generation number is read after the search arrived, as the gate reads it. Until
        # it comes, the search is sent already when all it needs is kept under the number read
        # last: when the number is unchanged (it only grows), that is the search the route
        # sends, and the Redis round trip cost the search no time.
        reading = asyncio.ensure_future(self.generation.read())
        guess = self._last_number
        early = self._plan_kept(guess, test_id, fields) if guess is not None else None
        searching = None if early is None else asyncio.ensure_future(
            self._msearch(request, who, early.searches))
        if searching is not None:  # a search given up is not waited for: its outcome neither
            searching.add_done_callback(_outcome_dropped)
        try:
            number = await reading
        finally:
            if searching is not None and not reading.done():
                searching.cancel()
        if number is not None:
            self._last_number = number
        if searching is not None and number == guess:
            assert early is not None
            planned, answers = early, await searching
        else:
            if searching is not None:
                searching.cancel()
            if number is None:
                return None  # Redis cannot say what is current: the API reads the cluster
            found_plan = await self._plan(number, test_id, fields)
            if found_plan is None:
                return None
            planned = found_plan
            answers = await self._msearch(request, who, planned.searches)
        if not isinstance(answers, list):
            return answers
        served = serving.merge(planned, answers)
        query_id = served.response["query_id"]
        if query_id is not None:
            self.writer.add(impression(planned.definition.test, query_id, served.query_text,
                                       served.client_id, served.index, planned.start,
                                       served.shown))
        return self._json(request, 200, orjson.dumps(served.response))

    def _plan_kept(self, number: bytes, test_id: str, fields: dict[str, Any]
                   ) -> serving.Planned | None:
        """The search planned from what is kept under ``number`` alone, or None."""
        settings = self.services.settings.kept(number)
        kept, definition = self.definitions.kept(test_id, number)
        if settings is None or not settings.value("workbench_enabled") or not kept:
            return None
        return _planned(definition, fields)

    async def _plan(self, number: bytes, test_id: str, fields: dict[str, Any]
                    ) -> serving.Planned | None:
        """The search planned as the route plans it under ``number`` (what is not kept read
        on a thread), or None when the route would answer otherwise."""
        svc = self.services
        settings = svc.settings.kept(number)
        if settings is None:
            settings = await _in_thread(svc.settings.current, number)
        if not settings or not settings.value("workbench_enabled"):
            return None
        kept, definition = self.definitions.kept(test_id, number)
        if not kept:
            definition = await _in_thread(self.definitions.get, test_id, number)
        return _planned(definition, fields)

    def _gate(self, who: identity.Identity) -> bool:
        """What the gate does before its first search for a caller (in a thread): ask the
        cluster who the caller is; create the system indices once."""
        identity.authenticate(self.services.upstream, who)
        self.services.ensure_indices()
        return True

    def _fields(self, request: Request) -> dict[str, Any] | None:
        """The body loaded as the route loads it (``X-Client-Id`` checked as ``client_id``), or
        None when the route would refuse it."""
        try:
            body = request_json.loads(request.body)
            if not isinstance(body, dict):
                return None
            fields = load(self.schema, body)
            header = request.header(_CLIENT_ID_HEADER)
            if fields.get("client_id") is None and header is not None:
                fields["client_id"] = load(self.schema, {
                    **body, "client_id": header.decode("latin-1")})["client_id"]
        except (WorkbenchError, TextError, ValueError, UnicodeDecodeError):
            return None
        fields.setdefault("client_id", None)
        return fields

    async def _msearch(self, request: Request, who: identity.Identity, searches: list[Any]
                       ) -> list[list[dict[str, Any]]] | bytes | None:
        """Both searches' hits, as the caller; a 504 answer when the cluster took longer than
        OPENSEARCH_TIMEOUT; None for anything else that is not a plain answer (gunicorn then
        searches again and answers it as the route does)."""
        headers = [(b"content-type", b"application/x-ndjson")]
        if who.authorization is not None:
            headers.append((b"authorization", who.authorization.encode("latin-1")))
        body = msearch_body(searches).encode()
        try:  # the front answers 504 after OPENSEARCH_TIMEOUT; this is in case it does not
            response = await asyncio.wait_for(
                self.cluster.request(b"POST", b"/_msearch", headers, body),
                self.config.opensearch_timeout + 1)
        except TimeoutError:
            return self._timeout(request)
        except UpstreamError:
            return None
        if response.status == 504:  # the front's own timeout: OPENSEARCH_TIMEOUT passed
            return self._timeout(request)
        if response.status != 200:
            return None
        try:
            parsed = orjson.loads(response.body)
        except orjson.JSONDecodeError:  # e.g. an integer beyond 64 bits in a document
            return None
        replies = parsed.get("responses") if isinstance(parsed, dict) else None
        if not isinstance(replies, list) or len(replies) != len(searches) \
                or any("error" in reply for reply in replies):
            return None
        return serving.hits(parsed)

    def _timeout(self, request: Request) -> bytes:
        """The route's answer when the cluster did not answer within OPENSEARCH_TIMEOUT."""
        error = ClusterTimeout(timeout_reason(self.config.opensearch_url_safe,
                                              self.config.opensearch_timeout))
        text = json.dumps(error.body(), ensure_ascii=False, separators=(",", ":"))
        return self._json(request, error.status, text.encode())

    def _json(self, request: Request, status: int, body: bytes) -> bytes:
        headers = [(b"content-type", _JSON_TYPE), (b"date", _http_date())]
        opaque = request.header(b"x-opaque-id")
        if opaque:
            headers.append((b"x-opaque-id", opaque))
        return answer(status, headers, body)

    async def _forward(self, request: Request) -> bytes:
        """gunicorn's answer to ``request``, sent as received (less its hop-by-hop headers)."""
        headers = [(k, v) for k, v in request.headers if k not in HOP_BY_HOP and k != b"host"]
        # gunicorn not answering raises UpstreamError: the connection is closed without an
        # answer, and the front answers its own "workbench API is not answering" 503.
        response = await self.api.request(request.method, request.target, headers, request.body)
        kept = [(k, v) for k, v in response.headers if k not in HOP_BY_HOP]
        return answer(response.status, kept, response.body, response.reason or None)


_date: tuple[int, bytes] = (0, b"")


def _http_date() -> bytes:
    """The ``Date`` header's value (RFC 9110 requires one from a server with a clock, and
    gunicorn sends it), formatted once a second."""
    global _date
    now = int(time.time())
    if _date[0] != now:
        _date = (now, formatdate(now, usegmt=True).encode("ascii"))
    return _date[1]


def _planned(definition: definitions.Definition | None, fields: dict[str, Any]
             ) -> serving.Planned | None:
    """The searches ``serving.plan`` would send for the loaded body, or None when its checks
    refuse it (the route answers those)."""
    try:
        return serving.plan(definition, fields["query_params"], fields["client_id"],
                            fields["from_"], fields.get("size"))
    except (WorkbenchError, TextError):
        return None


def _outcome_dropped(task: asyncio.Future[Any]) -> None:
    if not task.cancelled():
        task.exception()  # read, so that asyncio does not report it as never retrieved


async def _in_thread(fn: Any, *args: Any) -> Any:
    """``fn(*args)`` on a thread (it reads the cluster), or None when it raised: the request is
    then gunicorn's, which meets the same fault and answers it as the route does."""
    try:
        return await asyncio.get_running_loop().run_in_executor(None, fn, *args)
    except Exception as exc:  # noqa: BLE001 - whatever it was, the API meets and answers it
        log.debug("live A/B search handed to the API: %s: %s", type(exc).__name__, exc)
        return None


class _Connection(asyncio.Protocol):
    """One connection from the front: requests parsed as they arrive, answered in order."""

    def __init__(self, live: LiveSearch, connections: set[_Connection]) -> None:
        self.live = live
        self.connections = connections
        self.transport: asyncio.Transport | None = None
        self.parser = httptools.HttpRequestParser(self)
        self._url = b""
        self._headers: list[tuple[bytes, bytes]] = []
        self._body: list[bytes] = []
        self._last: asyncio.Future[None] | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # uvloop's is not a subclass
        self.connections.add(self)

    def connection_lost(self, exc: Exception | None) -> None:
        self.transport = None
        self.connections.discard(self)

    def data_received(self, data: bytes) -> None:
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserError:
            if self.transport is not None:
                self.transport.write(answer(400, [(b"content-type", b"text/plain")],
                                            b"unreadable request"))
                self.transport.close()

    def on_message_begin(self) -> None:
        self._url, self._headers, self._body = b"", [], []

    def on_url(self, url: bytes) -> None:
        self._url += url

    def on_header(self, name: bytes, value: bytes) -> None:
        self._headers.append((name.lower(), value))

    def on_body(self, body: bytes) -> None:
        self._body.append(body)

    def on_message_complete(self) -> None:
        request = Request(self.parser.get_method(), self._url, self._headers,
                          b"".join(self._body), self.parser.should_keep_alive())
        self._last = asyncio.ensure_future(self._answer(request, self._last))

    async def _answer(self, request: Request, before: asyncio.Future[None] | None) -> None:
        try:
            data: bytes | None = await self.live.respond(request)
        except UpstreamError as exc:
            log.warning("the live A/B search could not hand a request to the API: %s", exc)
            data = None
        if before is not None:
            await before  # answers go back in the order of the requests
        if self.transport is None:
            return
        if data is None:
            self.transport.close()
            return
        self.transport.write(data)
        if not request.keep_alive:
            self.transport.close()

    @property
    def idle(self) -> bool:
        return self._last is None or self._last.done()


async def serve(config: Config, socket_path: str, cluster_socket: str, api_port: int) -> None:
    """Answer on ``socket_path`` until TERM or INT; then stop taking connections, let the
    searches in flight finish (at most ``_DRAIN_SECONDS``) and write the impressions kept."""
    loop = asyncio.get_running_loop()
    live = LiveSearch(config, unix_pool(cluster_socket, b"localhost"),  # the front sets Host
                      tcp_pool("127.0.0.1", api_port))
    connections: set[_Connection] = set()
    server = await loop.create_unix_server(lambda: _Connection(live, connections), socket_path)
    stop = asyncio.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    await stop.wait()
    server.close()
    deadline = loop.time() + _DRAIN_SECONDS
    while live.in_flight and loop.time() < deadline:
        await asyncio.sleep(0.05)
    for connection in list(connections):
        if connection.transport is not None:
            connection.transport.close()
    live.cluster.close()
    live.api.close()
    await loop.run_in_executor(None, live.writer.flush)
