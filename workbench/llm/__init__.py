"""LLM providers behind one small interface: ``resolve(model_id, ...).chat(ChatRequest(...))``.

Registered models (OpenAI-compatible, Bedrock) come from WORKBENCH_MODELS_FILE / WORKBENCH_MODELS;
any other model id is called through the cluster's ML Commons ``_predict``.
"""

from workbench.llm.base import (
    ChatModel,
    ChatRequest,
    ChatResult,
    LLMError,
    RetryPolicy,
    json_escape,
    messages_string,
)
from workbench.llm.registry import Registry, load_registry, ml_models_search_response, resolve

__all__ = [
    "ChatModel",
    "ChatRequest",
    "ChatResult",
    "LLMError",
    "Registry",
    "RetryPolicy",
    "json_escape",
    "load_registry",
    "messages_string",
    "ml_models_search_response",
    "resolve",
]
