"""LLM models registered with the workbench itself: in the environment (WORKBENCH_MODELS_FILE /
WORKBENCH_MODELS) and at run time (the models route, read through ``Registry.runtime``).

A judgment's ``modelId`` is looked up here first; an id the workbench does not know is taken to
be an ML Commons model of the cluster. The environment list is validated when it is loaded so
that a typo stops the server at start-up rather than failing a judgment an hour later.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Protocol

from workbench.config import Config, ConfigError
from workbench.llm.base import ChatModel
from workbench.llm.bedrock import BedrockChatModel
from workbench.llm.endpoints import EndpointPolicy
from workbench.llm.mlcommons import MLCommonsModel
from workbench.llm.openai import OpenAIChatModel
from workbench.llm.pricing import Pricing
from workbench.llm.rate_limit import Limits, RateLimiter, shared_redis
from workbench.llm.spec import ModelSpec, SpecError, is_reasoning_model, parse_spec
from workbench.llm.structured import FormatMemory

log = logging.getLogger(__name__)

ML_MODEL_INDEX = ".plugins-ml-model"
_INLINE_KEYS = {"api_key", "apikey", "api-key", "key", "secret", "token", "password"}


class RuntimeModels(Protocol):
    """Models registered through the models route (``workbench.llm.runtime``)."""

    def get(self, model_id: str) -> ChatModel | None: ...

    def specs(self) -> list[ModelSpec]: ...


class Registry:
    """The models registered in the environment by id (immutable once built, so threads may
    share it), and the run-time models behind them when the process has a cluster."""

    def __init__(self, entries: list[ModelSpec], models: dict[str, ChatModel],
                 runtime: RuntimeModels | None = None) -> None:
        self._entries = {entry.id: entry for entry in entries}
        self._models = models
        self.runtime = runtime

    def get(self, model_id: str) -> ChatModel | None:
        """The environment model with this id, else the run-time one, else None (ask ML
        Commons). Run-time models are read on every call, so a change is seen at once."""
        model = self._models.get(model_id)
        if model is None and self.runtime is not None:
            model = self.runtime.get(model_id)
        return model

    def entry(self, model_id: str) -> ModelSpec | None:
        """The environment model's description (run-time ones are not included)."""
        return self._entries.get(model_id)

    def __contains__(self, model_id: object) -> bool:
        return model_id in self._models

    def __len__(self) -> int:
        return len(self._models)

    def __iter__(self) -> Iterator[str]:
        return iter(self._entries)

    def specs(self) -> list[ModelSpec]:
        """Environment models in load order."""
        return list(self._entries.values())

    def models(self, with_runtime: bool = False) -> list[dict[str, Any]]:
        """Each model as an ML Commons model document (what Dashboards lists): environment
        models in load order, then (``with_runtime``) the run-time ones by name."""
        specs = self.specs()
        if with_runtime and self.runtime is not None:
            specs += [s for s in self.runtime.specs() if s.id not in self._entries]
        return [ml_document(spec) for spec in specs]


def ml_document(spec: ModelSpec) -> dict[str, Any]:
    """A model as ML Commons describes a deployed remote model (no URL, no secret)."""
    return {
        "name": spec.name,
        "algorithm": "REMOTE",
        "model_state": "DEPLOYED",
        "model_id": spec.id,
        "description": spec.summary(),
    }


def load_registry(config: Config, runtime: RuntimeModels | None = None) -> Registry:
    """Build the registry from the models file, then the inline list (inline wins on equal ids)."""
    entries: dict[str, ModelSpec] = {}
    sources: list[tuple[str, Any]] = []
    if config.models_file:
        label = f"WORKBENCH_MODELS_FILE ({config.models_file})"
        try:
            text = Path(config.models_file).read_text(encoding="utf-8")
        except OSError as exc:
            raise ConfigError(f"{label}: cannot read the file: {exc.strerror or exc}") from None
        sources.append((label, _parse_json(label, text)))
    if config.models_json:
        sources.append(("WORKBENCH_MODELS", _parse_json("WORKBENCH_MODELS", config.models_json)))
    for label, data in sources:
        seen: set[str] = set()
        for entry in _validate_list(label, data):
            if entry.id in seen:
                raise ConfigError(f"{label}: model id {entry.id!r} is listed twice")
            seen.add(entry.id)
            if entry.id in entries:
                log.info("model %r from %s replaces the one from the models file", entry.id, label)
            entries[entry.id] = entry
    models = {model_id: build_model(entry, config) for model_id, entry in entries.items()}
    return Registry(list(entries.values()), models, runtime)


