"""Logging set-up, with a filter that masks credentials wherever they would appear, in two
formats: ``text`` (one line, for people) and ``json`` (one object per line, for log shippers,
written by python-json-logger), chosen by ``WORKBENCH_LOG_FORMAT``. A line logged while a job
runs carries the job's kind, entity id and task id (``JobFields``): as fields in JSON.

Every pattern runs in linear time (a literal start, possessive quantifiers) and a message is cut
to ``MAX_MESSAGE_CHARS`` before it is redacted, so a request value of any length costs the filter
a bounded amount of work (a quadratic pattern once let one long value hang an API worker).

Two filters keep what is expected from looking like trouble (``quiet_expected_lines``):
``Expected404s`` drops opensearch-py's WARNING for a 404 (the workbench asks for documents that
may not exist: a schedule, an entity being deleted), and ``BrokerOutageLines`` turns the lines
Celery's consumer writes while its broker is away (a warning with chained tracebacks, an ERROR
every retry) into one WARNING when the connection is lost and one INFO when it is back.
"""

from __future__ import annotations

import logging
import re
import sys
import time
from typing import Any

from pythonjsonlogger.json import JsonFormatter

MAX_MESSAGE_CHARS = 8_192
MAX_TRACEBACK_CHARS = 32_768

_SECRETS = [
    # [user]:password@ in URLs (whatever the scheme: the match starts at "://"; Redis URLs
    # give a password alone, redis://:password@host, and so does each sentinel:// entry)
    (re.compile(r"://[^/\s:@]*+:[^/\s@]++@"), "://****@"),
    # Authorization headers and API keys
    (re.compile(r"(?i)(authorization['\"]?\s*+[:=]\s*+['\"]?)(basic|bearer)\s++"
                r"[A-Za-z0-9+/=._-]++"), r"\1\2 ****"),
    (re.compile(r"(?i)(api[_-]?key['\"]?\s*+[:=]\s*+['\"]?)[A-Za-z0-9._-]{8,}+"), r"\1****"),
]
# What a cut can leave at the end: a URL whose user:password@ lost its "@" (the other patterns
# still match a shortened credential).
_CUT_USERINFO = re.compile(r"://[^/\s@]*+\Z")


def redact(text: str) -> str:
    """Mask credentials in a log line."""
    for pattern, replacement in _SECRETS:
        text = pattern.sub(replacement, text)
    return text


def truncate(text: str, limit: int = MAX_MESSAGE_CHARS) -> str:
    """``text`` cut to ``limit`` characters with a marker saying how much was dropped; a URL
    cut before its ``@`` loses what may be its credentials."""
    if len(text) <= limit:
        return text
    head = _CUT_USERINFO.sub("://****", text[:limit])
    return f"{head}... [{len(text) - limit} more characters truncated]"


class RedactingFilter(logging.Filter):
    """Rewrites each record's message (and traceback) so that no credential and no unbounded
    value reaches a handler."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        cleaned = redact(truncate(message))
        if cleaned != message:
            record.msg, record.args = cleaned, None
        if record.exc_info and not record.exc_text:
            trace = logging.Formatter().formatException(record.exc_info)
            record.exc_text = redact(truncate(trace, MAX_TRACEBACK_CHARS))
        return True


TEXT_FORMAT = "%(asctime)s %(levelname)s [%(process)d] %(name)s: %(message)s"
JSON_FIELDS = ("asctime", "levelname", "name", "process", "message")


class JobFields(logging.Filter):
    """Adds the fields of the Celery task running in this thread, if any: ``job`` (its kind,
    ``instruments.job_kind``), ``entity_id`` (what the task's ``log_entity`` names) and
    ``task_id``. Celery's own lines about the task (its success, its failure) are logged while
    it is still current, so they carry them too."""

    def filter(self, record: logging.LogRecord) -> bool:
        state = sys.modules.get("celery._state")  # no Celery in this process: no task
        task = state.get_current_task() if state is not None else None
        request = getattr(task, "request", None)
        if task is None or request is None or request.id is None:
            return True
        # Imported here: importing prometheus-client before ``exporter.enable`` would keep
        # this process's samples out of the shared files.
        from workbench.telemetry.instruments import job_kind

        record.job = job_kind(task.name)
        record.task_id = request.id
        name_entity = getattr(task, "log_entity", None)
        args, kwargs = tuple(request.args or ()), dict(request.kwargs or {})
        entity = name_entity(args, kwargs) if name_entity else (args[0] if args else None)
        record.entity_id = "" if entity is None else str(entity)
        return True


class RedactedJsonFormatter(JsonFormatter):
    """One JSON object per line; the traceback, which python-json-logger formats again from the
    exception, is redacted as the text format's is."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(list(JSON_FIELDS), rename_fields={"asctime": "time", "levelname": "level",
                                                           "name": "logger"}, **kwargs)

    def formatException(self, ei: Any) -> str:
        return redact(truncate(str(super().formatException(ei)), MAX_TRACEBACK_CHARS))


