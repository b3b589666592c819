"""What is expected is not logged as trouble: opensearch-py's WARNING for a 404, and Celery's
lines while its broker is away (``telemetry.logs.quiet_expected_lines``)."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest
import redis

from workbench.telemetry.logs import CELERY_CONNECTION, CELERY_CONSUMER, quiet_expected_lines


class Kept(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


@pytest.fixture
def kept() -> Iterator[Kept]:
    quiet_expected_lines()
    quiet_expected_lines()  # installed once, however often it is called
    handler = Kept()
    names = ("opensearch", CELERY_CONSUMER, CELERY_CONNECTION, "py.warnings")
    levels = {name: logging.getLogger(name).level for name in names}
    for name in names:
        logging.getLogger(name).addHandler(handler)
        logging.getLogger(name).setLevel(logging.INFO)
    yield handler
    for name in names:
        logging.getLogger(name).removeHandler(handler)
        logging.getLogger(name).setLevel(levels[name])


def lines(kept: Kept) -> list[tuple[str, str, bool]]:
    return [(r.levelname, r.getMessage(), bool(r.exc_info)) for r in kept.records]


def test_a_404_from_the_cluster_is_not_a_warning_and_other_failures_are(kept: Kept) -> None:
    search = logging.getLogger("opensearch")
    fmt = "%s %s [status:%s request:%.3fs]"
    search.warning(fmt, "GET", "http://127.0.0.1:9200/jobs/_doc/x", 404, 0.004)
    search.warning(fmt, "DELETE", "http://127.0.0.1:9200/jobs/_doc/x", 404, 0.004)
    search.warning(fmt, "GET", "http://127.0.0.1:9200/jobs/_doc/x", 500, 0.004)
    search.warning(fmt, "GET", "http://127.0.0.1:9200/jobs/_doc/x", "N/A", 0.004)
    assert lines(kept) == [
        ("WARNING", "GET http://127.0.0.1:9200/jobs/_doc/x [status:500 request:0.004s]", False),
        ("WARNING", "GET http://127.0.0.1:9200/jobs/_doc/x [status:N/A request:0.004s]", False)]


def lost() -> BaseException:
    """A fault with a chained cause, as the consumer's is."""
    try:
        try:
            raise ConnectionRefusedError(111, "Connection refused")
        except OSError as exc:
            raise redis.exceptions.ConnectionError("Connection closed by server.") from exc
    except redis.exceptions.ConnectionError as exc:
        return exc


def test_a_broker_outage_is_one_warning_and_one_info(kept: Kept) -> None:
    consumer, connection = logging.getLogger(CELERY_CONSUMER), logging.getLogger(CELERY_CONNECTION)
    uri = "redis://127.0.0.1:6379/0"
    fault = lost()
    celery_notice = ("consumer.py:397: CPendingDeprecationWarning: \nIn Celery 5.1 we "
                     "introduced an optional breaking change ... You can enable this behavior "
                     "using the worker_cancel_long_running_tasks_on_connection_loss\nsetting.")
    consumer.warning("consumer: Connection to broker lost. Trying to re-establish the "
                     "connection...", exc_info=(type(fault), fault, fault.__traceback__))
    logging.getLogger("py.warnings").warning("%s", celery_notice)
    logging.getLogger("py.warnings").warning("%s", "another warning: kept")
    for attempt in (1, 2, 3):
        consumer.error("consumer: Cannot connect to %s: %s.\n%s\n", uri,
                       "Error 111 connecting to 127.0.0.1:6379. Connection refused.",
                       f"Trying again in {2 * attempt:.2f} seconds... ({attempt}/None)")
    consumer.info("Temporarily reducing the prefetch count to 1 to avoid over-fetching since "
                  "1 tasks are currently being processed.\nThe prefetch count will be "
                  "gradually restored to 2 as the tasks complete processing.")
    connection.info("Connected to %s", "redis://:**@127.0.0.1:6379/0")  # as kombu writes it
    consumer.info("Resuming normal operations following a restart.\nPrefetch count has been "
                  "restored to the maximum of 2")
    assert len(kept.records) == 3
    assert lines(kept)[:2] == [
        ("WARNING", "lost the connection to the broker (ConnectionError: Connection closed by "
                    "server.); running jobs keep running, reconnecting until it is back", False),
        ("WARNING", "another warning: kept", False)]
    level, message, traced = lines(kept)[2]
    assert (level, traced) == ("INFO", False)
    assert message.startswith(f"the broker is back ({uri}) after ")
    assert message.endswith(" s: consuming again")
    assert kept.records[0].exc_text is None


def test_a_broker_missing_at_start_up_is_still_an_error(kept: Kept) -> None:
    consumer, connection = logging.getLogger(CELERY_CONSUMER), logging.getLogger(CELERY_CONNECTION)
    uri = "redis://127.0.0.1:6379/0"
    consumer.error("consumer: Cannot connect to %s: %s.\n%s\n", uri, "Error 111",
                   "Trying again in 2.00 seconds... (1/None)")
    connection.info("Connected to %s", uri)
    assert [(level, message.splitlines()[0]) for level, message, _ in lines(kept)] == [
        ("ERROR", f"consumer: Cannot connect to {uri}: Error 111."),
        ("INFO", f"Connected to {uri}")]
