"""The provider-neutral interface: one chat request in, one answer (or one LLMError) out.

Providers (OpenAI-compatible, Bedrock, ML Commons) differ in wire format only; the judgment job
talks to ``ChatModel.chat`` and never sees HTTP. Transport retries live here so that every provider
backs off the same way and a job sees a single outcome per logical call.
"""

from __future__ import annotations

import email.utils
import functools
import json
import logging
import math
import random
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

import urllib3
from tenacity import RetryCallState, Retrying, retry_if_exception_type, stop_after_attempt

from workbench.llm import deadline
from workbench.llm.endpoints import EndpointRefused
from workbench.llm.pricing import pricing_of
from workbench.telemetry import instruments
from workbench.telemetry.logs import redact

if TYPE_CHECKING:
    from workbench.llm.structured import FormatMemory
    from workbench.llm.tokens import ServerTokens

log = logging.getLogger(__name__)

T = TypeVar("T")

_ESCAPES = str.maketrans({"\\": "\\\\", '"': '\\"', "\n": "\\n", "\r": "\\r", "\t": "\\t"})


def json_escape(text: str) -> str:
    """Escape text the way the plugin does (docs/algorithms.md, "Prompt"): only backslash, quote,
    LF, CR and tab."""
    return text.translate(_ESCAPES)


def messages_string(system: str, user: str) -> str:
    """The ``messages`` parameter ML Commons connectors substitute into an OpenAI-style body."""
    return (
        f'[{{"role":"system","content":"{json_escape(system)}"}},'
        f'{{"role":"user","content":"{json_escape(user)}"}}]'
    )


#: the output-token bound of a call whose answer's size is not known (``_predict``)
DEFAULT_MAX_OUTPUT = 1024
#: added to the bound of a reasoning model, whose hidden reasoning counts as output
REASONING_ALLOWANCE = 4096


@dataclass(frozen=True)
class ChatRequest:
    """One prompt; ``response_format`` is the json_schema dict of docs/algorithms.md ("Calling the
    model"), None for the fallback. ``max_output`` bounds the answer's tokens (the provider
    sends it unless the model's options set their own bound; ``structured.answer_bound``)."""

    system: str
    user: str
    response_format: dict[str, Any] | None = None
    max_output: int = DEFAULT_MAX_OUTPUT


@dataclass(frozen=True)
class ChatResult:
    """The model's text and token usage.

    Token counts are what the provider reported; when it reported nothing they are estimated as
    characters / 4 rounded up (prompt = system + user, answer = ``text``) and ``tokens_estimated``
    is True, so the caller can swap in a real tokenizer count.
    """

    text: str
    input_tokens: int
    output_tokens: int
    tokens_estimated: bool = False
    cut_off: bool = False  # the answer stopped at its output bound (finish_reason "length")

    def why_unusable(self, reason: str) -> str:
        """``reason`` for an unusable answer, saying so when the bound cut it off."""
        return reason + (" (the answer was cut off at its output-token bound)"
                         if self.cut_off else "")


class LLMError(Exception):
    """One logical LLM call failed.

    ``retryable`` tells the caller whether trying again later may help (the transport retries
    are already spent). ``reason`` is the bare reason (for the contract's exact messages);
    ``str()`` is ``model [<id>]: <reason>`` on one line (just the reason when it already names
    ``[<id>]``). Never carries credentials.
    """

    def __init__(
        self, model_id: str, reason: str, *, status: int | None = None, retryable: bool = False
    ) -> None:
        self.model_id = model_id
        self.reason = " ".join(reason.split())
        self.status = status
        self.retryable = retryable
        named = f"[{model_id}]" in self.reason
        super().__init__(self.reason if named else f"model [{model_id}]: {self.reason}")

    def __reduce__(self) -> Any:
        # Celery pickles exceptions; keep the keyword-only fields across the trip.
        return (_rebuild_error, (self.model_id, self.reason, self.status, self.retryable))


def _rebuild_error(model_id: str, reason: str, status: int | None, retryable: bool) -> LLMError:
    return LLMError(model_id, reason, status=status, retryable=retryable)


class FormatRefused(LLMError):
    """The server refused the request's ``response_format`` (a structured-output dialect it does
    not speak, e.g. llama.cpp's Python server and ``json_schema``): asking again the same way
    cannot help, another format may (``structured.ladder``). Never retried as an outage."""


class ModelUnusable(LLMError):
    """The model cannot be called as it is set up (no AWS region or credentials, an unset key
    variable, an invalid URL or stored model): nothing reached the provider, and only fixing
    the model helps. Where a request names the model, this is the request's 400."""

    def __reduce__(self) -> Any:
        return (ModelUnusable, (self.model_id, self.reason))


_Chat = TypeVar("_Chat", bound=Callable[..., "ChatResult"])


