"""WORKBENCH_LOG_FORMAT=json: one object per line with fixed field names, credentials masked in
the message and in the traceback as in the text format."""

from __future__ import annotations

import json
import logging
import sys

from workbench.telemetry.logs import JobFields, RedactingFilter, formatter


def _line(fmt: str, record: logging.LogRecord) -> str:
    for flt in (JobFields(), RedactingFilter()):
        flt.filter(record)
    return formatter(fmt).format(record)


def _record(msg: str, *args: object, exc_info: object = None) -> logging.LogRecord:
    return logging.LogRecord("workbench.x", logging.WARNING, __file__, 1, msg, args or None,
                             exc_info)  # type: ignore[arg-type]


def test_a_json_line_has_the_documented_fields_and_no_credentials() -> None:
    record = _record("calling %s", "http://admin:hunter2@es:9200/_search")
    out = json.loads(_line("json", record))
    assert out == {"time": out["time"], "level": "WARNING", "logger": "workbench.x",
                   "process": record.process, "message": "calling http://****@es:9200/_search"}


def test_a_json_traceback_is_redacted_too() -> None:
    try:
        raise RuntimeError("cannot reach https://u:topsecret@model.example/v1")
    except RuntimeError:
        info = sys.exc_info()
    out = json.loads(_line("json", _record("failed", exc_info=info)))
    assert "topsecret" not in out["exc_info"]
    assert "https://****@model.example/v1" in out["exc_info"]
    assert out["exc_info"].startswith("Traceback (most recent call last):")


def test_outside_a_task_there_are_no_job_fields() -> None:
    out = json.loads(_line("json", _record("plain")))
    assert "job" not in out and "entity_id" not in out and "task_id" not in out


def test_the_text_format_is_one_line_as_before() -> None:
    line = _line("text", _record("calling %s", "http://a:b@h/"))
    pid = _record("").process
    assert line.endswith(f" WARNING [{pid}] workbench.x: calling http://****@h/")
