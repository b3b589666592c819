"""Amazon Bedrock through the Converse API (one request shape for every Bedrock chat model).

Structured output is obtained with a forced tool call: the tool's input schema is the rating
schema, so the model's tool input *is* the JSON answer.
"""

from __future__ import annotations

import json
import threading
from dataclasses import replace
from typing import Any

from workbench.config import Config
from workbench.llm.base import (
    DEFAULT_RETRY,
    ChatRequest,
    ChatResult,
    LLMError,
    ModelUnusable,
    RetryPolicy,
    Transient,
    call_with_retries,
    estimate_tokens,
    metered,
    result_with_usage,
    scrub,
)
from workbench.llm.pricing import Pricing
from workbench.llm.rate_limit import RateLimiter, guarded
from workbench.llm.structured import FormatMemory
from workbench.llm.tokens import ServerTokens

# Error codes worth another attempt; everything else from the service is final.
RETRYABLE_CODES = frozenset({
    "ThrottlingException",
    "TooManyRequestsException",
    "ServiceUnavailableException",
    "ServiceUnavailable",
    "ModelTimeoutException",
    "ModelNotReadyException",
    "InternalServerException",
    "InternalFailure",
})


class BedrockChatModel:
    """``bedrock-runtime`` ``converse``, by default with temperature 0 (``inference`` replaces
    the ``inferenceConfig``: ``temperature`` and ``maxTokens`` as the model's options say).

    ``client`` may be injected (tests use botocore's Stubber); otherwise one client is created on
    first use, with botocore's own retries off so that ours are the only ones.
    """

    pricing: Pricing | None = None  # set by the registry from the model's spec
    limiter: RateLimiter | None = None  # set by the registry when the spec has a rateLimit
    formats: FormatMemory | None = None  # set by the registry: the structured output it accepts
    tokens: ServerTokens | None = None  # Bedrock has no tokenize call

    def __init__(
        self,
        model_id: str,
        bedrock_model_id: str,
        region: str | None,
        config: Config,
        client: Any = None,
        *,
        retry: RetryPolicy = DEFAULT_RETRY,
        inference: dict[str, Any] | None = None,
    ) -> None:
        self.model_id = model_id
        self.inference = {"temperature": 0} if inference is None else dict(inference)
        self.bedrock_model_id = bedrock_model_id
        self.region = region
        self.timeout = config.llm_timeout
        self.max_retries = config.llm_max_retries
        self.max_connections = max(10, config.llm_concurrency)
        self.retry = retry
        self._client = client
        self._lock = threading.Lock()

    def client(self) -> Any:
        """The shared client (botocore clients are thread-safe once built; building is not)."""
        with self._lock:
            if self._client is None:
                import boto3
                from botocore.config import Config as BotoConfig

                self._client = boto3.session.Session().client(
                    "bedrock-runtime",
                    region_name=self.region,
                    config=BotoConfig(
                        read_timeout=self.timeout,
                        connect_timeout=min(10.0, self.timeout),
                        retries={"total_max_attempts": 1, "mode": "standard"},
                        max_pool_connections=self.max_connections,
                    ),
                )
            return self._client

    @metered
    def chat(self, request: ChatRequest) -> ChatResult:
        """One Converse call, retried on throttling, 5xx and timeouts; LLMError on failure."""
        kwargs: dict[str, Any] = {
            "modelId": self.bedrock_model_id,
            "system": [{"text": request.system}],
            "messages": [{"role": "user", "content": [{"text": request.user}]}],
        }
        # Every call is bounded, unless the model's options set their own maxTokens.
        kwargs["inferenceConfig"] = {"maxTokens": request.max_output, **self.inference}
        tool_name = None
        if request.response_format is not None:
            try:
                tool_name, schema = _tool_schema(request.response_format)
            except ValueError as exc:
                raise LLMError(self.model_id, str(exc)) from None
            kwargs["toolConfig"] = {
                "tools": [{"toolSpec": {
                    "name": tool_name,
                    "description": "Record the answer in the required JSON structure.",
                    "inputSchema": {"json": schema},
                }}],
                "toolChoice": {"tool": {"name": tool_name}},
            }
        try:
            client = self.client()
        except Exception as exc:  # noqa: BLE001 - boto3 raises many types for bad set-ups
            raise ModelUnusable(self.model_id,
                                scrub(f"cannot create a Bedrock client: {exc}")) from None

        def attempt() -> Any:
            return self._converse(client, kwargs)

        reserved = estimate_tokens(request.system + request.user)
        response = call_with_retries(self.model_id, self.max_retries, self.retry,
                                     guarded(self.limiter, reserved, attempt))
        text = self._answer_text(response, tool_name)
        usage = response.get("usage") if isinstance(response.get("usage"), dict) else {}
        result = result_with_usage(
            request, text, usage.get("inputTokens"), usage.get("outputTokens")
        )
        if response.get("stopReason") == "max_tokens":
            result = replace(result, cut_off=True)
        if self.limiter is not None:
            self.limiter.settle(result.input_tokens + result.output_tokens - reserved)
        return result

    def _converse(self, client: Any, kwargs: dict[str, Any]) -> Any:
        """One attempt; sorts botocore's failures into Transient and final LLMErrors."""
        from botocore.exceptions import (
            ClientError,
            ConnectionError,
            HTTPClientError,
            NoCredentialsError,
            ParamValidationError,
            ReadTimeoutError,
        )

        try:
            return client.converse(**kwargs)
        except ClientError as exc:
            error = exc.response.get("Error", {})
            code = str(error.get("Code", "Unknown"))
            status = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
            reason = scrub(f"Bedrock {code}: {error.get('Message', '')}".strip())
            if code in RETRYABLE_CODES or (isinstance(status, int) and
                                           (status == 429 or status >= 500)):
                raise Transient(reason, status) from None
            raise LLMError(self.model_id, reason, status=status, retryable=False) from None
        except ReadTimeoutError:
            raise Transient(f"no answer from Bedrock within {self.timeout:g}s") from None
        except (ConnectionError, HTTPClientError) as exc:
            raise Transient(scrub(f"cannot reach Bedrock ({type(exc).__name__})")) from None
        except NoCredentialsError:
            raise ModelUnusable(self.model_id, "no AWS credentials found for Bedrock") from None
        except ParamValidationError as exc:
            raise LLMError(self.model_id, scrub(f"invalid Bedrock request: {exc}")) from None

    def _answer_text(self, response: Any, tool_name: str | None) -> str:
        """The forced tool's input as JSON when structured output was asked for, else the text."""
        try:
            content = response["output"]["message"]["content"]
        except (KeyError, TypeError):
            raise LLMError(self.model_id, "Bedrock answer has no output.message.content") from None
        texts = []
        for block in content if isinstance(content, list) else []:
            if not isinstance(block, dict):
                continue
            tool_use = block.get("toolUse")
            if tool_name and isinstance(tool_use, dict) and "input" in tool_use:
                return json.dumps(tool_use["input"])
            if isinstance(block.get("text"), str):
                texts.append(block["text"])
        if not texts:
            raise LLMError(self.model_id, "Bedrock answer has no text or tool-use content")
        return "".join(texts)


def _tool_schema(response_format: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """Name and JSON schema of the structured-output response format (docs/algorithms.md, "Calling
    the model"), for Bedrock's tool definition."""
    json_schema = response_format.get("json_schema")
    if not isinstance(json_schema, dict) or not isinstance(json_schema.get("schema"), dict):
        raise ValueError("response_format must be {'type': 'json_schema', 'json_schema': {...}}")
    name = json_schema.get("name")
    return (name if isinstance(name, str) and name else "rating_response"), json_schema["schema"]
