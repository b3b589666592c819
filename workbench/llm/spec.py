"""What a registered LLM model is, and the one validation both ways of registering it share.

Models come from the environment (WORKBENCH_MODELS / WORKBENCH_MODELS_FILE, checked at start-up)
or from ``/_plugins/_search_relevance/models`` (checked per request); both go through
``parse_spec`` so a model means the same wherever it was registered. A problem is a
``SpecError`` naming the field as the client spelled it; the caller turns it into a ConfigError
or a 400. Secrets are never part of a ``ModelSpec``: a stored key travels apart, encrypted.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote, urlsplit

from workbench.config import redact_url
from workbench.llm.endpoints import EndpointRefused

PROVIDERS = ("openai", "azure_openai", "bedrock")
AZURE_API_VERSION = "2024-10-21"  # the newest generally available data-plane version
ID_PATTERN = re.compile(r"^[A-Za-z0-9._:-]{1,128}$")
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_DEPLOYMENT = re.compile(r"^[A-Za-z0-9._-]{1,64}$")
_API_VERSION = re.compile(r"^[A-Za-z0-9.-]{1,40}$")
# OpenAI's reasoning models refuse ``temperature``: o1, o3, o4-mini ..., gpt-5 and later.
_REASONING = re.compile(r"^(?:[a-z0-9_-]+/)?(?:o\d|gpt-5)", re.IGNORECASE)
REASONING_EFFORTS = ("none", "minimal", "low", "medium", "high")
MAX_KEY_CHARS = 4096
NAME_CHARS = 200
DESCRIPTION_CHARS = 1000

# Canonical (API) spelling -> the snake_case spelling the environment list has always used.
SNAKE = {"endpoint": "base_url", "apiKeyEnv": "api_key_env", "apiVersion": "api_version",
         "apiKey": "api_key", "rateLimit": "rate_limit"}
_ALIASES = {snake: camel for camel, snake in SNAKE.items()} | {"baseUrl": "endpoint"}
_COMMON = {"id", "name", "description", "provider", "options", "pricing", "rateLimit"}
FIELDS = {
    "openai": _COMMON | {"endpoint", "model", "apiKeyEnv", "apiKey"},
    "azure_openai": _COMMON | {"endpoint", "deployment", "apiVersion", "model", "apiKeyEnv",
                               "apiKey"},
    "bedrock": _COMMON | {"model", "region"},
}
OPTIONS = {
    "openai": ("temperature", "max_tokens", "max_completion_tokens", "reasoning_effort"),
    "azure_openai": ("temperature", "max_tokens", "max_completion_tokens", "reasoning_effort"),
    "bedrock": ("temperature", "max_tokens"),
}
PRICES = ("inputPerMillion", "outputPerMillion")
RATE_LIMITS = ("requestsPerMinute", "tokensPerMinute")
MAX_PER_MINUTE = 10**9


class SpecError(ValueError):
    """One field of a model is wrong; ``field`` is spelled as the client spelled it."""

    def __init__(self, field_name: str, problem: str) -> None:
        super().__init__(f'field "{field_name}" {problem}')
        self.field = field_name
        self.problem = problem


@dataclass(frozen=True)
class ModelSpec:
    """One validated model. ``options`` hold the request options as the provider spells them;
    ``temperature: None`` there means "do not send one"."""

    id: str
    name: str
    provider: str
    model: str | None = None
    description: str | None = None
    endpoint: str | None = None
    deployment: str | None = None
    api_version: str | None = None
    region: str | None = None
    api_key_env: str | None = None
    options: dict[str, Any] = field(default_factory=dict)
    pricing: dict[str, float] = field(default_factory=dict)
    rate_limit: dict[str, int] = field(default_factory=dict)

    @property
    def wire_model(self) -> str:
        """The name the provider knows the model by (Azure: the model if given, else the
        deployment)."""
        return self.model or self.deployment or ""

    def chat_url(self) -> str:
        """Where OpenAI-compatible chat completions are posted."""
        assert self.endpoint is not None
        if self.provider == "azure_openai":
            assert self.deployment is not None and self.api_version is not None
            return (f"{self.endpoint}/openai/deployments/{quote(self.deployment, safe='')}"
                    f"/chat/completions?api-version={quote(self.api_version, safe='')}")
        return f"{self.endpoint}/chat/completions"

    def body_options(self) -> dict[str, Any]:
        """The fields added to an OpenAI-compatible request body: temperature 0 unless the
        options say otherwise or the model is a known reasoning model (which refuses one)."""
        options = dict(self.options)
        if "temperature" not in options and not is_reasoning_model(self.wire_model):
            options["temperature"] = 0
        return {key: value for key, value in options.items() if value is not None}

    def summary(self) -> str:
        """A description safe to show to any client: no URL, no env names."""
        if self.description:
            return self.description
        if self.provider == "openai":
            return f"OpenAI-compatible model {self.model} (registered with the workbench)"
        if self.provider == "azure_openai":
            return (f"Azure OpenAI deployment {self.deployment} "
                    "(registered with the workbench)")
        where = f" in {self.region}" if self.region else ""
        return f"Amazon Bedrock model {self.model}{where} (registered with the workbench)"

    def public(self) -> dict[str, Any]:
        """The model as the API shows it (camelCase, no secret; URL credentials removed)."""
        out: dict[str, Any] = {"id": self.id, "name": self.name, "provider": self.provider}
        for key, value in (("description", self.description), ("model", self.model),
                           ("endpoint", redact_url(self.endpoint) if self.endpoint else None),
                           ("deployment", self.deployment), ("apiVersion", self.api_version),
                           ("region", self.region), ("apiKeyEnv", self.api_key_env)):
            if value is not None:
                out[key] = value
        out["options"] = dict(self.options)
        if self.pricing:
            out["pricing"] = dict(self.pricing)
        if self.rate_limit:
            out["rateLimit"] = dict(self.rate_limit)
        return out


def is_reasoning_model(name: str) -> bool:
    """o1, o3, o4-mini, gpt-5... (optionally behind a ``vendor/`` prefix)."""
    return bool(_REASONING.match(name))


def normalise(item: dict[str, Any]) -> tuple[dict[str, Any], dict[str, str]]:
    """The item with canonical field names, and how each canonical field was spelled."""
    out: dict[str, Any] = {}
    spelled: dict[str, str] = {}
    for key, value in item.items():
        canonical = _ALIASES.get(key, key)
        if canonical in out:
            raise SpecError(key, f'and "{spelled[canonical]}" name the same setting; give one')
        out[canonical] = value
        spelled[canonical] = key
    return out, spelled


def parse_spec(item: dict[str, Any], *, snake: bool = False,
               allow_url_credentials: bool = False,
               check_endpoint: Callable[[str], None] | None = None) -> ModelSpec:
    """Validate one model (canonical or snake_case names). ``snake``: name missing fields as the
    environment list spells them. ``check_endpoint`` raises ``EndpointRefused`` for an endpoint
    the operator does not trust (models registered through the API). Never echoes a value that
    may be a secret."""
    data, spelled = normalise(item)

    def name_of(key: str) -> str:
        return spelled.get(key) or (SNAKE.get(key, key) if snake else key)

    def fail(key: str, problem: str) -> SpecError:
        return SpecError(name_of(key), problem)

    model_id = data.get("id")
    if not isinstance(model_id, str) or not model_id:
        raise fail("id", "is required and must be a non-empty string")
    if not ID_PATTERN.match(model_id):
        raise fail("id", f"must be 1 to 128 letters, digits or . _ : - (got {model_id!r})")
    provider = data.get("provider")
    if not isinstance(provider, str) or provider not in FIELDS:
        raise fail("provider", f"must be one of {sorted(FIELDS)}, got {provider!r}")
    unknown = sorted(set(data) - FIELDS[provider])
    if unknown:
        known = sorted(name_of(k) for k in FIELDS[provider] if k != "apiKey" or not snake)
        raise fail(unknown[0], f"is not a setting of provider {provider!r} (known: {known})")

    def text(key: str, required: bool = False, limit: int = 2048) -> str | None:
        value = data.get(key)
        if value is None and not required:
            return None
        if not isinstance(value, str) or not value.strip():
            raise fail(key, "is required and must be a non-empty string" if required
                       else "must be a non-empty string")
        if len(value) > limit:
            raise fail(key, f"must be at most {limit} characters")
        return value.strip()

    name = text("name", limit=NAME_CHARS) or model_id
    description = text("description", limit=DESCRIPTION_CHARS)
    endpoint = deployment = api_version = region = api_key_env = None
    model = text("model", required=provider != "azure_openai", limit=256)
    if provider in ("openai", "azure_openai"):
        endpoint = _endpoint(fail, text("endpoint", required=True), provider,
                             allow_url_credentials)
        if check_endpoint is not None:
            try:
                check_endpoint(endpoint)
            except EndpointRefused as exc:
                raise fail("endpoint", str(exc)) from None
        api_key_env = text("apiKeyEnv", limit=256)
        if api_key_env is not None and not _ENV_NAME.match(api_key_env):
            # The value is not echoed: it is most likely a key pasted in the wrong place.
            raise fail("apiKeyEnv", "must be the NAME of an environment variable holding the "
                                    "key (such as OPENAI_API_KEY), not the key itself")
    if provider == "azure_openai":
        deployment = text("deployment", required=True, limit=64)
        assert deployment is not None
        if not _DEPLOYMENT.match(deployment):
            raise fail("deployment", "must be the deployment name: letters, digits, . _ -")
        api_version = text("apiVersion", limit=40) or AZURE_API_VERSION
        if not _API_VERSION.match(api_version):
            raise fail("apiVersion", f"must look like {AZURE_API_VERSION} or "
                                     "2025-01-01-preview")
    if provider == "bedrock":
        region = text("region", limit=64)
    options = _options(fail, data.get("options"), provider)
    pricing = _pricing(fail, data.get("pricing"))
    rate_limit = _rate_limit(fail, data.get("rateLimit"))
    return ModelSpec(model_id, name, provider, model, description, endpoint, deployment,
                     api_version, region, api_key_env, options, pricing, rate_limit)


def check_api_key(value: Any, field_name: str = "apiKey") -> str:
    """A key given to the API: a non-empty string of sane length (never echoed)."""
    if not isinstance(value, str) or not value.strip():
        raise SpecError(field_name, "must be a non-empty string")
    if len(value) > MAX_KEY_CHARS:
        raise SpecError(field_name, f"must be at most {MAX_KEY_CHARS} characters")
    return value.strip()


def _endpoint(fail: Any, value: str | None, provider: str, allow_credentials: bool) -> str:
    assert value is not None
    parts = urlsplit(value)
    example = ("https://api.openai.com/v1" if provider == "openai"
               else "https://my-resource.openai.azure.com")
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise fail("endpoint", f"must be an http(s) URL such as {example}, "
                               f"got {redact_url(value)!r}")
    if (parts.username or parts.password) and not allow_credentials:
        raise fail("endpoint", "must not carry credentials: give the key as apiKey or "
                               "apiKeyEnv")
    if parts.query or parts.fragment:
        raise fail("endpoint", f"must be a base URL without query or fragment, such as "
                               f"{example}")
    return value.rstrip("/")


def _number(where: str, value: Any, low: float, high: float, note: str = "") -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise SpecError(where, f"must be a number from {low:g} to {high:g}{note}")
    if not low <= value <= high:
        raise SpecError(where, f"must be a number from {low:g} to {high:g}{note}, got {value:g}")
    return value


def _options(fail: Any, value: Any, provider: str) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise fail("options", "must be an object such as "
                              '{"temperature": null, "max_completion_tokens": 2000}')
    known = OPTIONS[provider]
    out: dict[str, Any] = {}
    for key, option in value.items():
        where = f"options.{key}"
        if key not in known:
            raise SpecError(where, f"is not an option of provider {provider!r} "
                                   f"(known: {list(known)})")
        if key == "temperature":
            top = 1.0 if provider == "bedrock" else 2.0
            out[key] = None if option is None else _number(
                where, option, 0, top, " (null: send none)")
        elif key in ("max_tokens", "max_completion_tokens"):
            if isinstance(option, bool) or not isinstance(option, int) or option < 1:
                raise SpecError(where, "must be a positive integer")
            out[key] = option
        elif key == "reasoning_effort":
            if option not in REASONING_EFFORTS:
                raise SpecError(where, f"must be one of {list(REASONING_EFFORTS)}")
            out[key] = option
    if "max_tokens" in out and "max_completion_tokens" in out:
        raise SpecError("options.max_tokens", "and options.max_completion_tokens cannot both "
                                              "be set; reasoning models take only "
                                              "max_completion_tokens")
    return out


def _pricing(fail: Any, value: Any) -> dict[str, float]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise fail("pricing", 'must be an object such as '
                              '{"inputPerMillion": 0.15, "outputPerMillion": 0.6}')
    out: dict[str, float] = {}
    for key, price in value.items():
        where = f"pricing.{key}"
        if key not in PRICES:
            raise SpecError(where, f"is not a price (known: {list(PRICES)})")
        out[key] = _number(where, price, 0, 1_000_000)
    return out


def _rate_limit(fail: Any, value: Any) -> dict[str, int]:
    """Requests and tokens per minute, shared by every process (``workbench.llm.rate_limit``)."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise fail("rateLimit", 'must be an object such as '
                                '{"requestsPerMinute": 500, "tokensPerMinute": 200000}')
    out: dict[str, int] = {}
    for key, limit in value.items():
        where = f"rateLimit.{key}"
        if key not in RATE_LIMITS:
            raise SpecError(where, f"is not a limit (known: {list(RATE_LIMITS)})")
        if isinstance(limit, bool) or not isinstance(limit, int) \
                or not 1 <= limit <= MAX_PER_MINUTE:
            raise SpecError(where, f"must be an integer from 1 to {MAX_PER_MINUTE}")
        out[key] = limit
    return out