class Expected404s(logging.Filter):
    """On opensearch-py's ``opensearch`` logger: a request the cluster answered 404 is not
    logged at WARNING (opensearch-py logs every failed request so): the workbench expects such
    answers (a document that may not exist) and answers them itself. It is kept at DEBUG, when
    the ``opensearch`` logger logs DEBUG; every other failure still logs as opensearch-py logs
    it."""

    def filter(self, record: logging.LogRecord) -> bool:
        args = record.args
        if (record.levelno == logging.WARNING and isinstance(args, tuple) and len(args) == 4
                and args[2] == 404 and record.msg == "%s %s [status:%s request:%.3fs]"):
            record.levelno, record.levelname = logging.DEBUG, "DEBUG"
            return logging.getLogger(record.name).isEnabledFor(logging.DEBUG)
        return True


#: Celery's consumer, which logs the loss of its broker and its reconnection attempts
CELERY_CONSUMER = "celery.worker.consumer.consumer"
#: Celery's connection step, which logs "Connected to <broker>" when it (re)connects
CELERY_CONNECTION = "celery.worker.consumer.connection"


class BrokerOutageLines(logging.Filter):
    """On Celery's consumer loggers, per outage of the broker: the "Connection to broker lost"
    warning (with its chained tracebacks) becomes one WARNING line naming the fault; the ERROR
    of every reconnection attempt is dropped while the broker is away, and the notes on the
    prefetch count Celery lowers and restores around a reconnection always are; the
    reconnection is one INFO line. The ERRORs of a broker missing at start-up are left as
    Celery writes them."""

    LOST = "consumer: Connection to broker lost."
    RETRYING = "consumer: Cannot connect to "
    PREFETCH = ("Temporarily reducing the prefetch count", "Resuming normal operations")

    def __init__(self) -> None:
        super().__init__()
        self.lost_at: float | None = None

    def filter(self, record: logging.LogRecord) -> bool:
        message = str(record.msg)
        if record.name == CELERY_CONSUMER and message.startswith(self.LOST):
            exc = record.exc_info[1] if record.exc_info else None
            fault = f"{type(exc).__name__}: {exc}" if exc is not None else "unknown fault"
            record.msg = ("lost the connection to the broker (%s); running jobs keep running, "
                          "reconnecting until it is back")
            record.args = (fault.splitlines()[0][:500],)
            record.exc_info, record.exc_text, record.stack_info = None, None, None
            self.lost_at = time.monotonic()
            return True
        if record.name == CELERY_CONSUMER and message.startswith(self.PREFETCH):
            return False  # only ever logged around a reconnection
        if self.lost_at is None:
            return True
        if record.name == CELERY_CONSUMER:
            return not message.startswith(self.RETRYING)
        if record.name == CELERY_CONNECTION and message.startswith("Connected to"):
            record.msg = "the broker is back (%s) after %.0f s: consuming again"
            where = record.args[0] if isinstance(record.args, tuple) and record.args else "?"
            where = re.sub(r"://[^/@]*@", "://", str(where))  # kombu writes redis://:**@host
            record.args = (where, time.monotonic() - self.lost_at)
            self.lost_at = None
        return True


class SettledWarnings(logging.Filter):
    """On ``py.warnings``: drops the warnings about a choice the workbench made on purpose
    (Celery's worker turns every warning of its own on at start, so a ``warnings`` filter set
    before would not hold)."""

    SETTLED = ("worker_cancel_long_running_tasks_on_connection_loss",)

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        return not any(setting in message for setting in self.SETTLED)


def quiet_expected_lines() -> None:
    """Install ``Expected404s``, ``BrokerOutageLines`` and ``SettledWarnings`` (once per
    process): the last silences Celery's notice, at every lost connection, that cancelling
    running jobs then will become the default; ``jobs.celery_app`` sets
    ``worker_cancel_long_running_tasks_on_connection_loss`` to False on purpose."""
    search = logging.getLogger("opensearch")
    if not any(isinstance(f, Expected404s) for f in search.filters):
        search.addFilter(Expected404s())
    consumer, connection = logging.getLogger(CELERY_CONSUMER), logging.getLogger(CELERY_CONNECTION)
    if not any(isinstance(f, BrokerOutageLines) for f in consumer.filters):
        outage = BrokerOutageLines()  # one outage state for both loggers
        consumer.addFilter(outage)
        connection.addFilter(outage)
    captured = logging.getLogger("py.warnings")  # Celery's worker logs warnings there
    if not any(isinstance(f, SettledWarnings) for f in captured.filters):
        captured.addFilter(SettledWarnings())


def formatter(fmt: str) -> logging.Formatter:
    return RedactedJsonFormatter() if fmt == "json" else logging.Formatter(TEXT_FORMAT)


def setup_logging(level: str, fmt: str = "text") -> None:
    """Configure the root logger once per process."""
    root = logging.getLogger()
    if not any(isinstance(h, logging.StreamHandler) and getattr(h, "_workbench", False)
               for h in root.handlers):
        handler = logging.StreamHandler()
        handler._workbench = True  # type: ignore[attr-defined]
        handler.setFormatter(formatter(fmt))
        handler.addFilter(JobFields())
        handler.addFilter(RedactingFilter())
        root.addHandler(handler)
    root.setLevel(level.upper())
    logging.getLogger("opensearch").setLevel(logging.WARNING)
    logging.getLogger("urllib3").setLevel(logging.WARNING)
    quiet_expected_lines()