def resolve(model_id: str, config: Config, registry: Registry) -> ChatModel:
    """The registered model with this id, else the cluster's ML Commons model of that id."""
    model = registry.get(model_id)
    if model is None:
        ml_model = MLCommonsModel(model_id, config)
        ml_model.formats = format_memory(config, model_id, "ml-commons")
        model = ml_model
    return model


def place_of(spec: ModelSpec) -> str:
    """Where and what a model calls: what it accepts is remembered per place."""
    return " ".join((spec.provider, spec.chat_url() if spec.endpoint else spec.region or "",
                     spec.wire_model))


def format_memory(config: Config, model_id: str, place: str) -> FormatMemory:
    """What structured output the model at ``place`` accepts (``llm.structured``)."""
    return FormatMemory(shared_redis(config), model_id, place)


def ml_models_search_response(registry: Registry, with_runtime: bool = False) -> dict[str, Any]:
    """An OpenSearch search answer over the registered models, shaped like a search of ML
    Commons' model index, so Dashboards' model picker can list them."""
    hits = [
        {"_index": ML_MODEL_INDEX, "_id": doc["model_id"], "_version": 1, "_seq_no": 0,
         "_primary_term": 1, "_score": 1.0, "_source": doc}
        for doc in registry.models(with_runtime)
    ]
    return {
        "took": 0,
        "timed_out": False,
        "_shards": {"total": 1, "successful": 1, "skipped": 0, "failed": 0},
        "hits": {
            "total": {"value": len(hits), "relation": "eq"},
            "max_score": 1.0 if hits else None,
            "hits": hits,
        },
    }


def build_model(spec: ModelSpec, config: Config, api_key: str | None = None,
                policy: EndpointPolicy | None = None) -> ChatModel:
    """The client for one model; ``api_key`` is a stored key, already decrypted. ``policy``
    guards the endpoint of a model registered through the API (``llm.endpoints``); the
    environment's models have none."""
    model: BedrockChatModel | OpenAIChatModel
    if spec.provider == "bedrock":
        inference = {"temperature": 0}
        if "temperature" in spec.options:
            inference.pop("temperature")
            if spec.options["temperature"] is not None:
                inference["temperature"] = spec.options["temperature"]
        if "max_tokens" in spec.options:
            inference["maxTokens"] = spec.options["max_tokens"]
        model = BedrockChatModel(spec.id, spec.wire_model, spec.region, config,
                                 inference=inference)
    else:
        assert spec.endpoint is not None
        azure = spec.provider == "azure_openai"
        model = OpenAIChatModel(spec.id, spec.endpoint, spec.wire_model, spec.api_key_env,
                                config, url=spec.chat_url(), api_key=api_key,
                                key_header="api-key" if azure else "bearer",
                                send_model=not azure, body_options=spec.body_options(),
                                policy=policy, reasoning=is_reasoning_model(spec.wire_model))
    model.pricing = Pricing.of(spec.pricing)
    model.formats = format_memory(config, spec.id, place_of(spec))
    limits = Limits(spec.rate_limit.get("requestsPerMinute"),
                    spec.rate_limit.get("tokensPerMinute"))
    if limits:
        model.limiter = RateLimiter(shared_redis(config), spec.id, limits)
    return model


def _parse_json(label: str, text: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        # The message carries position only, never the text (it might hold a pasted key).
        raise ConfigError(
            f"{label}: not valid JSON ({exc.msg} at line {exc.lineno} column {exc.colno})"
        ) from None


def _validate_list(label: str, data: Any) -> Iterator[ModelSpec]:
    if not isinstance(data, list):
        raise ConfigError(
            f"{label}: expected a JSON list of models such as "
            '[{"id": "gpt", "provider": "openai", "base_url": "https://api.openai.com/v1", '
            '"model": "gpt-4o-mini", "api_key_env": "OPENAI_API_KEY"}]'
        )
    for position, item in enumerate(data):
        yield _validate_entry(label, position, item)


def _validate_entry(label: str, position: int, item: Any) -> ModelSpec:
    where = f"{label}: models[{position}]"
    if not isinstance(item, dict):
        raise ConfigError(f"{where}: expected a JSON object, got {type(item).__name__}")
    model_id = item.get("id")
    if isinstance(model_id, str) and model_id:
        where = f"{where} (id {model_id!r})"
    for key in item:
        if str(key).lower() in _INLINE_KEYS:
            raise ConfigError(
                f'{where}: field "{key}" is not accepted: never put an API key in the models '
                'list; put the key in an environment variable and name that variable in '
                '"api_key_env" (or register the model through the models route, which stores '
                "its key encrypted)")
    try:
        return parse_spec(item, snake=True, allow_url_credentials=True)
    except SpecError as exc:
        raise ConfigError(f"{where}: {exc}") from None
