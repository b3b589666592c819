"""Models registered at run time, as the judgment job and ``_evaluate`` use them.

Every lookup reads the model's document (a realtime GET by id), so a model added, changed or
deleted through any API process is used by the very next job of every worker, without a
restart. The client built for one version of a document (its ``_seq_no``/``_primary_term``) is
kept, so its connection pool is reused until the document changes.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from typing import Any

from workbench.config import Config
from workbench.llm.base import ChatModel, ModelUnusable
from workbench.llm.endpoints import EndpointPolicy, EndpointRefused
from workbench.llm.registry import build_model
from workbench.llm.secrets import SecretBox, SecretKeyMissing, UndecryptableKey
from workbench.llm.spec import ModelSpec, SpecError, parse_spec
from workbench.store.models import SECRET_FIELD, ModelStore

log = logging.getLogger(__name__)

SPEC_FIELDS = ("id", "name", "description", "provider", "endpoint", "model", "deployment",
               "apiVersion", "region", "apiKeyEnv", "options", "pricing", "rateLimit")
_KEEP = 64


def stored_spec(doc: dict[str, Any]) -> ModelSpec:
    """The spec of a stored document (validated again: a document written by hand or by an
    older version fails here, clearly, rather than in the provider)."""
    return parse_spec({k: doc[k] for k in SPEC_FIELDS if doc.get(k) is not None})


class StoredModels:
    """``Registry.runtime``: the models index read with ``store()``'s client. ``identity()``
    wraps each read: the service identity in a worker, the caller in an API process."""

    def __init__(self, store: Callable[[], ModelStore], config: Config, box: SecretBox,
                 identity: Callable[[], AbstractContextManager[Any]] = nullcontext) -> None:
        self._store = store
        self._config = config
        self._box = box
        self._identity = identity
        self._lock = threading.Lock()
        self._built: dict[tuple[str, int, int], ChatModel] = {}

    def get(self, model_id: str) -> ChatModel | None:
        with self._identity():
            found = self._store().get(model_id)
        if found is None:
            return None
        doc, (seq_no, primary_term) = found
        key = (model_id, seq_no, primary_term)
        with self._lock:
            model = self._built.get(key)
        if model is not None:
            return model
        model = self._build(model_id, doc)
        with self._lock:
            if len(self._built) >= _KEEP:
                self._built.clear()
            self._built[key] = model
        return model

    def specs(self) -> list[ModelSpec]:
        with self._identity():
            docs = self._store().all()
        out = []
        for doc in docs:
            try:
                out.append(stored_spec(doc))
            except SpecError as exc:
                log.warning("stored model %r is not valid and is not listed: %s",
                            doc.get("id"), exc)
        return out

    def _build(self, model_id: str, doc: dict[str, Any]) -> ChatModel:
        try:
            spec = stored_spec(doc)
        except SpecError as exc:
            raise ModelUnusable(model_id, f"the stored model is not valid: {exc}") from None
        api_key = None
        token = doc.get(SECRET_FIELD)
        if token:
            try:
                api_key = self._box.decrypt(str(token))
            except (SecretKeyMissing, UndecryptableKey) as exc:
                raise ModelUnusable(model_id, str(exc)) from None
        policy = EndpointPolicy.from_config(self._config)
        if spec.endpoint is not None:
            try:  # the operator's rules may have changed since it was registered
                policy.check_url(spec.endpoint)
            except EndpointRefused as exc:
                raise ModelUnusable(model_id, f'field "endpoint" {exc}') from None
        return build_model(spec, self._config, api_key, policy)
