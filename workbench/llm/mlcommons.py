"""A model deployed in the cluster's ML Commons plugin, called the way the Java plugin does
(docs/algorithms.md, "Calling the model").

Used for every model id the workbench has not registered itself, so judgments created against a
cluster's remote models keep working unchanged.
"""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import quote

import urllib3

from workbench.config import Config
from workbench.llm.base import (
    DEFAULT_RETRY,
    OPENSEARCH_ERROR,
    ChatRequest,
    ChatResult,
    LLMError,
    NotConnected,
    RetryPolicy,
    call_with_retries,
    check_status,
    error_detail,
    json_escape,
    messages_string,
    metered,
    parse_json_body,
    post_json,
    result_with_usage,
    scrub,
    unshown,
)
from workbench.llm.structured import FormatMemory
from workbench.llm.tokens import ServerTokens
from workbench.store.nodes import Nodes
from workbench.store.upstream import tls_options

EMPTY_RESULT = (
    "Empty model result produced. Expected at least [1] tensor output and [1] model tensor, "
    "but got [0]"
)
UNRECOGNISED_SHAPE = (
    'Unrecognised model response shape; expected a top-level "response" string set by the '
    "connector blueprint's post_process_function, but the response contained these fields "
    "instead: [{keys}]"
)


def predict_parameters(request: ChatRequest) -> dict[str, str]:
    """The ``parameters`` of the _predict body; connectors pick the ones they use."""
    parameters = {
        "messages": messages_string(request.system, request.user),
        "system_prompt": json_escape(request.system),
        "user_prompt": json_escape(request.user),
    }
    if request.response_format is not None:
        parameters["response_format"] = json.dumps(request.response_format)
    return parameters


def model_text(data: Any) -> tuple[str, dict[str, Any]]:
    """The model's text from a _predict answer, with the dataAsMap it came from.

    Raises ValueError with the contract's exact message when the shape is not understood.
    """
    results = data.get("inference_results") if isinstance(data, dict) else None
    first = results[0] if isinstance(results, list) and results else None
    outputs = first.get("output") if isinstance(first, dict) else None
    if not isinstance(outputs, list) or not outputs:
        raise ValueError(EMPTY_RESULT)
    output = outputs[0] if isinstance(outputs[0], dict) else {}
    data_as_map = output.get("dataAsMap")
    if not isinstance(data_as_map, dict):
        data_as_map = {}
    if isinstance(data_as_map.get("response"), str):
        return data_as_map["response"], data_as_map
    try:
        content = data_as_map["choices"][0]["message"]["content"]
    except (KeyError, IndexError, TypeError):
        content = None
    if isinstance(content, str):
        return content, data_as_map
    raise ValueError(UNRECOGNISED_SHAPE.format(keys=", ".join(str(k) for k in data_as_map)))


def reported_usage(data_as_map: dict[str, Any]) -> tuple[Any, Any]:
    """Token counts a connector passed through (OpenAI, Anthropic or Bedrock naming), if any."""
    usage = data_as_map.get("usage")
    if not isinstance(usage, dict):
        return None, None
    for prompt_key, answer_key in (
        ("prompt_tokens", "completion_tokens"),
        ("input_tokens", "output_tokens"),
        ("inputTokens", "outputTokens"),
    ):
        if prompt_key in usage or answer_key in usage:
            return usage.get(prompt_key), usage.get(answer_key)
    return None, None


class UnknownModel(LLMError):
    """The model id names neither a registered model nor an ML Commons model of the cluster:
    the caller's mistake, not a failing LLM."""

    known_model = False


class MLCommonsModel:
    """``POST /_plugins/_ml/models/<id>/_predict`` on the fronted cluster, with its credentials.

    Token usage is the connector's OpenAI-style ``usage`` when its raw answer carries one,
    otherwise the characters / 4 estimate (``tokens_estimated``).
    """

    formats: FormatMemory | None = None  # set by ``registry.resolve``
    tokens: ServerTokens | None = None  # no tokenize call of a connector's model is known

    def __init__(
        self, model_id: str, config: Config, *, retry: RetryPolicy = DEFAULT_RETRY
    ) -> None:
        self.model_id = model_id
        self.nodes = Nodes(config.opensearch_nodes)
        self.path = f"/_plugins/_ml/models/{quote(model_id, safe='')}/_predict"
        self.where = f"ML Commons at {config.opensearch_url_safe}"
        self.timeout = config.llm_timeout
        self.max_retries = config.llm_max_retries
        self.retry = retry
        auth = config.opensearch_auth
        self._password = auth[1] if auth else None
        authorization = config.opensearch_authorization
        self._headers: dict[str, str] = {"authorization": authorization} if authorization else {}
        kwargs: dict[str, Any] = {"maxsize": max(4, config.llm_concurrency), "block": False,
                                  **tls_options(config)}
        # One pool for every thread of the job; urllib3's PoolManager is thread-safe.
        self._pool = urllib3.PoolManager(**kwargs)

    @metered
    def chat(self, request: ChatRequest) -> ChatResult:
        """One _predict call, retried on 429/5xx/timeouts; LLMError on failure."""
        payload = {"parameters": predict_parameters(request)}

        def attempt() -> Any:
            # The next node in turn; one that cannot be connected to is left out for a while
            # and the retry (call_with_retries) goes to the next.
            node = self.nodes.order()[0]
            try:
                status, headers, body = post_json(
                    self.model_id, self._pool, node.rstrip("/") + self.path, payload,
                    self._headers, self.timeout, self.where,
                )
            except NotConnected:
                self.nodes.down(node)
                raise
            if status == 404 or (status == 400 and b"no handler found" in body):
                detail = scrub(error_detail(body, OPENSEARCH_ERROR) or unshown(body),
                               [self._password])
                raise UnknownModel(
                    self.model_id,
                    f"model [{self.model_id}] is neither registered with the workbench "
                    f"(WORKBENCH_MODELS / WORKBENCH_MODELS_FILE or the models route) nor "
                    f"available through ML Commons (HTTP {status}: {detail})",
                    status=status,
                )
            check_status(self.model_id, status, headers, body, self.where, [self._password],
                         shape=OPENSEARCH_ERROR)
            return parse_json_body(self.model_id, body, self.where)

        data = call_with_retries(self.model_id, self.max_retries, self.retry, attempt)
        try:
            text, data_as_map = model_text(data)
        except ValueError as exc:
            raise LLMError(self.model_id, str(exc)) from None
        prompt_tokens, answer_tokens = reported_usage(data_as_map)
        return result_with_usage(request, text, prompt_tokens, answer_tokens)
