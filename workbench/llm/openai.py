"""OpenAI-compatible chat completions (OpenAI, Azure-style gateways, vLLM, Ollama, LiteLLM...)."""

from __future__ import annotations

import os
from typing import Any

import urllib3

from workbench.config import Config, redact_url
from workbench.llm.base import (
    DEFAULT_RETRY,
    ChatRequest,
    ChatResult,
    LLMError,
    RetryPolicy,
    call_with_retries,
    check_status,
    parse_json_body,
    post_json,
    result_with_usage,
)


class OpenAIChatModel:
    """``POST {base_url}/chat/completions`` with temperature 0.

    The API key is read from the environment variable named by ``api_key_env`` at call time, so a
    rotated key is picked up without a restart and the key itself is never stored in settings.
    """

    def __init__(
        self,
        model_id: str,
        base_url: str,
        model: str,
        api_key_env: str | None,
        config: Config,
        *,
        retry: RetryPolicy = DEFAULT_RETRY,
    ) -> None:
        self.model_id = model_id
        self.model = model
        self.api_key_env = api_key_env
        self.url = base_url.rstrip("/") + "/chat/completions"
        self.where = redact_url(self.url)
        self.timeout = config.llm_timeout
        self.max_retries = config.llm_max_retries
        self.retry = retry
        # One pool for every thread of the job; urllib3's PoolManager is thread-safe.
        self._pool = urllib3.PoolManager(maxsize=max(4, config.llm_concurrency), block=False)

    def _api_key(self) -> str | None:
        if not self.api_key_env:
            return None
        key = os.environ.get(self.api_key_env)
        if not key:
            raise LLMError(
                self.model_id,
                f"environment variable {self.api_key_env} (api_key_env) is not set or empty",
            )
        return key

    def chat(self, request: ChatRequest) -> ChatResult:
        """One chat completion, retried on 429/5xx/timeouts; LLMError on failure."""
        key = self._api_key()
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        payload: dict[str, Any] = {
            "model": self.model,
            "messages": [
                {"role": "system", "content": request.system},
                {"role": "user", "content": request.user},
            ],
            "temperature": 0,
        }
        if request.response_format is not None:
            payload["response_format"] = request.response_format

        def attempt() -> Any:
            status, resp_headers, body = post_json(
                self.model_id, self._pool, self.url, payload, headers, self.timeout, self.where
            )
            check_status(self.model_id, status, resp_headers, body, self.where, secrets=[key])
            return parse_json_body(self.model_id, body, self.where)

        data = call_with_retries(self.model_id, self.max_retries, self.retry, attempt)
        text = self._content(data)
        usage = data.get("usage") if isinstance(data.get("usage"), dict) else {}
        return result_with_usage(
            request, text, usage.get("prompt_tokens"), usage.get("completion_tokens")
        )

    def _content(self, data: Any) -> str:
        """``choices[0].message.content``; a refusal or another shape is a non-retryable error."""
        try:
            message = data["choices"][0]["message"]
        except (KeyError, IndexError, TypeError):
            keys = sorted(data) if isinstance(data, dict) else type(data).__name__
            raise LLMError(
                self.model_id,
                f"answer from {self.where} has no choices[0].message (fields: {keys})",
            ) from None
        content = message.get("content") if isinstance(message, dict) else None
        if isinstance(content, str):
            return content
        refusal = message.get("refusal") if isinstance(message, dict) else None
        if isinstance(refusal, str) and refusal:
            raise LLMError(self.model_id, f"the model refused to answer: {refusal[:200]}")
        raise LLMError(self.model_id, f"answer from {self.where} has no text content")