def metered(chat: _Chat) -> _Chat:
    """Count a provider's calls in the operator metrics (``telemetry.instruments``): outcome,
    time, tokens and, for a priced model, cost. A model id the provider does not know
    (``known_model`` False) is counted as ``unknown``, so a mistyped id adds no label."""
    @functools.wraps(chat)
    def counted(self: Any, request: ChatRequest) -> ChatResult:
        started = time.monotonic()
        try:
            result = chat(self, request)
        except Exception as exc:
            label = self.model_id if getattr(exc, "known_model", True) else "unknown"
            instruments.count_llm_call(label, time.monotonic() - started, None, None)
            raise
        pricing = pricing_of(self)
        cost = pricing.cost(result.input_tokens, result.output_tokens) if pricing else None
        instruments.count_llm_call(self.model_id, time.monotonic() - started,
                                   (result.input_tokens, result.output_tokens), cost)
        return result

    return counted  # type: ignore[return-value]


class ChatModel(Protocol):
    """What the judgment job calls. Implementations are safe to share between threads."""

    model_id: str
    #: what structured output its server accepts (``llm.structured``); None: not remembered
    formats: FormatMemory | None
    #: its server's own tokenizer (``llm.tokens``); None: the provider has none to ask
    tokens: ServerTokens | None

    def chat(self, request: ChatRequest) -> ChatResult: ...


def estimate_tokens(text: str) -> int:
    """Rough token count (characters / 4, rounded up) for providers that report no usage."""
    return math.ceil(len(text) / 4)


def result_with_usage(
    request: ChatRequest, text: str, input_tokens: Any, output_tokens: Any
) -> ChatResult:
    """A ChatResult from reported counts, falling back to the estimate when either is missing."""
    if isinstance(input_tokens, int) and isinstance(output_tokens, int):
        return ChatResult(text, input_tokens, output_tokens)
    return ChatResult(
        text,
        estimate_tokens(request.system + request.user),
        estimate_tokens(text),
        tokens_estimated=True,
    )


# --- retries ---------------------------------------------------------------------------------


class Transient(Exception):
    """One attempt failed in a way that may pass (429, 5xx, timeout, connection error)."""

    def __init__(self, reason: str, status: int | None = None, retry_after: float | None = None):
        super().__init__(reason)
        self.reason = reason
        self.status = status
        self.retry_after = retry_after


class NotConnected(Transient):
    """No connection could be opened (refused, unknown host): nothing was sent."""


@dataclass(frozen=True)
class RetryPolicy:
    """Exponential backoff with jitter; a server's Retry-After wins, up to ``retry_after_cap``."""

    base: float = 0.5
    cap: float = 20.0
    retry_after_cap: float = 30.0

    def delay(self, attempt: int, retry_after: float | None) -> float:
        """Seconds to wait after failed attempt number ``attempt`` (0-based)."""
        if retry_after is not None and retry_after >= 0:
            return min(retry_after, self.retry_after_cap)
        backoff = min(self.cap, self.base * 2**attempt)
        return backoff * random.uniform(0.5, 1.0)


DEFAULT_RETRY = RetryPolicy()


def call_with_retries(
    model_id: str,
    max_retries: int,
    policy: RetryPolicy,
    attempt: Callable[[], T],
    sleep: Callable[[float], None] = time.sleep,
) -> T:
    """Run ``attempt`` until it returns, raises LLMError, or ``max_retries`` retries are spent
    (a tenacity ``Retrying``: only ``Transient`` is retried, after ``policy.delay``). Under a
    request's deadline (``llm.deadline``) no attempt starts once it has passed."""
    tries = max_retries + 1

    def transient(state: RetryCallState) -> Transient:
        exc = state.outcome.exception() if state.outcome is not None else None
        assert isinstance(exc, Transient)  # nothing else is retried
        return exc

    def wait(state: RetryCallState) -> float:
        if state.attempt_number >= tries:  # the last attempt: no pause (and no jitter drawn)
            return 0.0
        return policy.delay(state.attempt_number - 1, transient(state).retry_after)

    def warn(state: RetryCallState) -> None:
        assert state.next_action is not None
        log.warning(
            "LLM model [%s]: %s; retry %d of %d in %.2fs",
            model_id, transient(state).reason, state.attempt_number, max_retries,
            state.next_action.sleep,
        )

    def checked() -> T:
        deadline.check(model_id)  # a request out of time (or hung up) makes no more calls
        value = attempt()
        deadline.answered()
        return value

    retrying = Retrying(
        retry=retry_if_exception_type(Transient), stop=stop_after_attempt(tries), wait=wait,
        before_sleep=warn, reraise=True,
        sleep=lambda seconds: sleep(min(float(seconds), deadline.bounded(float(seconds)))),
    )
    try:
        return retrying(checked)
    except Transient as exc:
        raise LLMError(
            model_id,
            f"{exc.reason} (gave up after {tries} attempt{'s' if tries > 1 else ''})",
            status=exc.status,
            retryable=True,
        ) from None


def parse_retry_after(value: str | None) -> float | None:
    """Retry-After as seconds: a number (fractions accepted) or an HTTP date."""
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


# --- HTTP ------------------------------------------------------------------------------------


def scrub(text: str, secrets: Iterable[str | None] = ()) -> str:
    """Remove known secret values and anything that looks like a credential from a message."""
    for secret in secrets:
        if secret:
            text = text.replace(secret, "****")
    return redact(text)


