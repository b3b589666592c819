"""Logging set-up, with a filter that masks credentials wherever they would appear."""

from __future__ import annotations

import logging
import re

_SECRETS = [
    # user:password@ in URLs
    (re.compile(r"(?P<scheme>[a-zA-Z][a-zA-Z0-9+.-]*://)[^/\s:@]+:[^/\s@]+@"), r"\g<scheme>****@"),
    # Authorization headers and API keys
    (re.compile(r"(?i)(authorization['\"]?\s*[:=]\s*['\"]?)(basic|bearer)\s+[A-Za-z0-9+/=._-]+"),
     r"\1\2 ****"),
    (re.compile(r"(?i)(api[_-]?key['\"]?\s*[:=]\s*['\"]?)[A-Za-z0-9._-]{8,}"), r"\1****"),
]


def redact(text: str) -> str:
    """Mask credentials in a log line."""
    for pattern, replacement in _SECRETS:
        text = pattern.sub(replacement, text)
    return text


class RedactingFilter(logging.Filter):
    """Rewrites each record's message so that no credential reaches a handler."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        cleaned = redact(message)
        if cleaned != message:
            record.msg, record.args = cleaned, None
        return True


def setup_logging(level: str) -> None:
    """Configure the root logger once per process."""
    root = logging.getLogger()
    if not any(isinstance(h, logging.StreamHandler) and getattr(h, "_workbench", False)
               for h in root.handlers):
        handler = logging.StreamHandler()
        handler._workbench = True  # type: ignore[attr-defined]
        handler.setFormatter(
            logging.Formatter("%(asctime)s %(levelname)s [%(process)d] %(name)s: %(message)s")
        )
        handler.addFilter(RedactingFilter())
        root.addHandler(handler)
    root.setLevel(level.upper())
    logging.getLogger("opensearch").setLevel(logging.WARNING)
    logging.getLogger("urllib3").setLevel(logging.WARNING)
