"""LLM models registered with the workbench itself (WORKBENCH_MODELS_FILE / WORKBENCH_MODELS).

A judgment's ``modelId`` is looked up here first; an id the workbench does not know is taken to
be an ML Commons model of the cluster. The list is validated when it is loaded so that a typo
stops the server at start-up rather than failing a judgment an hour later.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from workbench.config import Config, ConfigError, redact_url
from workbench.llm.base import ChatModel
from workbench.llm.bedrock import BedrockChatModel
from workbench.llm.mlcommons import MLCommonsModel
from workbench.llm.openai import OpenAIChatModel

log = logging.getLogger(__name__)

ML_MODEL_INDEX = ".plugins-ml-model"
_ID = re.compile(r"^[A-Za-z0-9._:-]{1,128}$")
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_COMMON = {"id", "name", "provider", "description"}
_FIELDS = {
    "openai": _COMMON | {"base_url", "model", "api_key_env"},
    "bedrock": _COMMON | {"model", "region"},
}
_INLINE_KEYS = {"api_key", "apikey", "api-key", "key", "secret", "token", "password"}


@dataclass(frozen=True)
class ModelEntry:
    """One validated entry of the models list (secrets are never part of it)."""

    id: str
    name: str
    provider: str
    model: str
    description: str | None = None
    base_url: str | None = None
    api_key_env: str | None = None
    region: str | None = None

    def summary(self) -> str:
        """A description safe to show to any client: no URL credentials, no env names."""
        if self.description:
            return self.description
        if self.provider == "openai":
            return f"OpenAI-compatible model {self.model} (registered with the workbench)"
        where = f" in {self.region}" if self.region else ""
        return f"Amazon Bedrock model {self.model}{where} (registered with the workbench)"


class Registry:
    """The registered models by id; immutable once built, so threads may share it."""

    def __init__(self, entries: list[ModelEntry], models: dict[str, ChatModel]) -> None:
        self._entries = {entry.id: entry for entry in entries}
        self._models = models

    def get(self, model_id: str) -> ChatModel | None:
        """The registered model with this id, or None when ML Commons should be asked."""
        return self._models.get(model_id)

    def entry(self, model_id: str) -> ModelEntry | None:
        return self._entries.get(model_id)

    def __contains__(self, model_id: object) -> bool:
        return model_id in self._models

    def __len__(self) -> int:
        return len(self._models)

    def __iter__(self) -> Iterator[str]:
        return iter(self._entries)

    def models(self) -> list[dict[str, Any]]:
        """Each model as an ML Commons model document (what Dashboards lists), in load order."""
        return [
            {
                "name": entry.name,
                "algorithm": "REMOTE",
                "model_state": "DEPLOYED",
                "model_id": entry.id,
                "description": entry.summary(),
            }
            for entry in self._entries.values()
        ]


def load_registry(config: Config) -> Registry:
    """Build the registry from the models file, then the inline list (inline wins on equal ids)."""
    entries: dict[str, ModelEntry] = {}
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
    models = {model_id: _build(entry, config) for model_id, entry in entries.items()}
    return Registry(list(entries.values()), models)


def resolve(model_id: str, config: Config, registry: Registry) -> ChatModel:
    """The registered model with this id, else the cluster's ML Commons model of that id."""
    return registry.get(model_id) or MLCommonsModel(model_id, config)


def ml_models_search_response(registry: Registry) -> dict[str, Any]:
    """An OpenSearch search answer over the registered models, shaped like a search of ML
    Commons' model index, so Dashboards' model picker can list them."""
    hits = [
        {"_index": ML_MODEL_INDEX, "_id": doc["model_id"], "_version": 1, "_seq_no": 0,
         "_primary_term": 1, "_score": 1.0, "_source": doc}
        for doc in registry.models()
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


def _build(entry: ModelEntry, config: Config) -> ChatModel:
    if entry.provider == "openai":
        assert entry.base_url is not None
        return OpenAIChatModel(entry.id, entry.base_url, entry.model, entry.api_key_env, config)
    return BedrockChatModel(entry.id, entry.model, entry.region, config)


def _parse_json(label: str, text: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        # The message carries position only, never the text (it might hold a pasted key).
        raise ConfigError(
            f"{label}: not valid JSON ({exc.msg} at line {exc.lineno} column {exc.colno})"
        ) from None


def _validate_list(label: str, data: Any) -> Iterator[ModelEntry]:
    if not isinstance(data, list):
        raise ConfigError(
            f"{label}: expected a JSON list of models such as "
            '[{"id": "gpt", "provider": "openai", "base_url": "https://api.openai.com/v1", '
            '"model": "gpt-4o-mini", "api_key_env": "OPENAI_API_KEY"}]'
        )
    for position, item in enumerate(data):
        yield _validate_entry(label, position, item)


def _validate_entry(label: str, position: int, item: Any) -> ModelEntry:
    where = f"{label}: models[{position}]"
    if not isinstance(item, dict):
        raise ConfigError(f"{where}: expected a JSON object, got {type(item).__name__}")
    model_id = item.get("id")
    if isinstance(model_id, str) and model_id:
        where = f"{where} (id {model_id!r})"

    def fail(field: str, problem: str) -> ConfigError:
        return ConfigError(f'{where}: field "{field}" {problem}')

    for key in item:
        if str(key).lower() in _INLINE_KEYS:
            raise fail(
                str(key),
                "is not accepted: never put an API key in the models list; put the key in an "
                'environment variable and name that variable in "api_key_env"',
            )
    if not isinstance(model_id, str) or not model_id:
        raise fail("id", "is required and must be a non-empty string")
    if not _ID.match(model_id):
        raise fail("id", f"must be 1 to 128 letters, digits or . _ : - (got {model_id!r})")
    provider = item.get("provider")
    if provider not in _FIELDS:
        raise fail("provider", f"must be one of {sorted(_FIELDS)}, got {provider!r}")
    unknown = sorted(set(item) - _FIELDS[provider])
    if unknown:
        raise fail(unknown[0], f"is not a setting of provider {provider!r} "
                               f"(known: {sorted(_FIELDS[provider])})")

    def text(field: str, required: bool) -> str | None:
        value = item.get(field)
        if value is None and not required:
            return None
        if not isinstance(value, str) or not value.strip():
            raise fail(field, "is required and must be a non-empty string" if required
                       else "must be a non-empty string")
        return value.strip()

    name = text("name", False) or model_id
    description = text("description", False)
    model = text("model", True)
    assert model is not None
    if provider == "openai":
        base_url = text("base_url", True)
        assert base_url is not None
        parts = urlsplit(base_url)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise fail("base_url", f"must be an http(s) URL such as https://api.openai.com/v1, "
                                   f"got {redact_url(base_url)!r}")
        api_key_env = text("api_key_env", False)
        if api_key_env is not None and not _ENV_NAME.match(api_key_env):
            # The value is not echoed: it is most likely a key pasted in the wrong place.
            raise fail("api_key_env", "must be the NAME of an environment variable holding the "
                                      "key (such as OPENAI_API_KEY), not the key itself")
        return ModelEntry(model_id, name, provider, model, description, base_url.rstrip("/"),
                          api_key_env)
    return ModelEntry(model_id, name, provider, model, description,
                      region=text("region", False))
