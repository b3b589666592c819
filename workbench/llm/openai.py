"""OpenAI-compatible chat completions (OpenAI, Azure OpenAI, vLLM, Ollama, LiteLLM...)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

import urllib3

from workbench.config import Config, redact_url
from workbench.llm.base import (
    DEFAULT_RETRY,
    OPENAI_ERROR,
    REASONING_ALLOWANCE,
    ChatRequest,
    ChatResult,
    LLMError,
    ModelUnusable,
    RetryPolicy,
    call_with_retries,
    check_status,
    estimate_tokens,
    metered,
    parse_json_body,
    post_json,
    result_with_usage,
)
from workbench.llm.endpoints import EndpointPolicy, guarded_pool
from workbench.llm.pricing import Pricing
from workbench.llm.rate_limit import RateLimiter, guarded
from workbench.llm.structured import FormatMemory
from workbench.llm.tokens import ServerTokens


class OpenAIChatModel:
    """``POST {base_url}/chat/completions`` (or the full ``url`` given, e.g. an Azure deployment).

    The body carries ``body_options`` (by default temperature 0; see ``ModelSpec.body_options``
    for reasoning models). The key is either ``api_key`` (a stored key, already decrypted) or
    read from the environment variable named by ``api_key_env`` at call time, so a rotated key
    is picked up without a restart. ``key_header`` ``api-key`` sends it as Azure wants it,
    otherwise as ``Authorization: Bearer``; ``send_model`` False leaves ``model`` out of the
    body (an Azure deployment names its model).
    """

    pricing: Pricing | None = None  # set by the registry from the model's spec
    limiter: RateLimiter | None = None  # set by the registry when the spec has a rateLimit
    formats: FormatMemory | None = None  # set by the registry: the structured output it accepts

    def __init__(
        self,
        model_id: str,
        base_url: str,
        model: str,
        api_key_env: str | None,
        config: Config,
        *,
        retry: RetryPolicy = DEFAULT_RETRY,
        url: str | None = None,
        api_key: str | None = None,
        key_header: str = "bearer",
        send_model: bool = True,
        body_options: Mapping[str, Any] | None = None,
        policy: EndpointPolicy | None = None,
        reasoning: bool = False,
    ) -> None:
        self.model_id = model_id
        self.reasoning = reasoning
        self.model = model
        self.api_key_env = api_key_env
        self._stored_key = api_key
        self.key_header = key_header
        self.send_model = send_model
        self.body_options = dict({"temperature": 0} if body_options is None else body_options)
        self.url = url or base_url.rstrip("/") + "/chat/completions"
        self.where = redact_url(self.url)
        self.timeout = config.llm_timeout
        self.max_retries = config.llm_max_retries
        self.retry = retry
        # One pool for every thread of the job; urllib3's PoolManager is thread-safe. A model
        # registered through the API connects only where its policy allows.
        size: dict[str, Any] = {"maxsize": max(4, config.llm_concurrency), "block": False}
        self._pool = (urllib3.PoolManager(**size) if policy is None
                      else guarded_pool(policy, **size))
        self.tokens: ServerTokens | None = ServerTokens(self._pool, self.url, model,
                                                       self._key_headers, model_id=model_id)

    def __repr__(self) -> str:  # never the key
        return f"OpenAIChatModel({self.model_id!r}, {self.where!r})"

    def _api_key(self) -> str | None:
        if self._stored_key:
            return self._stored_key
        if not self.api_key_env:
            return None
        key = os.environ.get(self.api_key_env)
        if not key:
            raise ModelUnusable(
                self.model_id,
                f"environment variable {self.api_key_env} (api_key_env) is not set or empty",
            )
        return key

    def _key_headers(self) -> dict[str, str]:
        key = self._api_key()
        if not key:
            return {}
        if self.key_header == "api-key":
            return {"api-key": key}
        return {"Authorization": f"Bearer {key}"}

    @metered
    def chat(self, request: ChatRequest) -> ChatResult:
        """One chat completion, retried on 429/5xx/timeouts; LLMError on failure."""
        key = self._api_key()
        headers = self._key_headers()
        payload: dict[str, Any] = {"model": self.model} if self.send_model else {}
        payload["messages"] = [
            {"role": "system", "content": request.system},
            {"role": "user", "content": request.user},
        ]
        payload.update(self.body_options)
        if "max_tokens" not in payload and "max_completion_tokens" not in payload:
            # Every call is bounded; reasoning models count their hidden reasoning as output
            # and take only max_completion_tokens.
            if self.reasoning:
                payload["max_completion_tokens"] = request.max_output + REASONING_ALLOWANCE
            else:
                payload["max_tokens"] = request.max_output
        if request.response_format is not None:
            payload["response_format"] = request.response_format

        def attempt() -> Any:
            status, resp_headers, body = post_json(
                self.model_id, self._pool, self.url, payload, headers, self.timeout, self.where
            )
            check_status(self.model_id, status, resp_headers, body, self.where, secrets=[key],
                         shape=OPENAI_ERROR)
            return parse_json_body(self.model_id, body, self.where)

        reserved = estimate_tokens(request.system + request.user)
        data = call_with_retries(self.model_id, self.max_retries, self.retry,
                                 guarded(self.limiter, reserved, attempt))
        text = self._content(data)
        usage = data.get("usage") if isinstance(data.get("usage"), dict) else {}
        result = result_with_usage(
            request, text, usage.get("prompt_tokens"), usage.get("completion_tokens")
        )
        choice = data["choices"][0]
        if isinstance(choice, dict) and choice.get("finish_reason") == "length":
            result = replace(result, cut_off=True)
        if self.limiter is not None:
            self.limiter.settle(result.input_tokens + result.output_tokens - reserved)
        return result

    def _content(self, data: Any) -> str:
        """``choices[0].message.content``; a refusal or another shape is a non-retryable error."""
        try:
            message = data["choices"][0]["message"]
        except (KeyError, IndexError, TypeError):
            # What it has instead is not shown: the endpoint may be anything that answers JSON.
            raise LLMError(
                self.model_id,
                f"answer from {self.where} has no choices[0].message (not a chat completion)",
            ) from None
        content = message.get("content") if isinstance(message, dict) else None
        if isinstance(content, str):
            return content
        refusal = message.get("refusal") if isinstance(message, dict) else None
        if isinstance(refusal, str) and refusal:
            raise LLMError(self.model_id, f"the model refused to answer: {refusal[:200]}")
        raise LLMError(self.model_id, f"answer from {self.where} has no text content")