#: where each provider's error answer carries its message: ``{"error": {"message": ...}}``
#: (OpenAI and the servers that copy it; some answer ``{"error": "..."}``), and OpenSearch's
#: ``{"error": {"reason": ...}}`` (ML Commons)
OPENAI_ERROR = ("error.message", "error")
OPENSEARCH_ERROR = ("error.reason", "error")
#: how much of a provider's error message reaches a client or ``lastFailureReason``
DETAIL_CHARS = 300


def error_detail(body: bytes, shape: tuple[str, ...], limit: int = DETAIL_CHARS) -> str | None:
    """The provider's own error message, when the answer has the provider's error ``shape``
    (dotted paths to a string), cut to ``limit`` characters; None for any other answer, which
    is never shown: an endpoint may be anything that answers HTTP (docs/model-endpoints.md)."""
    try:
        data = json.loads(body)
    except (ValueError, UnicodeDecodeError):
        return None
    for path in shape:
        value: Any = data
        for key in path.split("."):
            value = value.get(key) if isinstance(value, dict) else None
        if isinstance(value, str) and value.strip():
            text = " ".join(value.split())
            return text[:limit] + ("..." if len(text) > limit else "")
    return None


def unshown(body: bytes) -> str:
    """How an answer that is not shown is described: its size only."""
    return f"a {len(body)}-byte answer without the provider's error shape (not shown)"


def post_json(
    model_id: str,
    pool: urllib3.PoolManager,
    url: str,
    payload: Mapping[str, Any],
    headers: Mapping[str, str],
    timeout: float,
    where: str,
) -> tuple[int, urllib3.HTTPHeaderDict, bytes]:
    """POST a JSON body once; transport failures become Transient (or LLMError when retrying
    cannot help), described by ``where``, a credential-free name of the endpoint."""
    all_headers = {"Content-Type": "application/json", "Accept": "application/json", **headers}
    timeout = deadline.bounded(timeout)
    try:
        response = pool.request(
            "POST",
            url,
            body=json.dumps(payload).encode(),
            headers=all_headers,
            timeout=urllib3.Timeout(connect=min(10.0, timeout), read=timeout),
            retries=False,
            redirect=False,
        )
    except urllib3.exceptions.SSLError as exc:
        raise LLMError(model_id, scrub(f"TLS error talking to {where}: {exc}")) from None
    except urllib3.exceptions.LocationValueError:
        raise ModelUnusable(model_id, f"invalid URL for {where}") from None
    except EndpointRefused as exc:
        raise ModelUnusable(model_id, f'field "endpoint" {exc}') from None
    except urllib3.exceptions.NewConnectionError:
        raise NotConnected(f"cannot connect to {where}") from None
    except (urllib3.exceptions.TimeoutError, TimeoutError):
        raise Transient(f"no answer from {where} within {timeout:g}s") from None
    except (urllib3.exceptions.HTTPError, OSError) as exc:
        raise Transient(f"connection to {where} failed ({type(exc).__name__})") from None
    return response.status, response.headers, response.data


def check_status(
    model_id: str,
    status: int,
    headers: Mapping[str, str],
    body: bytes,
    where: str,
    secrets: Iterable[str | None] = (),
    shape: tuple[str, ...] = OPENAI_ERROR,
) -> None:
    """Raise Transient for 429/5xx and LLMError for any other non-2xx answer; the reason has
    the provider's error message (``error_detail``) or only the answer's size."""
    if 200 <= status < 300:
        return
    if 300 <= status < 400:
        raise LLMError(model_id, f"HTTP {status} from {where}: a redirect, which is not "
                                 f"followed", status=status, retryable=False)
    detail = error_detail(body, shape)
    reason = f"HTTP {status} from {where}: " + (scrub(detail, secrets) if detail is not None
                                                 else unshown(body))
    if refuses_format(status, detail):
        raise FormatRefused(model_id, reason, status=status, retryable=False)
    if status == 429 or status >= 500:
        raise Transient(reason, status, parse_retry_after(headers.get("Retry-After")))
    raise LLMError(model_id, reason, status=status, retryable=False)


#: statuses with which servers refuse a request shape: bad request, unprocessable (FastAPI's
#: validation), and the 500 llama.cpp's Python server answers for a failed body validation
_FORMAT_REFUSAL_STATUSES = (400, 422, 500)


def refuses_format(status: int, detail: str | None) -> bool:
    """Whether an error answer refuses the structured-output format rather than the call: its
    message names ``response_format`` (OpenAI, vLLM, llama.cpp and FastAPI-based servers all
    name the parameter they refuse)."""
    return (status in _FORMAT_REFUSAL_STATUSES and detail is not None
            and "response_format" in detail)


def parse_json_body(model_id: str, body: bytes, where: str) -> Any:
    """Decode a 2xx answer; a body that is not JSON is a non-retryable protocol error (its
    text is not shown, only its size)."""
    try:
        return json.loads(body)
    except ValueError:
        raise LLMError(model_id, f"answer from {where} is not JSON ({len(body)} bytes, not "
                                 "shown)") from None
