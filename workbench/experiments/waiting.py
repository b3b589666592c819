"""An experiment may be created while its judgment lists are still being generated (a script
that creates a judgment and then an experiment at once); its job waits for them, bounded.

The wait does not hold a worker: while a judgment is ``PROCESSING`` or ``RETRYING`` the job
raises :class:`JudgmentsPending` and its task is queued again a few seconds later. A worker with
one slot could otherwise spend it waiting for a judgment queued behind it. The bound
(``WORKBENCH_JUDGMENT_WAIT``) is counted from the experiment's creation (a scheduled run's fire
time), which every delivery of the job reads again, so it holds across re-queues and workers.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, datetime
from typing import Any

from opensearchpy import OpenSearch

from workbench.jobs.base import JobFailed
from workbench.store.indices import JUDGMENT_INDEX
from workbench.store.repository import Repository

RUNNING = ("PROCESSING", "RETRYING")
PHASE = "waiting for judgments"
#: longest pause between two looks at the judgments while waiting
POLL_MAX_SECONDS = 10.0


class JudgmentsPending(Exception):
    """Some judgment lists are still being generated; run the job again later."""


def poll_delay(attempt: int) -> float:
    """Seconds before the next look: 1, 2, 4, 8, then every ``POLL_MAX_SECONDS``."""
    return float(min(POLL_MAX_SECONDS, 2 ** min(attempt, 10)))


def seconds_since(timestamp: Any) -> float:
    """Seconds since an ISO timestamp; a missing or unreadable one counts as long ago, so a
    wait can never be unbounded."""
    try:
        started = datetime.fromisoformat(str(timestamp))
    except ValueError:
        return float("inf")
    if started.tzinfo is None:
        started = started.replace(tzinfo=UTC)
    return (datetime.now(UTC) - started).total_seconds()


def await_judgments(client: OpenSearch, judgment_ids: list[str], since: Any,
                    bound: float) -> None:
    """Return when every judgment list is finished; raise :class:`JudgmentsPending` while some
    is still generated within ``bound`` seconds of ``since``; raise :class:`JobFailed` naming
    the judgment and its state when one ended ``ERROR``, vanished, or the bound passed."""
    repo = Repository(client, JUDGMENT_INDEX)
    check_judgments([(judgment_id, repo.get_source(judgment_id, ["status", "metadata.error"]))
                     for judgment_id in judgment_ids], since, bound)


def check_judgments(found: Iterable[tuple[str, dict[str, Any] | None]], since: Any,
                    bound: float) -> None:
    """``await_judgments`` on judgments already read (id and source, None when missing): a run
    that reads its judgments whole anyway need not read their status first."""
    pending = []
    for judgment_id, source in found:
        if source is None:
            raise JobFailed(f"Judgment [{judgment_id}] does not exist")
        status = source.get("status")
        if status == "ERROR":
            error = (source.get("metadata") or {}).get("error")
            raise JobFailed(f"Judgment [{judgment_id}] ended ERROR"
                            + (f" ({error})" if error else "")
                            + "; the experiment did not run")
        if status in RUNNING:
            pending.append((judgment_id, status))
    if not pending:
        return
    if seconds_since(since) > bound:
        judgment_id, status = pending[0]
        raise JobFailed(f"Judgment [{judgment_id}] is still {status} after waiting "
                        f"{bound:g} s (WORKBENCH_JUDGMENT_WAIT); the experiment did not run")
    raise JudgmentsPending(", ".join(judgment_id for judgment_id, _ in pending))
